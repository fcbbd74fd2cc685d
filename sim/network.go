package sim

import (
	"bytes"
	"errors"
	"io"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/raftgroup"
)

// network carries envelopes between simulated nodes in virtual time. Each
// envelope gets its own random delay, so messages reorder; some are
// dropped; partitions cut links at delivery time.
type network struct {
	s     *Sim
	queue []*inflight
	seq   uint64
	cut   map[[2]uint64]bool
}

type inflight struct {
	at       int64
	seq      uint64
	from, to uint64
	env      raftgroup.Envelope
	snapBody []byte
	done     func(error) // non-nil for a snapshot stream
	// call, when set, is a request or answer of the ISR fetch stream:
	// run at delivery if the link is up (call decides what else must hold).
	call func()
}

var errUnreachable = errors.New("sim: peer unreachable")

func (n *network) push(f *inflight) {
	n.seq++
	f.seq = n.seq
	f.at = n.s.now + int64(n.s.rng.IntN(n.s.cfg.MaxDelay+1))
	n.queue = append(n.queue, f)
}

// deliverDue hands every envelope due by now to its node, in (time,
// sequence) order.
func (n *network) deliverDue() {
	var due []*inflight
	kept := n.queue[:0]
	for _, f := range n.queue {
		if f.at <= n.s.now {
			due = append(due, f)
		} else {
			kept = append(kept, f)
		}
	}
	clear(n.queue[len(kept):])
	n.queue = kept
	slices.SortFunc(due, func(a, b *inflight) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.seq - b.seq)
	})
	for _, f := range due {
		n.deliver(f)
	}
}

func (n *network) deliver(f *inflight) {
	dst := n.s.node(f.to)
	reachable := dst.up && !n.cut[[2]uint64{f.from, f.to}]
	if f.call != nil {
		if reachable {
			f.call()
		}
		return
	}
	if f.done != nil {
		err := errUnreachable
		if reachable {
			err = dst.host.ReceiveSnapshot(f.from, f.env, bytes.NewReader(f.snapBody))
		}
		n.s.traceSnap(f, err)
		f.done(err)
		return
	}
	if !reachable {
		return
	}
	n.s.traceMsg(f)
	dst.host.Receive(f.from, []raftgroup.Envelope{f.env})
}

type transport struct {
	n    *network
	from uint64
}

var _ raftgroup.Transport = (*transport)(nil)

// sendCall schedules fn on node to, as a message from node from that the
// network may drop, delay or cut like any other.
func (n *network) sendCall(from, to uint64, fn func()) {
	if n.s.rng.Float64() < n.s.dropRate() {
		return
	}
	n.push(&inflight{from: from, to: to, call: fn})
}

// Send schedules each envelope separately, dropping some.
func (t *transport) Send(to uint64, batch []raftgroup.Envelope) bool {
	for _, e := range batch {
		if t.n.s.rng.Float64() < t.n.s.dropRate() {
			continue
		}
		t.n.push(&inflight{from: t.from, to: to, env: raftgroup.Envelope{Group: e.Group, Msg: clone(e.Msg)}})
		if t.n.s.rng.Float64() < t.n.s.dupRate() {
			t.n.push(&inflight{from: t.from, to: to, env: raftgroup.Envelope{Group: e.Group, Msg: clone(e.Msg)}})
		}
	}
	return true
}

// SendSnapshot reads the body now and delivers it with the message later.
func (t *transport) SendSnapshot(to uint64, env raftgroup.Envelope, body io.ReadCloser, done func(error)) {
	var b []byte
	if body != nil {
		b, _ = io.ReadAll(body)
		body.Close()
	}
	t.n.push(&inflight{from: t.from, to: to, env: raftgroup.Envelope{Group: env.Group, Msg: clone(env.Msg)}, snapBody: b, done: done})
}

func clone(m *raftpb.Message) *raftpb.Message { return proto.Clone(m).(*raftpb.Message) }
