package broker

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// Offsets are assigned when a batch is applied, after commit. An acks=1
// answer comes earlier, once the leader's WAL holds the batch, so the
// leader projects the offset: it knows its log's end once everything
// before is applied, and every later entry of its term is its own
// proposal, made in order under produceMu. The projection is dropped
// (and acks=1 waits for apply, which is exact) whenever it could be wrong:
// a new term, a failed proposal, or an idempotent batch, whose duplicate
// check at apply may not append.
type projection struct {
	valid    bool
	term     uint64
	next     int64        // projected end offset after the reserved batches
	inflight atomic.Int64 // proposals made and not finished
}

// project reserves records offsets for the batch about to be proposed
// and reports whether base is exact. Callers hold produceMu.
func (r *replica) project(st raftgroup.Status, records int64, idempotent bool) (base int64, ok bool) {
	pj := &r.proj
	if pj.term != st.Term {
		pj.valid = false
	}
	if !pj.valid && pj.inflight.Load() == 0 && st.Applied == st.LastIndex {
		pj.valid, pj.term, pj.next = true, st.Term, r.sm.Log().EndOffset()
	}
	if !pj.valid {
		return -1, false
	}
	base = pj.next
	pj.next += records
	if idempotent {
		pj.valid = false
		return base, false
	}
	return base, true
}

// invalidate drops the projection. Callers hold produceMu.
func (r *replica) invalidate() { r.proj.valid = false }

// track counts p in flight until it finishes; a proposal that fails, or
// whose batch apply refuses, drops the projection.
func (r *replica) track(p *raftgroup.Proposal) {
	r.proj.inflight.Add(1)
	go func() {
		res, err := p.Wait(context.Background())
		if pr, ok := res.Value.(*partition.ProduceResult); err != nil || !ok || pr.Err != nil {
			r.produceMu.Lock()
			r.invalidate()
			r.produceMu.Unlock()
		}
		r.proj.inflight.Add(-1)
	}()
}

// fillLeader puts the best-known leader of a partition into a
// NOT_LEADER_OR_FOLLOWER answer (KIP-951), so clients skip a metadata
// round trip.
func (n *Node) fillLeader(sp *kmsg.ProduceResponseTopicPartition, topic string, index int32) {
	ref, ok := n.partitionRef(topic, index)
	if !ok {
		return
	}
	leader, term := n.leaderOf(ref.Partition)
	if leader != 0 {
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = int32(leader), int32(term)
	}
}

func (n *Node) fillLeaderFromStatus(sp *kmsg.ProduceResponseTopicPartition, st raftgroup.Status) {
	if st.Leader != 0 {
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = int32(st.Leader), int32(st.Term)
	}
}
