package peer

import (
	"testing"
	"time"
)

// A node that stops cleanly says goodbye: its peer logs the end of the
// stream, and its failed redials while the node is away, at info. Nothing
// about a clean stop is a warning, whichever side of the stream stops.
func TestTransport_CleanStopIsNotAWarning(t *testing.T) {
	for _, stopping := range []uint64{1, 2} { // the dialling side, then the accepting side
		n1, n2 := startNode(t, 1, nil), startNode(t, 2, nil)
		connect(n1, n2)
		eventually(t, "the nodes to connect", func() bool { return n1.Stats().Peers[2].Connected && n2.Stats().Peers[1].Connected })
		gone, stays := n1, n2
		if stopping == 2 {
			gone, stays = n2, n1
		}
		if err := gone.Close(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the staying node to hear the goodbye", func() bool {
			return logHas(stays.logs, "level=INFO", "peer stopped: connection closed")
		})
		if stays == n1 { // the dialler tries to reach the stopped node again
			eventually(t, "a failed redial logged", func() bool { return logHas(stays.logs, "cannot connect to peer") })
			if !logHas(stays.logs, "level=INFO", "cannot connect to peer") {
				t.Errorf("a failed redial to a node that said goodbye was not logged at info:\n%s", stays.logs)
			}
		}
		if logHas(stays.logs, "level=WARN") || logHas(stays.logs, "level=ERROR") {
			t.Errorf("node %d stopping cleanly made node %d warn:\n%s", gone.id, stays.id, stays.logs)
		}
	}
}

// Dials to a peer never reached are quiet during the start-up grace and
// warnings after it, and a stream that ends without a goodbye is one too.
func TestTransport_UnreachablePeerWarnsAfterTheGrace(t *testing.T) {
	for _, grace := range []time.Duration{time.Hour, 0} {
		n := startNode(t, 1, func(c *Config) { c.StartupGrace = grace })
		n.AddPeer(2, freeAddr(t))
		// The failure is counted before it is logged: wait for the line.
		eventually(t, "a failed dial logged", func() bool { return logHas(n.logs, "cannot connect to peer") })
		want := "level=INFO"
		if grace == 0 {
			want = "level=WARN"
		}
		if !logHas(n.logs, want, "cannot connect to peer") {
			t.Errorf("grace %v: dial failure not logged at %s:\n%s", grace, want, n.logs)
		}
	}
}
