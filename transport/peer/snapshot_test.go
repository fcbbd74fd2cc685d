package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"

	"github.com/raftq/raftq/raftgroup"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func snapEnv(group uint64) raftgroup.Envelope {
	return raftgroup.Envelope{Group: group, Msg: &raftpb.Message{
		Type: raftpb.MsgSnap.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(4)),
		Snapshot: &raftpb.Snapshot{Data: []byte("partition meta"), Metadata: &raftpb.SnapshotMetadata{
			Index: new(uint64(1000)), Term: new(uint64(4)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}},
		}},
	}}
}

// smallSocketBuffers shrinks the kernel buffers of every connection a node
// opens or accepts, through the injectable Dial and Listen.
func smallSocketBuffers(c *Config) {
	shrink := func(conn net.Conn) {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetReadBuffer(16 << 10)
			tc.SetWriteBuffer(16 << 10)
		}
	}
	c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			shrink(conn)
		}
		return conn, err
	}
	c.Listen = func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		return hookListener{Listener: ln, hook: shrink}, err
	}
}

// hookListener calls hook on every accepted connection.
type hookListener struct {
	net.Listener
	hook func(net.Conn)
}

func (l hookListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.hook(conn)
	}
	return conn, err
}

// trackedBody is a snapshot body that records being closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return nil
}

// result collects a SendSnapshot outcome.
type result struct {
	ch    chan error
	calls atomic.Int32
}

func newResult() *result { return &result{ch: make(chan error, 2)} }

func (r *result) done(err error) {
	r.calls.Add(1)
	r.ch <- err
}

func (r *result) wait(t *testing.T) error {
	t.Helper()
	var err error
	eventually(t, "snapshot done is called", func() bool {
		select {
		case err = <-r.ch:
			return true
		default:
			return false
		}
	})
	return err
}

// TestSnapshot_BodyByteExactWhileHeartbeatsFlow holds the receiver of a
// 4 MiB snapshot after its first chunk and checks that heartbeat batches
// keep arriving on the raft stream meanwhile; then it checks the body.
// Small socket buffers make sure the sender is really stuck behind the
// receiver rather than done early into kernel buffers.
func TestSnapshot_BodyByteExactWhileHeartbeatsFlow(t *testing.T) {
	n1 := startNode(t, 1, func(c *Config) {
		c.SnapshotChunkBytes = 64 << 10
		smallSocketBuffers(c)
	})
	n2 := startNode(t, 2, smallSocketBuffers)
	connect(n1, n2)
	want := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{7}).Read(want)

	started, gate := make(chan struct{}), make(chan struct{})
	var got bytes.Buffer
	var gotEnv raftgroup.Envelope
	var gotFrom uint64
	n2.recv.snap = func(from uint64, env raftgroup.Envelope, body io.Reader) error {
		gotFrom, gotEnv = from, env
		if _, err := io.CopyN(&got, body, 64<<10); err != nil {
			return err
		}
		close(started)
		<-gate // a slow state machine: the sender's writes back up behind it
		_, err := io.Copy(&got, body)
		return err
	}
	body := &trackedBody{Reader: bytes.NewReader(want)}
	res := newResult()
	n1.SendSnapshot(2, snapEnv(9), body, res.done)
	<-started

	const beats = 200
	for i := range beats {
		b := []raftgroup.Envelope{{Group: uint64(i), Msg: msg(uint64(i), nil)}}
		eventually(t, "heartbeat queued", func() bool { return n1.Send(2, b) })
	}
	eventually(t, "heartbeats arrive while the snapshot is held", func() bool {
		return n2.recv.msgs.Load() == beats
	})
	select {
	case err := <-res.ch:
		t.Fatalf("snapshot finished while its receiver was held: %v", err)
	default:
	}
	if sent := n1.Stats().SnapshotBytesSent; sent >= uint64(len(want)) {
		t.Fatalf("the whole body (%d bytes) was sent while the receiver held it: the test proves nothing", sent)
	}

	close(gate)
	if err := res.wait(t); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if !body.closed.Load() {
		t.Error("body not closed before done")
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("body differs: got %d bytes, want %d", got.Len(), len(want))
	}
	if gotFrom != 1 || gotEnv.Group != 9 || !proto.Equal(gotEnv.Msg, snapEnv(9).Msg) {
		t.Errorf("envelope from %d: %s", gotFrom, describe(gotEnv))
	}
	if st := n1.Stats(); st.SnapshotsSent != 1 || st.SnapshotBytesSent != uint64(len(want)) {
		t.Errorf("sender stats: %+v", st)
	}
	if res.calls.Load() != 1 {
		t.Errorf("done called %d times", res.calls.Load())
	}
}

func TestSnapshot_ReceiverErrorReachesSender(t *testing.T) {
	n1, n2 := startNode(t, 1, nil), startNode(t, 2, nil)
	connect(n1, n2)
	n2.recv.snap = func(uint64, raftgroup.Envelope, io.Reader) error {
		return errors.New("stage snapshot: disk full")
	}
	body := &trackedBody{Reader: bytes.NewReader(make([]byte, 1<<20))}
	res := newResult()
	n1.SendSnapshot(2, snapEnv(1), body, res.done)
	err := res.wait(t)
	if !errors.Is(err, ErrSnapshotFailed) || !bytes.Contains([]byte(err.Error()), []byte("disk full")) {
		t.Errorf("done(%v), want ErrSnapshotFailed with the receiver's reason", err)
	}
	if !body.closed.Load() {
		t.Error("body not closed")
	}
	eventually(t, "receiver counts the failure", func() bool { return n2.Stats().SnapshotsRejected == 1 })
}

