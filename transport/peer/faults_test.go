package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftq/raftq/raftgroup"
)

// faultConn passes writes through fault, which sees each write's offset in
// the connection's byte stream and may rewrite it or cut the connection.
type faultConn struct {
	net.Conn
	off   int64
	fault func(off int64, p []byte) ([]byte, bool)
}

func (c *faultConn) Write(p []byte) (int, error) {
	q, cut := c.fault(c.off, p)
	c.off += int64(len(p))
	if cut {
		n, _ := c.Conn.Write(q)
		c.Conn.Close()
		return n, errors.New("fault: connection cut")
	}
	if _, err := c.Conn.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// faultDial passes the connections a node dials to target through fault.
func faultDial(target string, fault func(off int64, p []byte) ([]byte, bool)) func(*Config) {
	return func(c *Config) {
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil || addr != target {
				return conn, err
			}
			return &faultConn{Conn: conn, fault: fault}, nil
		}
	}
}

// helloLen is the size of a hello in a test cluster's handshake.
var helloLen = int64(len(appendHello(nil, hello{cluster: "test-cluster"})))

// pump sends numbered batches from a to b until b has received index mark
// or later (lost batches are not resent, later ones are), and checks that b
// received what it got in order, without duplicates.
func pump(t *testing.T, a, b *node, next *uint64, mark uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("node %d receives message %d", b.id, mark), func() bool {
		got := b.recv.from(a.id)
		if len(got) > 0 && got[len(got)-1].Msg.GetIndex() >= mark {
			return true
		}
		if a.Stats().Peers[b.id].Queued < 10 {
			a.Send(b.id, []raftgroup.Envelope{{Group: 1, Msg: msg(*next, make([]byte, 100))}})
			*next++
		}
		return false
	})
	got := b.recv.from(a.id)
	for i := 1; i < len(got); i++ {
		if got[i].Msg.GetIndex() <= got[i-1].Msg.GetIndex() {
			t.Fatalf("message %d after %d: out of order or duplicated", got[i].Msg.GetIndex(), got[i-1].Msg.GetIndex())
		}
	}
}

func TestTransport_CorruptFrameClosesConnectionAndRecovers(t *testing.T) {
	var flipped atomic.Bool
	n2, n3 := startNode(t, 2, nil), startNode(t, 3, nil)
	n1 := startNode(t, 1, faultDial(n2.Addr().String(), func(off int64, p []byte) ([]byte, bool) {
		target := helloLen + 40 // inside the first frame's payload
		if off <= target && target < off+int64(len(p)) && !flipped.Swap(true) {
			q := append([]byte(nil), p...)
			q[target-off] ^= 0x01
			return q, false
		}
		return p, false
	}))
	connect(n1, n2, n3)
	exchange(t, n2, n3, 1) // an unrelated connection of node 2
	next := uint64(1)
	pump(t, n1, n2, &next, 200)

	eventually(t, "node 2 logs the corrupt frame", func() bool {
		return logHas(n2.logs, "level=ERROR", "closing peer connection: corrupt stream", "peer=1", "crc")
	})
	if st := n2.Stats(); st.CorruptFrames != 1 {
		t.Errorf("CorruptFrames = %d, want 1", st.CorruptFrames)
	}
	if got := n1.Stats().Peers[2].Connects; got < 2 {
		t.Errorf("node 1 connected %d times, want a reconnect", got)
	}
	if st := n2.Stats().Peers[3]; st.Connects != 1 || st.Disconnects != 0 {
		t.Errorf("the corrupt stream from node 1 disturbed node 3's connection: %+v", st)
	}
}

func TestTransport_CutMidFrameRecovers(t *testing.T) {
	var done atomic.Bool
	n2 := startNode(t, 2, nil)
	n1 := startNode(t, 1, faultDial(n2.Addr().String(), func(off int64, p []byte) ([]byte, bool) {
		if cut := helloLen + frameHeader + 5; off <= cut && cut < off+int64(len(p)) && !done.Swap(true) {
			return p[:cut-off], true // half a frame, then the line goes dead
		}
		return p, false
	}))
	connect(n1, n2)
	next := uint64(1)
	pump(t, n1, n2, &next, 100)
	if got := n1.Stats().Peers[2].Connects; got < 2 {
		t.Errorf("node 1 connected %d times, want a reconnect", got)
	}
	// Node 2 ends the cut stream either on reading the half frame or, if
	// node 1's redial reaches it first (its accept of the first stream
	// can lag the cut), by replacing it with the new one.
	eventually(t, "node 2 ends the cut stream", func() bool {
		return logHas(n2.logs, "peer connection lost", "unexpected EOF") ||
			logHas(n2.logs, "peer connection closed", "replaced by a newer connection")
	})
	if st := n2.Stats(); st.CorruptFrames != 0 {
		t.Errorf("a cut connection counted as corrupt: %d", st.CorruptFrames)
	}
}

// rawPeer handshakes with target as node from and returns the raft stream.
func rawPeer(t *testing.T, target *node, from uint64) net.Conn {
	t.Helper()
	rp, conn := rawDial(t, target, appendHello(nil, hello{
		version: protoVersion, stream: streamRaft, from: from, to: target.id, cluster: "test-cluster",
	}))
	if err := judgeReply(rp, target.id, "test-cluster", nil); err != nil {
		t.Fatalf("raw handshake: %v", err)
	}
	conn.SetDeadline(time.Time{})
	return conn
}

