package peer

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raftq/raftq/raftgroup"
	"google.golang.org/protobuf/proto"
)

func TestTransport_DeliversBatchesInOrder(t *testing.T) {
	n1, n2, n3 := startNode(t, 1, nil), startNode(t, 2, nil), startNode(t, 3, nil)
	connect(n1, n2, n3)
	const batches = 300
	sent := map[[2]uint64][]raftgroup.Envelope{} // {from, to} -> envelopes in send order
	next := uint64(1)
	for i := range batches {
		for _, from := range []*node{n1, n2, n3} {
			for _, to := range []uint64{1, 2, 3} {
				if to == from.id {
					continue
				}
				batch := make([]raftgroup.Envelope, 1+i%5)
				for j := range batch {
					batch[j] = raftgroup.Envelope{Group: uint64(j * 1000), Msg: msg(next, []byte(fmt.Sprint("payload ", next)))}
					next++
				}
				key := [2]uint64{from.id, to}
				sent[key] = append(sent[key], batch...)
				if !from.Send(to, batch) {
					t.Fatalf("node %d: Send to %d returned false with an ample queue", from.id, to)
				}
			}
		}
	}
	nodes := map[uint64]*node{1: n1, 2: n2, 3: n3}
	for key, want := range sent {
		to := nodes[key[1]]
		eventually(t, fmt.Sprintf("node %d receives %d messages from %d", key[1], len(want), key[0]), func() bool {
			return len(to.recv.from(key[0])) >= len(want)
		})
		got := to.recv.from(key[0])
		if len(got) != len(want) {
			t.Fatalf("%d->%d: got %d messages, want %d", key[0], key[1], len(got), len(want))
		}
		for i := range want {
			if got[i].Group != want[i].Group || !proto.Equal(got[i].Msg, want[i].Msg) {
				t.Fatalf("%d->%d message %d: got %s, want %s", key[0], key[1], i, describe(got[i]), describe(want[i]))
			}
		}
	}
	if st := n1.Stats(); st.Writes == 0 || st.MessagesSent == 0 || st.Peers[2].Connects != 1 {
		t.Errorf("stats do not reflect the traffic: %+v", st)
	}
}

// TestTransport_OnePairOneConnection checks that both directions of a pair
// share the single connection the lower id dialled.
func TestTransport_OnePairOneConnection(t *testing.T) {
	n1, n2 := startNode(t, 1, nil), startNode(t, 2, nil)
	connect(n1, n2)
	n2.Send(1, []raftgroup.Envelope{heartbeat(7)})
	n1.Send(2, []raftgroup.Envelope{heartbeat(7)})
	eventually(t, "both directions deliver", func() bool {
		return len(n1.recv.from(2)) == 1 && len(n2.recv.from(1)) == 1
	})
	if c1, c2 := n1.Stats().Peers[2].Connects, n2.Stats().Peers[1].Connects; c1 != 1 || c2 != 1 {
		t.Errorf("connects: node 1 %d, node 2 %d; want one shared connection", c1, c2)
	}
	if n1.Stats().DialErrors != 0 || n2.Stats().RefusedInbound != 0 {
		t.Errorf("unexpected dial errors or refusals: %+v / %+v", n1.Stats(), n2.Stats())
	}
}

