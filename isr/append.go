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
	a := &Appended{p: p, epoch: p.epoch, res: res, strict: p.flush.strict()}
	if res.Err != nil || res.Duplicate {
		return a, nil
	}
	now := p.m.now()
	p.flush.appended(int64(info.NumRecords), now)
	if err := p.maybeFlush(now); err != nil {
		return nil, err
	}
	if !p.setHW(p.lead.appended(p.countedEnd(), now)) {
		p.m.activity.notify() // the log end moved: followers' long-polls read on
	}
	return a, nil
}

// countedEnd is the LEO the leader counts towards the HW: the log end, or
// under flush.messages=1 the flushed end.
func (p *Partition) countedEnd() int64 {
	if p.flush.strict() {
		return min(p.flushedEnd.Load(), p.log.EndOffset())
	}
	return p.log.EndOffset()
}

// Appended is a batch in the leader's log.
type Appended struct {
	p      *Partition
	epoch  int32
	res    partition.ProduceResult
	strict bool // appended under flush.messages=1
}

// Durable waits until the batch is flushed if the topic's
// flush.messages=1 says a batch counts only then (acks=1 answers after
// it); otherwise it returns at once. A duplicate waits for its first
// copy's flush.
func (a *Appended) Durable(ctx context.Context) error {
	if !a.strict || a.res.Err != nil {
		return nil
	}
	p := a.p
	for {
		ch := p.durable.wait()
		if p.flushedEnd.Load() > a.res.Last {
			return nil
		}
		if p.leadingEpoch.Load() != int64(a.epoch) {
			if p.isClosed() {
				return ErrClosed
			}
			return ErrLeaderChanged
		}
		select {
		case <-ch:
		case <-p.Changed():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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

// strict is flush.messages=1: a batch counts (acks=1, the leader's LEO
// towards the HW, a follower's next fetch offset) only once flushed. Any
// other policy flushes in the background as Kafka does, and counts a
// batch once appended.
func (f *flushState) strict() bool { return f.policy.Messages == 1 }

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

// withSync runs fn, which syncs, truncates or resets the log, excluding
// the background flush's SyncData (which must not overlap them). mu held.
func (p *Partition) withSync(fn func() error) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	return fn()
}

// truncating runs fn, which cuts or resets the log, and marks the
// background flush's view of the log end stale. mu held.
func (p *Partition) truncating(fn func() error) error {
	err := p.withSync(fn)
	p.truncGen++
	p.flushedEnd.Store(min(p.flushedEnd.Load(), p.log.EndOffset()))
	return err
}

// syncForPolicy fsyncs whatever is unflushed, if a policy is set. mu held.
func (p *Partition) syncForPolicy() error {
	if p.flush.unflushed == 0 {
		return nil
	}
	return p.syncLog()
}

// syncLog fsyncs the log in the caller (a follower before its next fetch,
// a new leader before it counts its log end). mu held.
func (p *Partition) syncLog() error {
	end := p.log.EndOffset()
	if err := p.withSync(p.log.Log().Sync); err != nil {
		p.logger.Error("isr: flush", "group", p.cfg.Group, "err", err)
		return err
	}
	p.flush.unflushed = 0
	p.markFlushed(end)
	return nil
}

// markFlushed records that the log is durable up to end. mu held.
func (p *Partition) markFlushed(end int64) {
	if end > p.flushedEnd.Load() {
		p.flushedEnd.Store(end)
		p.durable.notify()
	}
}

// startFlush starts the background flush unless it runs. mu held.
func (p *Partition) startFlush() {
	if p.flushing || p.closed {
		return
	}
	p.flushing = true
	if p.m.cfg.Manual {
		p.m.flushManual(p)
		return
	}
	go p.flushLoop()
}

// flushLoop is a leader's background flush: it fdatasyncs everything
// appended so far without holding mu, so that appends (and their
// batches) pile up behind one fsync rather than one each, then credits
// the flushed end, and goes on while more is due. Under flush.messages=1
// the flushed end is the LEO the leader counts.
func (p *Partition) flushLoop() {
	for {
		p.mu.Lock()
		if p.closed || p.log.EndOffset() <= p.flushedEnd.Load() {
			p.flushing = false
			p.mu.Unlock()
			return
		}
		end, gen := p.log.EndOffset(), p.truncGen
		p.flush.unflushed = 0
		p.mu.Unlock()

		p.syncMu.Lock()
		err := p.log.Log().SyncData()
		p.syncMu.Unlock()

		p.mu.Lock()
		if err != nil {
			p.logger.Error("isr: flush", "group", p.cfg.Group, "err", err)
			p.flushing = false
			p.mu.Unlock()
			return
		}
		if gen == p.truncGen {
			p.markFlushed(end)
			if p.role == RoleLeader && p.flush.strict() {
				p.setHW(p.lead.appended(end, p.m.now()))
			}
		}
		p.mu.Unlock()
	}
}

// maybeFlush starts a flush if the policy says one is due: in the
// background on a leader, in the caller on a follower (whose next fetch
// must report flushed data only). mu held.
func (p *Partition) maybeFlush(now time.Time) error {
	if !p.flush.due(now) {
		return nil
	}
	if p.role == RoleLeader {
		p.startFlush()
		return nil
	}
	return p.syncLog()
}

// flushIfDue runs the flush.ms check (the Manager's timer).
func (p *Partition) flushIfDue(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		_ = p.maybeFlush(now)
	}
}
