package peer

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/raftgroup"
)

// eventually polls cond until it holds, failing the test after a generous
// bound (a hang guard, not a speed assertion).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition never held: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// logHas reports whether one line of l holds all of subs.
func logHas(l *logging.Buffer, subs ...string) bool {
	for _, line := range strings.Split(l.String(), "\n") {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(line, sub)
		}
		if all {
			return true
		}
	}
	return false
}

// recorder is a Receiver that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	batches map[uint64][][]raftgroup.Envelope
	msgs    atomic.Int64
	gate    chan struct{} // when set, Receive waits for it to close
	snap    func(from uint64, env raftgroup.Envelope, body io.Reader) error
}

func newRecorder() *recorder {
	return &recorder{batches: map[uint64][][]raftgroup.Envelope{}}
}

func (r *recorder) Receive(from uint64, batch []raftgroup.Envelope) {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	r.batches[from] = append(r.batches[from], batch)
	r.mu.Unlock()
	r.msgs.Add(int64(len(batch)))
}

func (r *recorder) ReceiveSnapshot(from uint64, env raftgroup.Envelope, body io.Reader) error {
	if r.snap == nil {
		_, err := io.Copy(io.Discard, body)
		return err
	}
	return r.snap(from, env, body)
}

// from returns the envelopes received from node id, flattened in order.
func (r *recorder) from(id uint64) []raftgroup.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []raftgroup.Envelope
	for _, b := range r.batches[id] {
		out = append(out, b...)
	}
	return out
}

// node is a started Transport with its receiver and log.
type node struct {
	*Transport
	id   uint64
	recv *recorder
	logs *logging.Buffer
}

func testConfig(id uint64, logs *logging.Buffer) Config {
	cfg := DefaultConfig()
	cfg.ClusterID = "test-cluster"
	cfg.NodeID = id
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.BackoffMin = 5 * time.Millisecond
	cfg.BackoffMax = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return cfg
}

// startNode starts a transport for node id; edit may adjust its config.
// The receiver's gate, when a test sets one, is opened before Close, which
// waits for the reader goroutines.
func startNode(t testing.TB, id uint64, edit func(*Config)) *node {
	t.Helper()
	n := &node{id: id, recv: newRecorder(), logs: &logging.Buffer{}}
	cfg := testConfig(id, n.logs)
	if edit != nil {
		edit(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatalf("new node %d: %v", id, err)
	}
	if err := tr.Start(n.recv); err != nil {
		t.Fatalf("start node %d: %v", id, err)
	}
	n.Transport = tr
	t.Cleanup(func() {
		if g := n.recv.gate; g != nil {
			select {
			case <-g:
			default:
				close(g)
			}
		}
		tr.Close()
		if t.Failed() {
			t.Logf("node %d log:\n%s", id, n.logs.String())
		}
	})
	return n
}

// connect makes every node a peer of every other. Accepting sides learn
// first, so the diallers' first attempts are not refused as unknown.
func connect(nodes ...*node) {
	for _, dialler := range []bool{false, true} {
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b && (a.id < b.id) == dialler {
					a.AddPeer(b.id, b.Addr().String())
				}
			}
		}
	}
}

// msg builds a MsgApp whose Index identifies it in tests.
func msg(index uint64, data []byte) *raftpb.Message {
	return &raftpb.Message{
		Type:  raftpb.MsgApp.Enum(),
		To:    new(uint64(2)),
		From:  new(uint64(1)),
		Term:  new(uint64(3)),
		Index: new(index),
		Entries: []*raftpb.Entry{{
			Term: new(uint64(3)), Index: new(index + 1), Type: raftpb.EntryNormal.Enum(), Data: data,
		}},
	}
}

func heartbeat(group uint64) raftgroup.Envelope {
	return raftgroup.Envelope{Group: group, Msg: &raftpb.Message{
		Type: raftpb.MsgHeartbeat.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(1)),
	}}
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func describe(e raftgroup.Envelope) string {
	return fmt.Sprintf("g%d/%s/i%d", e.Group, e.Msg.GetType(), e.Msg.GetIndex())
}