func TestTransport_SendNeverBlocksWhenPeerDown(t *testing.T) {
	n1 := startNode(t, 1, func(c *Config) { c.QueueSize = 8 })
	n1.AddPeer(2, freeAddr(t)) // nobody listens there
	n1.AddPeer(3, freeAddr(t))
	for i := range 8 {
		if !n1.Send(2, []raftgroup.Envelope{heartbeat(uint64(i))}) {
			t.Fatalf("Send %d returned false below the queue bound", i)
		}
	}
	if n1.Send(2, []raftgroup.Envelope{heartbeat(9)}) {
		t.Fatal("Send returned true with the queue full and the peer down")
	}
	if !n1.Send(3, []raftgroup.Envelope{heartbeat(9)}) {
		t.Fatal("a full queue towards node 2 refused a batch for node 3")
	}
	if n1.Send(99, []raftgroup.Envelope{heartbeat(9)}) {
		t.Fatal("Send to an unknown node returned true")
	}
	st := n1.Stats()
	if st.Dropped != 2 || st.Peers[2].Dropped != 1 || st.Peers[2].Queued != 8 || st.Peers[2].Connected {
		t.Errorf("stats: %+v, peer 2: %+v", st, st.Peers[2])
	}
	eventually(t, "dial errors are counted", func() bool { return n1.Stats().Peers[2].DialErrors >= 2 })
}

func TestTransport_SendNeverBlocksWhenPeerSlow(t *testing.T) {
	n1 := startNode(t, 1, func(c *Config) { c.QueueSize = 4 })
	n2 := startNode(t, 2, nil)
	n2.recv.gate = make(chan struct{}) // Receive blocks: TCP fills, then the queue
	connect(n1, n2)
	eventually(t, "node 1 connects", func() bool { return n1.Stats().Peers[2].Connected })
	big := make([]byte, 256<<10)
	returned := make(chan int, 1)
	go func() {
		for i := range 100_000 {
			full := !n1.Send(2, []raftgroup.Envelope{{Group: 1, Msg: msg(uint64(i), big)}})
			// A drop counts once the writer has put bytes on the wire and
			// is stuck behind TCP, not merely slower to start than we are.
			if full && n1.Stats().Peers[2].BytesSent > 0 {
				returned <- i
				return
			}
		}
		returned <- -1
	}()
	select {
	case i := <-returned:
		if i < 0 {
			t.Fatal("Send never reported a full queue towards a peer that reads nothing")
		}
		st := n1.Stats().Peers[2]
		if st.Dropped == 0 || !st.Connected {
			t.Errorf("peer stats at the drop: %+v", st)
		}
		t.Logf("queue full after %d batches, %d bytes written", i, st.BytesSent)
	case <-time.After(60 * time.Second): // hang guard only
		t.Fatal("Send blocked behind a slow peer")
	}
	close(n2.recv.gate)
	eventually(t, "the backlog drains once the peer reads", func() bool {
		return n1.Stats().Peers[2].Queued == 0 && n2.recv.msgs.Load() > 0
	})
}

func TestTransport_ReconnectsAfterPeerRestart(t *testing.T) {
	for _, restart := range []uint64{1, 2} { // the dialling side, the accepting side
		t.Run(fmt.Sprintf("restart node %d", restart), func(t *testing.T) {
			nodes := map[uint64]*node{1: startNode(t, 1, nil), 2: startNode(t, 2, nil)}
			connect(nodes[1], nodes[2])
			other := 3 - restart
			exchange(t, nodes[1], nodes[2], 1)

			addr := nodes[restart].Addr().String()
			if err := nodes[restart].Close(); err != nil {
				t.Fatal(err)
			}
			nodes[restart] = startNode(t, restart, func(c *Config) {
				c.ListenAddr = addr
				c.Peers = map[uint64]string{other: nodes[other].Addr().String()}
			})
			exchange(t, nodes[1], nodes[2], 1000)
			if got := nodes[other].Stats().Peers[restart].Connects; got < 2 {
				t.Errorf("node %d connected %d times to node %d, want a reconnect", other, got, restart)
			}
		})
	}
}

