package peer

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/raftgroup"
)

// rawDial opens a raw connection to n, sends b, and returns the reply.
func rawDial(t *testing.T, n *node, b []byte) (reply, net.Conn) {
	t.Helper()
	conn, err := net.Dial("tcp", n.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	rp, err := readReply(conn)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return rp, conn
}

// TestHandshake_AcceptorRefuses drives the accepting side with hand-made
// hellos and checks the refusal code, the reason it sends, and its own log.
func TestHandshake_AcceptorRefuses(t *testing.T) {
	n1 := startNode(t, 1, func(c *Config) {
		c.MaxSnapshotsPerPeer = 1
		c.CheckIncarnation = func(node uint64, inc string) error {
			if inc == "wiped" {
				return fmt.Errorf("node %d registered from another data directory", node)
			}
			return nil
		}
	})
	n1.AddPeer(2, "127.0.0.1:1")
	h := func(edit func(*hello)) []byte {
		v := hello{version: protoVersion, stream: streamSnapshot, from: 2, to: 1, cluster: "test-cluster"}
		edit(&v)
		return appendHello(nil, v)
	}
	cases := []struct {
		name   string
		hello  []byte
		want   error
		reason string
	}{
		{"other cluster", h(func(v *hello) { v.cluster = "other" }), ErrClusterID, "node 2 is in cluster"},
		{"our own id", h(func(v *hello) { v.from = 1 }), ErrDuplicateID, "this node's own"},
		{"meant for another node", h(func(v *hello) { v.to = 3 }), ErrWrongNode, "dialled node 3"},
		{"unknown node", h(func(v *hello) { v.from = 9 }), ErrUnknownPeer, "node 9 is not among"},
		{"higher id dials raft stream", h(func(v *hello) { v.stream = streamRaft }), ErrWrongDirection, "lower id dials"},
		{"other version", h(func(v *hello) { v.version = protoVersion + 1 }), ErrVersion, fmt.Sprintf("version %d", protoVersion+1)},
		{"wiped data directory", h(func(v *hello) { v.incarnation = "wiped" }), ErrIncarnation, "registered from another data directory"},
		{"not a peer", []byte("GET / HTTP/1.1\r\n\r\n"), ErrBadHandshake, "magic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rp, conn := rawDial(t, n1, tc.hello)
			err := judgeReply(rp, 1, "test-cluster", nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("refused side got %v, want %v mentioning %q", err, tc.want, tc.reason)
			}
			if _, err := conn.Read(make([]byte, 1)); err == nil {
				t.Error("connection left open after a refusal")
			}
			eventually(t, "the refusing side logs the reason", func() bool {
				return logHas(n1.logs, "level=ERROR", "refusing peer connection", tc.reason)
			})
		})
	}
	if got := n1.Stats().RefusedInbound; got != uint64(len(cases)) {
		t.Errorf("RefusedInbound = %d, want %d", got, len(cases))
	}

	// One snapshot stream is allowed at a time; the second is refused busy.
	rp, _ := rawDial(t, n1, h(func(*hello) {}))
	if err := judgeReply(rp, 1, "test-cluster", nil); err != nil {
		t.Fatalf("first snapshot stream: %v", err)
	}
	rp, _ = rawDial(t, n1, h(func(*hello) {}))
	if err := judgeReply(rp, 1, "test-cluster", nil); !errors.Is(err, ErrSnapshotBusy) {
		t.Errorf("second snapshot stream: %v, want ErrSnapshotBusy", err)
	}
}

// TestHandshake_BothSidesLogRefusal runs real transports that disagree and
// checks that each side logs the reason and nothing is delivered.
func TestHandshake_BothSidesLogRefusal(t *testing.T) {
	cases := []struct {
		name         string
		dialler, acc func(*Config)
		accID        uint64
		want         error
		reason       string
	}{
		{
			name:   "wrong cluster id",
			acc:    func(c *Config) { c.ClusterID = "other-cluster" },
			accID:  2,
			want:   ErrClusterID,
			reason: "node 1 is in cluster",
		},
		{
			name:   "duplicate id",
			accID:  1, // a second node 1, where node 1 expects node 2
			want:   ErrDuplicateID,
			reason: "claims node id 1, which is this node's own",
		},
		{
			name:   "not the node dialled",
			accID:  3,
			want:   ErrWrongNode,
			reason: "dialled node 2, but this is node 3",
		},
		{
			name:   "unknown to the acceptor",
			acc:    func(c *Config) { c.Peers = nil },
			accID:  2,
			want:   ErrUnknownPeer,
			reason: "node 1 is not among this node's peers",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acc := startNode(t, tc.accID, func(c *Config) {
				if tc.accID != 1 {
					c.Peers = map[uint64]string{1: "127.0.0.1:1"}
				}
				if tc.acc != nil {
					tc.acc(c)
				}
			})
			dialler := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: acc.Addr().String()} })
			dialler.Send(2, []raftgroup.Envelope{heartbeat(1)})
			eventually(t, "both sides count the refusal", func() bool {
				return dialler.Stats().RefusedOutbound > 0 && acc.Stats().RefusedInbound > 0
			})
			eventually(t, "the acceptor logs the reason", func() bool {
				return logHas(acc.logs, "level=ERROR", "refusing peer connection", tc.reason)
			})
			eventually(t, "the dialler logs the reason", func() bool {
				return logHas(dialler.logs, "level=ERROR", "cannot connect to peer", "handshake refused by node", tc.reason)
			})
			err := dialOnce(dialler, 2)
			var re *RefusedError
			if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Node != tc.accID {
				t.Errorf("dial: %v, want a RefusedError from node %d wrapping %v", err, tc.accID, tc.want)
			}
			if got := acc.recv.msgs.Load(); got != 0 {
				t.Errorf("%d messages delivered despite the refusal", got)
			}
		})
	}
}

func dialOnce(n *node, to uint64) error {
	conn, err := n.dialStream(n.ctx, n.peer(to), streamRaft)
	if err == nil {
		conn.Close()
	}
	return err
}

// TestHandshake_DiallerRefusesWipedPeer: the lower id dials, so it is the
// dialler that must notice a peer answering from a wiped data directory
// (a new incarnation), and send it nothing.
func TestHandshake_DiallerRefusesWipedPeer(t *testing.T) {
	acc := startNode(t, 2, func(c *Config) {
		c.Peers = map[uint64]string{1: "127.0.0.1:1"}
		c.Incarnation = "new-after-wipe"
	})
	dialler := startNode(t, 1, func(c *Config) {
		c.Peers = map[uint64]string{2: acc.Addr().String()}
		c.Incarnation = "one"
		c.CheckIncarnation = func(node uint64, inc string) error {
			if node == 2 && inc != "two" {
				return fmt.Errorf("node 2 registered as incarnation two, got %q", inc)
			}
			return nil
		}
	})
	dialler.Send(2, []raftgroup.Envelope{heartbeat(1)})
	eventually(t, "the dialler counts the refusal", func() bool { return dialler.Stats().RefusedOutbound > 0 })
	eventually(t, "the dialler logs why", func() bool {
		return logHas(dialler.logs, "node 2 registered as incarnation two", "new-after-wipe")
	})
	// The dialler closes a refused connection before any frame.
	if n := acc.recv.msgs.Load(); n != 0 {
		t.Errorf("the wiped peer received %d messages", n)
	}
}
