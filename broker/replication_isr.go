package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/isr"
	"github.com/raftq/raftq/partition"
)

// The ISR mode (replication.mode=isr): group 0 elects each partition's
// leader and alone changes its ISR, as Kafka's KRaft controller does; the
// followers fetch from the leader (isr.Manager). The leader epoch is group
// 0's (Partition.LeaderTerm), and isr's errors become the broker's
// (classifyISR), here and nowhere else.

var _ replication = (*isrReplication)(nil)

// isrReplication is a data partition replicated in ISR mode.
type isrReplication struct {
	p      *isr.Partition
	gid    uint64
	closed atomic.Bool // set by Close and remove; ends WaitSettled
	// preferred returns the partition's first replica in the current
	// metadata (false: the partition is gone).
	preferred func() (uint64, bool)
	// electPreferred asks group 0 to elect the preferred replica
	// (ElectLeaders{Preferred}); nil when nothing can propose (tests).
	electPreferred func(ctx context.Context) error
	// electedAfter reports whether the node's metadata has this node
	// leading the partition at a leader epoch above epoch; nil: never.
	electedAfter func(epoch int32) bool

	// last is the state reconcile passed last (reconcile's goroutine
	// only), to count the ISR changes of an epoch this node leads.
	last isr.State
}

// isrChange compares s with the state last passed: whether the ISR of an
// epoch this node (self) leads grew or shrank, as group 0 committed it
// (the leader's own AlterPartition or a fencing). A new epoch is no
// change. It then remembers s.
func (r *isrReplication) isrChange(s isr.State, self uint64) (changed, expand bool) {
	prev := r.last
	r.last = s
	if s.Leader != self || prev.Leader != self || s.LeaderEpoch != prev.LeaderEpoch || slices.Equal(prev.ISR, s.ISR) {
		return false, false
	}
	return true, len(s.ISR) > len(prev.ISR)
}

// classifyISR wraps an isr failure in the broker's error for it. Kafka
// errors (NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, ...) and
// a context's error pass through as they are.
func classifyISR(err error) error {
	var kind error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, isr.ErrNotLeader):
		kind = errNotLeader
	case errors.Is(err, isr.ErrLeaderChanged):
		// The batch is in this replica's log and maybe in a
		// follower's that now leads: it may still commit.
		kind = errLeadershipLost
	case errors.Is(err, isr.ErrClosed):
		kind = errReplicaStopped
	default:
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// Leadership is settling while no leader is known: group 0 is electing
// (or has nobody to elect). ISR leadership never hands over, so there is
// no transfer to wait out. A replica leads only once its node has
// registered this process start: updateISR gives it no role before.
func (r *isrReplication) Leadership() leadership {
	leader, epoch, isLeader := r.p.Leadership()
	return leadership{Leader: leader, Epoch: epoch, IsLeader: isLeader, Settling: leader == 0}
}

func (r *isrReplication) WaitSettled(ctx context.Context) leadership {
	for {
		changed := r.p.Changed()
		l := r.Leadership()
		if !l.Settling || r.closed.Load() {
			return l
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return l
		}
	}
}

// AwaitLeading waits while group 0 has elected this node at a newer
// epoch than the replica has taken: reconcile passes the election on
// within moments of its apply, and a client that the old leader sent
// here would back off before it asked again.
func (r *isrReplication) AwaitLeading(ctx context.Context) leadership {
	for {
		changed := r.p.Changed()
		l := r.Leadership()
		if l.IsLeader || r.electedAfter == nil || !r.electedAfter(l.Epoch) || r.closed.Load() {
			return l
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return l
		}
	}
}