// exchange sends heartbeats both ways until each side has received one
// with index mark: raft would retransmit the same way.
func exchange(t *testing.T, a, b *node, mark uint64) {
	t.Helper()
	hb := func(i uint64) []raftgroup.Envelope { return []raftgroup.Envelope{{Group: 5, Msg: msg(i, nil)}} }
	has := func(n *node, from uint64) bool {
		for _, e := range n.recv.from(from) {
			if e.Msg.GetIndex() == mark {
				return true
			}
		}
		return false
	}
	eventually(t, fmt.Sprintf("nodes %d and %d exchange message %d", a.id, b.id, mark), func() bool {
		a.Send(b.id, hb(mark))
		b.Send(a.id, hb(mark))
		time.Sleep(5 * time.Millisecond) // pace the retransmissions, as raft's ticks would
		return has(a, b.id) && has(b, a.id)
	})
}

func TestTransport_RemovePeerStopsTraffic(t *testing.T) {
	n1, n2 := startNode(t, 1, nil), startNode(t, 2, nil)
	connect(n1, n2)
	exchange(t, n1, n2, 1)
	n2.RemovePeer(1)
	if n2.Send(1, []raftgroup.Envelope{heartbeat(1)}) {
		t.Error("Send to a removed peer returned true")
	}
	eventually(t, "node 1 loses its connection and is refused on redial", func() bool {
		st := n1.Stats()
		return !st.Peers[2].Connected && st.RefusedOutbound > 0
	})
	if !logHas(n2.logs, "refusing peer connection", "not among this node's peers") {
		t.Error("node 2 did not log why it refused the removed node")
	}
	n2.AddPeer(1, n1.Addr().String())
	exchange(t, n1, n2, 2)
}

func TestTransport_Lifecycle(t *testing.T) {
	n1 := startNode(t, 1, nil)
	if err := n1.Start(newRecorder()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	if err := n1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n1.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	n1.AddPeer(2, "127.0.0.1:1")
	if n1.Send(2, []raftgroup.Envelope{heartbeat(1)}) {
		t.Error("Send after Close returned true")
	}
	var got error
	n1.SendSnapshot(2, heartbeat(1), nil, func(err error) { got = err })
	if !errors.Is(got, ErrUnknownPeer) && !errors.Is(got, ErrClosed) {
		t.Errorf("SendSnapshot after Close: %v", got)
	}
	if err := n1.Start(newRecorder()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

func TestTransport_AddPeerIgnoresSelfAndZero(t *testing.T) {
	n1 := startNode(t, 1, nil)
	n1.AddPeer(1, "127.0.0.1:1")
	n1.AddPeer(0, "127.0.0.1:1")
	if got := len(n1.Stats().Peers); got != 0 {
		t.Errorf("%d peers after adding self and 0", got)
	}
}

// TestTransport_LargeBurstsSplitInOrder sends batches much larger than the
// write buffer, which the writer then sends in pieces: every message still
// arrives once and in order.
func TestTransport_LargeBurstsSplitInOrder(t *testing.T) {
	small := func(c *Config) { c.WriteBufferBytes = 4 << 10 }
	n1, n2 := startNode(t, 1, small), startNode(t, 2, small)
	connect(n1, n2)
	var want []raftgroup.Envelope
	next := uint64(1)
	for i := range 100 {
		batch := make([]raftgroup.Envelope, 1+i%7)
		for j := range batch {
			batch[j] = raftgroup.Envelope{Group: uint64(j), Msg: msg(next, bytes.Repeat([]byte{byte(next)}, 3000))}
			next++
		}
		want = append(want, batch...)
		if !n1.Send(2, batch) {
			t.Fatalf("Send %d returned false with an ample queue", i)
		}
	}
	eventually(t, "every message delivered", func() bool { return len(n2.recv.from(1)) >= len(want) })
	got := n2.recv.from(1)
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Group != want[i].Group || !proto.Equal(got[i].Msg, want[i].Msg) {
			t.Fatalf("message %d: got %s, want %s", i, describe(got[i]), describe(want[i]))
		}
	}
	if st := n1.Stats(); st.Writes < 150 { // one write per Send would be 100
		t.Errorf("%d writes for %d bytes through a 4 KiB buffer: the bursts were not split", st.Writes, 3000*len(want))
	}
}
