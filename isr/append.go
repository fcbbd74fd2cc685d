package isr

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/partition"
)

// Append appends a validated batch as the leader (Kafka's
// appendRecordsToLeader). acksAll asks for the min.insync.replicas check
// before the append: below it the batch is refused with
// kerr.NotEnoughReplicas and nothing is appended. A batch the log refuses
// (a sequence error, say) comes back in the Appended's Result with its
// Kafka error. Under a flush policy that is due, the batch is fsynced
// before Append returns, so that acks=1 and the HW count only flushed
// data.
func (p *Partition) Append(batch []byte, info partition.BatchInfo, acksAll bool) (*Appended, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, ErrClosed
	case p.role != RoleLeader:
		return nil, ErrNotLeader
	}
	if acksAll {
		if err := p.lead.acksAllRefusal(); err != nil {
			return nil, err
		}
	}
	res, err := p.log.AppendLeader(batch, info, p.epoch)
	if err != nil {
		return nil, err
	}
	a := &Appended{p: p, epoch: p.epoch, res: res}
	if res.Err != nil || res.Duplicate {
		return a, nil
	}
	now := time.Now()
	p.flush.appended(int64(info.NumRecords), now)
	if err := p.maybeFlush(now); err != nil {
		return nil, err
	}
	p.setHW(p.lead.appended(p.countedEnd(), now))
	p.m.activity.notify()
	return a, nil
}

// countedEnd is the LEO the leader counts towards the HW: the log end,
// which under a flush policy is flushed as often as the policy says.
func (p *Partition) countedEnd() int64 { return p.log.EndOffset() }

// Appended is a batch in the leader's log.
type Appended struct {
	p     *Partition
	epoch int32
	res   partition.ProduceResult
}

// Result is what the append got: its offsets, or for an idempotent retry
// the first ones, or a refusal in Err.
func (a *Appended) Result() partition.ProduceResult { return a.res }

// Committed waits until the HW passes the batch (Kafka's purgatory, with
// requiredOffset the batch's last offset + 1, also for a duplicate, whose
// first copy may not be replicated yet) and returns its result. Err is
// kerr.NotEnoughReplicasAfterAppend if the ISR fell below
// min.insync.replicas meanwhile: the batch stays in the log and may still
// commit. It fails with ErrLeaderChanged once this replica stops leading
// the batch's epoch, ErrClosed if the partition closed, or ctx's error.
func (a *Appended) Committed(ctx context.Context) (partition.ProduceResult, error) {
	if a.res.Err != nil {
		return a.res, nil
	}
	p, l := a.p, a.p.log.Log()
	for {
		hw, hwCh := l.WatchHighWatermark()
		changed := p.Changed()
		if p.leadingEpoch.Load() != int64(a.epoch) {
			if p.isClosed() {
				return partition.ProduceResult{}, ErrClosed
			}
			return partition.ProduceResult{}, ErrLeaderChanged
		}
		if hw > a.res.Last {
			res := a.res
			if !p.enoughISR.Load() {
				res.Err = kerr.NotEnoughReplicasAfterAppend
			}
			return res, nil
		}
		select {
		case <-hwCh:
		case <-changed:
		case <-ctx.Done():
			return partition.ProduceResult{}, ctx.Err()
		}
	}
}

func (p *Partition) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// flushState is a replica's progress against its flush policy.
type flushState struct {
	policy    FlushPolicy
	unflushed int64     // records appended since the last sync
	since     time.Time // when the first of them was appended
}

func (f *flushState) active() bool { return f.policy.Messages > 0 || f.policy.Interval > 0 }

func (f *flushState) appended(records int64, now time.Time) {
	if !f.active() {
		return
	}
	if f.unflushed == 0 {
		f.since = now
	}
	f.unflushed += max(records, 1)
}

func (f *flushState) due(now time.Time) bool {
	if f.unflushed == 0 {
		return false
	}
	return f.policy.Messages > 0 && f.unflushed >= f.policy.Messages ||
		f.policy.Interval > 0 && now.Sub(f.since) >= f.policy.Interval
}

func (f *flushState) synced(time.Time) { f.unflushed = 0 }

// maybeFlush fsyncs the log if the policy says it is due. mu held.
func (p *Partition) maybeFlush(now time.Time) error {
	if !p.flush.due(now) {
		return nil
	}
	return p.syncLog()
}

// syncForPolicy fsyncs whatever is unflushed, if a policy is set. mu held.
func (p *Partition) syncForPolicy() error {
	if p.flush.unflushed == 0 {
		return nil
	}
	return p.syncLog()
}

func (p *Partition) syncLog() error {
	if err := p.log.Log().Sync(); err != nil {
		p.logger.Error("isr: flush", "group", p.cfg.Group, "err", err)
		return err
	}
	p.flush.synced(time.Now())
	return nil
}

// flushIfDue runs the flush.ms check (the Manager's timer).
func (p *Partition) flushIfDue(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		_ = p.maybeFlush(now)
	}
}