func TestSnapshot_NilBodyAndEmptyBody(t *testing.T) {
	n1, n2 := startNode(t, 1, nil), startNode(t, 2, nil)
	connect(n1, n2)
	var sizes []int
	n2.recv.snap = func(_ uint64, _ raftgroup.Envelope, body io.Reader) error {
		b, err := io.ReadAll(body)
		sizes = append(sizes, len(b))
		return err
	}
	for _, body := range []io.ReadCloser{nil, io.NopCloser(bytes.NewReader(nil))} {
		res := newResult()
		n1.SendSnapshot(2, snapEnv(1), body, res.done)
		if err := res.wait(t); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(sizes) != "[0 0]" {
		t.Errorf("receiver saw bodies of %v bytes", sizes)
	}
}

// failingBody yields some bytes, then an error.
type failingBody struct{ n int }

func (b *failingBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errors.New("segment file vanished")
	}
	n := min(len(p), b.n)
	b.n -= n
	return n, nil
}

func (b *failingBody) Close() error { return nil }

func TestSnapshot_BrokenBodyFailsBothSides(t *testing.T) {
	n1, n2 := startNode(t, 1, func(c *Config) { c.SnapshotChunkBytes = 4096 }), startNode(t, 2, nil)
	connect(n1, n2)
	readErr := make(chan error, 1)
	n2.recv.snap = func(_ uint64, _ raftgroup.Envelope, body io.Reader) error {
		_, err := io.Copy(io.Discard, body)
		readErr <- err
		return err
	}
	res := newResult()
	n1.SendSnapshot(2, snapEnv(1), &failingBody{n: 10000}, res.done)
	if err := res.wait(t); err == nil || !bytes.Contains([]byte(err.Error()), []byte("segment file vanished")) {
		t.Errorf("sender: done(%v), want the body's error", err)
	}
	if err := <-readErr; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("receiver read %v, want io.ErrUnexpectedEOF for a truncated body", err)
	}
}

func TestSnapshot_ConcurrencyBoundedPerPeer(t *testing.T) {
	n1, n2 := startNode(t, 1, func(c *Config) { c.MaxSnapshotsPerPeer = 1 }), startNode(t, 2, nil)
	connect(n1, n2)
	gate, inside := make(chan struct{}), make(chan struct{}, 1)
	n2.recv.snap = func(_ uint64, _ raftgroup.Envelope, body io.Reader) error {
		inside <- struct{}{}
		<-gate
		_, err := io.Copy(io.Discard, body)
		return err
	}
	first := newResult()
	n1.SendSnapshot(2, snapEnv(1), nil, first.done)
	<-inside
	second := newResult()
	body := &trackedBody{Reader: bytes.NewReader(nil)}
	n1.SendSnapshot(2, snapEnv(2), body, second.done)
	if err := second.wait(t); !errors.Is(err, ErrSnapshotBusy) || !body.closed.Load() {
		t.Errorf("second stream: done(%v), closed %v; want ErrSnapshotBusy and a closed body", err, body.closed.Load())
	}
	close(gate)
	if err := first.wait(t); err != nil {
		t.Fatal(err)
	}
	third := newResult()
	n1.SendSnapshot(2, snapEnv(3), nil, third.done)
	if err := third.wait(t); err != nil {
		t.Errorf("a stream after the first finished: %v", err)
	}
}

func TestSnapshot_PeerDownOrUnknown(t *testing.T) {
	n1 := startNode(t, 1, nil)
	n1.AddPeer(2, freeAddr(t))
	body := &trackedBody{Reader: bytes.NewReader(nil)}
	res := newResult()
	n1.SendSnapshot(2, snapEnv(1), body, res.done)
	if err := res.wait(t); err == nil || !body.closed.Load() {
		t.Errorf("down peer: done(%v), closed %v", err, body.closed.Load())
	}
	res = newResult()
	n1.SendSnapshot(7, snapEnv(1), nil, res.done)
	if err := res.wait(t); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("unknown peer: done(%v)", err)
	}
	if got := n1.Stats().SnapshotsFailed; got != 2 {
		t.Errorf("SnapshotsFailed = %d, want 2", got)
	}
}

func TestSnapshot_CloseEndsStreamWithErrClosed(t *testing.T) {
	n1, n2 := startNode(t, 1, nil), startNode(t, 2, nil)
	connect(n1, n2)
	inside := make(chan struct{})
	n2.recv.snap = func(_ uint64, _ raftgroup.Envelope, body io.Reader) error {
		close(inside)
		_, err := io.Copy(io.Discard, body) // ends when the sender goes away
		return err
	}
	res := newResult()
	n1.SendSnapshot(2, snapEnv(1), io.NopCloser(neverEnding{}), res.done)
	<-inside
	n1.Close()
	if err := res.wait(t); !errors.Is(err, ErrClosed) {
		t.Errorf("done(%v), want ErrClosed", err)
	}
}

// neverEnding is an endless body.
type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) { return len(p), nil }
