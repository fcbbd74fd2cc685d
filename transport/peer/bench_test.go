package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/internal/tlsfiles"
	"github.com/raftq/raftq/raftgroup"
)

// Run with, e.g.:
//
//	go test -run XXX -bench . -benchtime 3s ./transport/peer/
//
// BenchmarkTransport and BenchmarkBaselineTCPCopy move the same bytes over
// loopback: the transport with its queue, writer, framing and decoding, the
// baseline as one io.Copy of pre-encoded frames. One op is one raft message
// (a MsgApp with one entry); MB/s counts entry payload.

type benchShape struct {
	name     string
	entry    int // entry payload bytes
	perBatch int // messages per Send
	window   int // batches in flight
}

var benchShapes = []benchShape{
	{"entry=100B", 100, 64, 256},
	{"entry=64KiB", 64 << 10, 4, 16},
}

func benchBatch(s benchShape) []raftgroup.Envelope {
	batch := make([]raftgroup.Envelope, s.perBatch)
	for i := range batch {
		batch[i] = raftgroup.Envelope{Group: uint64(i % 8), Msg: msg(uint64(1000+i), make([]byte, s.entry))}
	}
	return batch
}

// benchReceiver counts messages and returns window credits.
// benchReceiver hands back one credit per perBatch messages received: the
// transport may deliver a Send's batch in several pieces.
type benchReceiver struct {
	msgs     atomic.Int64
	perBatch int64
	returned int64 // credits handed back; the connection's reader only
	credit   chan struct{}
}

func (r *benchReceiver) Receive(_ uint64, batch []raftgroup.Envelope) {
	n := r.msgs.Add(int64(len(batch)))
	for ; r.returned < n/r.perBatch; r.returned++ {
		<-r.credit
	}
}

func (r *benchReceiver) ReceiveSnapshot(uint64, raftgroup.Envelope, io.Reader) error { return nil }

func BenchmarkTransport(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) { benchTransport(b, s, func(*Config) {}, func(*Config) {}) })
	}
}

// BenchmarkTransportTLS is BenchmarkTransport over mutual TLS
// (tlsfiles.Store's configs: TLS 1.3, ECDSA P-256 certificates).
func BenchmarkTransportTLS(b *testing.B) {
	ca, err := tlsfiles.NewCA("bench")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	edit := func(name string) func(*Config) {
		f, err := ca.Issue(dir, name, tlsfiles.Leaf{Subject: pkix.Name{CommonName: name}, Hosts: []string{"127.0.0.1"}})
		if err != nil {
			b.Fatal(err)
		}
		s, err := tlsfiles.Load(f)
		if err != nil {
			b.Fatal(err)
		}
		return func(c *Config) {
			c.ServerTLS, c.ClientTLS = s.ServerConfig(tls.RequireAndVerifyClientCert), s.ClientConfig("")
		}
	}
	e1, e2 := edit("node-1"), edit("node-2")
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) { benchTransport(b, s, e1, e2) })
	}
}

func benchTransport(b *testing.B, s benchShape, edit1, edit2 func(*Config)) {
	recv := &benchReceiver{credit: make(chan struct{}, s.window), perBatch: int64(s.perBatch)}
	n1 := startNode(b, 1, func(c *Config) { c.Logger = nil; edit1(c) })
	cfg2 := testConfig(2, &logging.Buffer{})
	edit2(&cfg2)
	n2, err := New(cfg2)
	if err != nil {
		b.Fatal(err)
	}
	if err := n2.Start(recv); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n2.Close() })
	n1.AddPeer(2, n2.Addr().String())
	n2.AddPeer(1, n1.Addr().String())
	batch := benchBatch(s) // read-only from here on, so every Send may share it
	send := func(n int) {
		for sent := 0; sent < n; sent += s.perBatch {
			recv.credit <- struct{}{} // blocks while window batches are in flight
			if !n1.Send(2, batch[:min(s.perBatch, n-sent)]) {
				b.Fatal("Send dropped a batch within the window")
			}
		}
	}
	send(s.perBatch * s.window) // warm up: connect, grow buffers
	eventually(b, "warm-up delivered", func() bool { return recv.msgs.Load() == int64(s.perBatch*s.window) })
	base := recv.msgs.Load()
	before := n1.Stats()

	b.SetBytes(int64(s.entry))
	b.ResetTimer()
	start := time.Now()
	send(b.N)
	for recv.msgs.Load() < base+int64(b.N) {
		time.Sleep(50 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	after := n1.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(after.BytesSent-before.BytesSent)/float64(b.N), "wireB/msg")
	if w := after.Writes - before.Writes; w > 0 {
		b.ReportMetric(float64(after.BatchesSent-before.BatchesSent)/float64(w), "batches/write")
	}
}

func BenchmarkBaselineTCPCopy(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) { benchBaseline(b, s) })
	}
}

// benchBaseline copies the frames the transport would write for b.N
// messages over a loopback TCP connection with io.Copy, and discards them
// on the other side.
func benchBaseline(b *testing.B, s benchShape) {
	frame, _ := appendBatch(nil, benchBatch(s), 1<<30)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer conn.Close()
		n, _ := io.Copy(io.Discard, conn)
		got <- n
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	batches := (b.N + s.perBatch - 1) / s.perBatch
	b.SetBytes(int64(s.entry))
	b.ResetTimer()
	start := time.Now()
	if _, err := io.Copy(conn, &repeatReader{frame: frame, left: batches}); err != nil {
		b.Fatal(err)
	}
	conn.(*net.TCPConn).CloseWrite()
	n := <-got
	elapsed := time.Since(start)
	b.StopTimer()
	conn.Close()
	if want := int64(batches * len(frame)); n != want {
		b.Fatalf("copied %d bytes, want %d", n, want)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(len(frame))/float64(s.perBatch), "wireB/msg")
}

// repeatReader yields frame left times.
type repeatReader struct {
	frame []byte
	off   int
	left  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:], r.frame[r.off:])
		n += c
		if r.off += c; r.off == len(r.frame) {
			r.off = 0
			r.left--
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// BenchmarkCodec measures encoding plus decoding alone, without a network,
// to tell CPU cost from transfer cost.
func BenchmarkCodec(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) {
			batch := benchBatch(s)
			var buf []byte
			b.SetBytes(int64(s.entry * s.perBatch))
			for b.Loop() {
				buf, _ = appendBatch(buf[:0], batch, 1<<30)
				if _, err := decodeBatch(buf[frameHeader+1:]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*s.perBatch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkFetch times sequential fetch round trips (one outstanding
// request, as a follower fetches from a leader) with a small request and
// a response of the given size; MB/s counts response bytes.
func BenchmarkFetch(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"resp=1KiB", 1 << 10}, {"resp=1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) { benchFetch(b, size.bytes) })
	}
}

func benchFetch(b *testing.B, size int) {
	resp := make([]byte, size)
	leader := startNode(b, 2, func(c *Config) {
		c.Logger = nil
		c.FetchHandler = func(uint64, []byte, time.Time) []byte { return resp }
	})
	follower := startNode(b, 1, func(c *Config) { c.Logger = nil })
	connect(follower, leader)
	req := make([]byte, 64)
	fetchOK(b, follower, 2, req) // warm up: dial, grow buffers
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range b.N {
		got, err := follower.Fetch(ctx, 2, req)
		if err != nil || len(got) != size {
			b.Fatalf("fetch: %d bytes, %v", len(got), err)
		}
	}
	b.StopTimer()
	if st := follower.Stats(); st.FetchDials != 1 {
		b.Errorf("FetchDials = %d, want 1", st.FetchDials)
	}
}