// TransferLeadership moves leadership the only way ISR mode has: a
// preferred-replica election in group 0, so only to the partition's
// first replica, and only if it is in the ISR and alive (group 0 checks).
// It waits until this replica learns the new leader.
func (r *isrReplication) TransferLeadership(ctx context.Context, to uint64) error {
	pref, ok := r.preferred()
	switch {
	case !ok:
		return fmt.Errorf("broker: ISR partition of group %d is gone", r.gid)
	case to != pref:
		return fmt.Errorf("broker: an ISR partition's leadership moves only by election, to its preferred replica %d, not to %d", pref, to)
	case r.electPreferred == nil:
		return fmt.Errorf("broker: no controller to elect replica %d of group %d", to, r.gid)
	}
	if err := r.electPreferred(ctx); err != nil {
		return err
	}
	for {
		changed := r.p.Changed()
		if leader, _, _ := r.p.Leadership(); leader == to {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// successor is none: a draining node's ISR leaderships move by its
// controlled shutdown in group 0, which elects from the ISR less it.
func (r *isrReplication) successor([]uint64) uint64 { return 0 }

func (r *isrReplication) describe() GroupStatus {
	return isrGroupStatus(r.gid, r.p.Status(), time.Now())
}

// isrGroupStatus reports an ISR replica's state; the leader also reports
// how far each follower trails its log end, in offsets and in time since
// it was last caught up.
func isrGroupStatus(gid uint64, s isr.Status, now time.Time) GroupStatus {
	gs := GroupStatus{Group: gid, Mode: coordinator.ModeISR, Role: string(s.Role), Term: uint64(max(s.LeaderEpoch, 0)), Leader: s.Leader,
		LeaderEpoch: s.LeaderEpoch, PartitionEpoch: s.PartitionEpoch, ISR: s.ISR, ELR: s.ELR, Recovering: s.Recovering,
		EndOffset: s.EndOffset}
	for _, f := range s.Followers {
		fl := FollowerLag{ID: f.ID, EndOffset: f.EndOffset, InISR: f.InISR, Lag: -1, SinceCaughtUpMs: -1}
		if f.EndOffset >= 0 {
			fl.Lag = max(s.EndOffset-f.EndOffset, 0)
		}
		if !f.LastCaughtUp.IsZero() {
			fl.SinceCaughtUpMs = max(now.Sub(f.LastCaughtUp).Milliseconds(), 0)
		}
		gs.Followers = append(gs.Followers, fl)
	}
	return gs
}

func (r *isrReplication) remove(purge bool) error {
	r.closed.Store(true)
	return classifyISR(r.p.Close(purge))
}

func (r *isrReplication) Close() error { return r.remove(false) }

func (r *isrReplication) Log() *partition.Log                     { return r.p.Log() }
func (r *isrReplication) Epochs() []partition.EpochStart          { return r.p.Epochs() }
func (r *isrReplication) Producers() []partition.ProducerInfo     { return r.p.Producers() }
func (r *isrReplication) EndOffsetFor(epoch int32) (int32, int64) { return r.p.EndOffsetFor(epoch) }

// CaughtUp: this replica leads epoch and its HW has reached the epoch's
// start (Kafka's test before it answers OFFSET_OUT_OF_RANGE).
func (r *isrReplication) CaughtUp(epoch int32) bool { return r.p.CaughtUp(epoch) }

// Append appends to the leader's log at once (the leader assigns offsets,
// so acks=1's offset is exact); acks=all is refused here, before the
// append, while the ISR is below min.insync.replicas.
func (r *isrReplication) Append(_ context.Context, batch []byte, info partition.BatchInfo, acksAll bool) (pendingAppend, error) {
	a, err := r.p.Append(batch, info, acksAll)
	if err != nil {
		return nil, classifyISR(err)
	}
	return &isrAppend{a: a}, nil
}

// AdvanceStart moves the leader's log start; followers follow it as they
// fetch (Kafka's low watermark is not waited for).
func (r *isrReplication) AdvanceStart(_ context.Context, offset int64) error {
	return classifyISR(r.p.AdvanceStart(offset))
}

// isrAppend is a batch in the leader's log (or refused: Result's Err).
type isrAppend struct{ a *isr.Appended }

// Appended knows the offset at once; under flush.messages=1 it waits for
// the batch's fsync first (Durable), as Kafka's acks=1 does. A refused
// batch reports -1, so that Committed answers the refusal with its
// message.
func (a *isrAppend) Appended(ctx context.Context) (int64, error) {
	pr := a.a.Result()
	if pr.Err != nil {
		return -1, nil
	}
	if err := a.a.Durable(ctx); err != nil {
		return -1, classifyISR(err)
	}
	return pr.Base, nil
}

// Committed waits for the HW to pass the batch; a refused batch answers at
// once.
func (a *isrAppend) Committed(ctx context.Context) (partition.ProduceResult, error) {
	if pr := a.a.Result(); pr.Err != nil {
		return pr, nil
	}
	pr, err := a.a.Committed(ctx)
	return pr, classifyISR(err)
}