func TestTransport_OversizedFrameClosesOnlyThatConnection(t *testing.T) {
	n2 := startNode(t, 2, func(c *Config) {
		c.MaxFrameBytes = 64 << 10
		c.SnapshotChunkBytes = 32 << 10
	})
	n3 := startNode(t, 3, nil)
	connect(n2, n3)
	n2.AddPeer(1, "127.0.0.1:1") // node 1 is played by raw connections
	exchange(t, n2, n3, 1)

	for round := range 2 {
		conn := rawPeer(t, n2, 1)
		frame, _ := appendBatch(nil, []raftgroup.Envelope{{Group: 1, Msg: msg(uint64(round), nil)}}, 1<<20)
		if _, err := conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the good frame is delivered", func() bool { return len(n2.recv.from(1)) == round+1 })
		if _, err := conn.Write([]byte{0x40, 0, 0, 0, 0, 0, 0, 0}); err != nil { // 1 GiB
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		if err := readUntilClosed(conn); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if !logHas(n2.logs, "level=ERROR", "corrupt stream", "frame too large", "limit 65536") {
		t.Error("node 2 did not log the oversized frame")
	}
	if st := n2.Stats().Peers[3]; st.Connects != 1 || st.Disconnects != 0 {
		t.Errorf("node 3's connection was disturbed: %+v", st)
	}
}

// readUntilClosed reads frames (pings) until the other side closes.
func readUntilClosed(conn net.Conn) error {
	fr := newFrameReader(conn, 256, 1<<20)
	for {
		kind, _, err := fr.next()
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return fmt.Errorf("connection still open: %w", err)
		case err != nil:
			return nil
		case kind != kindPing && kind != kindBatch:
			return fmt.Errorf("unexpected frame kind %d", kind)
		}
	}
}

func TestTransport_SilentPeerIsCutOff(t *testing.T) {
	n2 := startNode(t, 2, func(c *Config) {
		c.KeepaliveInterval = 50 * time.Millisecond
		c.ReadTimeout = 300 * time.Millisecond
	})
	n2.AddPeer(1, "127.0.0.1:1")
	conn := rawPeer(t, n2, 1) // says nothing after the handshake
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	fr := newFrameReader(conn, 256, 1<<20)
	pings := 0
	for {
		kind, _, err := fr.next()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("node 2 never cut off a silent peer")
			}
			break
		}
		if kind == kindPing {
			pings++
		}
	}
	if pings == 0 {
		t.Error("node 2 sent no keepalive pings on an idle connection")
	}
	eventually(t, "node 2 logs the silent peer", func() bool {
		return logHas(n2.logs, "peer silent or not reading", "peer=1")
	})
}

// fakeAcceptor accepts one raft stream as node id, answers the handshake,
// and then neither reads nor writes.
func fakeAcceptor(t *testing.T, id uint64) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		if _, err := readHello(conn); err != nil {
			conn.Close()
			return
		}
		conn.Write(appendReply(nil, reply{version: protoVersion, node: id, cluster: "test-cluster"}))
		ch <- conn
	}()
	return ln.Addr().String(), ch
}

func TestTransport_PeerNotReadingIsCutOff(t *testing.T) {
	addr, accepted := fakeAcceptor(t, 2)
	n1 := startNode(t, 1, func(c *Config) {
		c.WriteTimeout = 200 * time.Millisecond
		c.ReadTimeout = time.Minute
		c.Peers = map[uint64]string{2: addr}
	})
	conn := <-accepted
	defer conn.Close()
	big := []raftgroup.Envelope{{Group: 1, Msg: msg(1, make([]byte, 1<<20))}}
	eventually(t, "node 1 gives up on a peer that does not read", func() bool {
		n1.Send(2, big)
		return n1.Stats().Peers[2].Disconnects > 0
	})
	eventually(t, "node 1 logs why", func() bool {
		return logHas(n1.logs, "level=WARN", "peer silent or not reading", "write", "i/o timeout")
	})
}

func TestTransport_AddPeerUpdatesAddress(t *testing.T) {
	n2 := startNode(t, 2, nil)
	n1 := startNode(t, 1, func(c *Config) { c.Peers = map[uint64]string{2: freeAddr(t)} })
	n2.AddPeer(1, n1.Addr().String())
	eventually(t, "node 1 fails to reach the wrong address", func() bool { return n1.Stats().Peers[2].DialErrors > 0 })
	n1.AddPeer(2, n2.Addr().String())
	exchange(t, n1, n2, 1)
	if got := n1.Stats().Peers[2].Addr; got != n2.Addr().String() {
		t.Errorf("peer address %s, want %s", got, n2.Addr())
	}
}

// A peer that dies stays dated: LastHeard keeps the time of its last
// frame after its stream ends without a goodbye (a kill -9), so that a
// new metadata leader counts its silence from then, not from its own
// election.
func TestTransport_LastHeardOutlivesTheStream(t *testing.T) {
	n2 := startNode(t, 2, nil)
	n2.AddPeer(1, "127.0.0.1:1") // node 1 is played by a raw connection
	conn := rawPeer(t, n2, 1)
	frame, _ := appendBatch(nil, []raftgroup.Envelope{{Group: 1, Msg: msg(1, nil)}}, 1<<20)
	before := time.Now()
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the frame is delivered", func() bool { return len(n2.recv.from(1)) == 1 })
	conn.Close()
	eventually(t, "node 2 to lose node 1", func() bool { return !n2.Stats().Peers[1].Connected })
	if got := n2.Stats().Peers[1].LastHeard; got.Before(before) || got.After(time.Now()) {
		t.Fatalf("LastHeard after the loss = %v, want the frame's arrival (after %v)", got, before)
	}
	if one, ok := n2.PeerStats(1); !ok || !one.LastHeard.Equal(n2.Stats().Peers[1].LastHeard) || one.Connected {
		t.Fatalf("PeerStats(1) = %+v, %v; want Stats' view of peer 1", one, ok)
	}
	if _, ok := n2.PeerStats(9); ok {
		t.Fatal("PeerStats of an unknown peer")
	}
}
