package peer

import (
	"errors"
	"testing"

	"github.com/raftq/raftq/raftgroup"
)

// TestHandshake_RefusesSecondLiveNodeWithSameID starts a second process's
// transport claiming node 1 while the real node 1 is connected to node 2.
// Node 2 must refuse it as a duplicate, keep the real node's stream, and
// log why; the impostor must learn it too.
func TestHandshake_RefusesSecondLiveNodeWithSameID(t *testing.T) {
	n1 := startNode(t, 1, nil)
	n2 := startNode(t, 2, nil)
	connect(n1, n2)
	eventually(t, "nodes 1 and 2 connected", func() bool { return n1.Stats().Peers[2].Connected && n2.Stats().Peers[1].Connected })

	imp := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: n2.Addr().String()} })
	err := dialOnce(imp, 2)
	if !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("impostor's dial: %v, want %v", err, ErrDuplicateID)
	}
	eventually(t, "node 2 logs the refusal", func() bool {
		return logHas(n2.logs, "level=ERROR", "refusing peer connection", "node 1 is already connected from")
	})
	eventually(t, "the impostor logs the refusal", func() bool {
		return logHas(imp.logs, "level=ERROR", "cannot connect to peer", "duplicate node id")
	})
	if got := n2.Stats().Peers[1].Connects; got != 1 {
		t.Errorf("node 2 counted %d sessions with node 1, want 1: the real stream was replaced", got)
	}
	// The real stream still carries traffic.
	n1.Send(2, []raftgroup.Envelope{heartbeat(7)})
	eventually(t, "node 2 receives from the real node 1", func() bool { return len(n2.recv.from(1)) == 1 })
}

// TestHandshake_RestartedPeerGetsIn checks that the duplicate check does
// not lock out a peer that restarted: its old stream ends when its process
// does, and its new one is accepted.
func TestHandshake_RestartedPeerGetsIn(t *testing.T) {
	n1 := startNode(t, 1, nil)
	n2 := startNode(t, 2, nil)
	connect(n1, n2)
	eventually(t, "nodes 1 and 2 connected", func() bool { return n2.Stats().Peers[1].Connected })
	n1.Close()

	again := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: n2.Addr().String()} })
	eventually(t, "the restarted node 1 connected", func() bool { return again.Stats().Peers[2].Connected })
	again.Send(2, []raftgroup.Envelope{heartbeat(7)})
	eventually(t, "node 2 receives from the restarted node 1", func() bool { return len(n2.recv.from(1)) == 1 })
	// A dial that lands before node 2's reader has seen the old stream's
	// EOF may be refused once; the dialler's next attempt gets in (above).
}
