package isr

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/partition"
)

// Partition is one ISR-mode partition replica on this node: its log, and
// the role group 0 gave it. A leader takes appends and serves its
// followers' fetches; a follower is replicated by the Manager's fetcher
// towards its leader.
//
// mu is Kafka's leaderIsrUpdateLock, taken for every change: whoever holds
// it is the owner the leader bookkeeping and the ISRLog's mutators
// require. Lock order: the broker's produce lock, then mu, then the
// log's own locks. Reads of the log (fetch, ListOffsets) take none of
// them.
type Partition struct {
	m      *Manager
	cfg    PartitionConfig
	log    *partition.ISRLog
	logger *slog.Logger

	mu     sync.Mutex
	closed bool
	// syncMu keeps the background flush's SyncData apart from every other
	// sync, truncation and reset of the log (taken after mu, or alone by
	// the flush); truncGen counts truncations, so that a flush that
	// overlapped one does not credit the flushed end.
	syncMu     sync.Mutex
	truncGen   uint64
	flushing   bool         // a background flush runs
	flushedEnd atomic.Int64 // the log is durable below it
	durable    notifier     // notified when flushedEnd grows
	st         State        // group 0's, as last given to Update
	role       Role
	epoch      int32 // the leader epoch the role belongs to
	leaderID   uint64
	lead       *leader
	flush      flushState
	// retryAt holds a follower's fetches back after its leader refused
	// one, until then or the next Update.
	retryAt time.Time
	// lostData: recovery cut records known durable (ISRLog.LostData), and
	// neither has group 0 taken the resignation nor has another leader
	// been followed since, so this replica must not lead: told to, it
	// resigns (resign.go). resigning is the answer to the resignation in
	// flight; resigned the partition epoch group 0 gave it (-1: none).
	lostData  bool
	resigning <-chan coordinator.ItemResult
	resigned  int32
	// reporting is the answer to the log end report in flight for an
	// offline partition (recover.go). updates counts the states taken;
	// reportUpd is updates when the report in flight was made, and
	// reportedUpd that of the last report group 0 took (0: none): a
	// report is not repeated before a state newer than it comes.
	reporting   <-chan coordinator.ItemResult
	updates     uint64
	reportUpd   uint64
	reportedUpd uint64

	// Read without mu by waiters: leadingEpoch is the epoch this replica
	// leads, -1 when it does not; enoughISR is the leader's AfterAppendOK.
	leadingEpoch atomic.Int64
	enoughISR    atomic.Bool

	chMu    sync.Mutex
	changed chan struct{} // closed at the next role, leader or epoch change
}

func newPartition(m *Manager, cfg PartitionConfig) (*Partition, error) {
	logger := logging.Discard(cfg.Logger)
	l, err := partition.OpenISRLog(partition.ISRLogConfig{Dir: cfg.Dir, Log: cfg.Log, Logger: logger})
	if err != nil {
		return nil, err
	}
	lc := m.leaderConfig(cfg.Group, logger)
	lead, err := newLeader(lc)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	p := &Partition{m: m, cfg: cfg, log: l, logger: logger, role: RoleNone, epoch: -1, lead: lead, changed: make(chan struct{}), lostData: l.LostData(), resigned: -1}
	p.flush.policy = cfg.Flush
	p.leadingEpoch.Store(-1)
	// What recovery found may be a dead process's page cache: made
	// durable once, it is the flushed end the policy counts from.
	if err := l.Log().Sync(); err != nil {
		_ = l.Close()
		return nil, err
	}
	p.flushedEnd.Store(l.EndOffset())
	return p, nil
}

// Update takes group 0's latest state of the partition: it becomes leader,
// follower or neither, or takes an ISR change within its epoch. A state
// older than one already taken (a smaller leader or partition epoch) is
// ignored.
func (p *Partition) Update(s State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.stale(s) {
		return
	}
	p.st = cloneState(s)
	p.updates++
	p.retryAt = time.Time{}
	p.checkLostData(s)
	now := p.m.now()
	switch {
	case s.Leader == p.m.cfg.Self && p.lostData:
		p.resign()
	case s.Leader == p.m.cfg.Self && p.role == RoleLeader && s.LeaderEpoch == p.epoch:
		p.setHW(p.lead.updateMetadata(p.term(), now))
		p.afterLeaderChange()
	case s.Leader == p.m.cfg.Self:
		p.becomeLeader(now)
	case s.Leader == 0:
		p.stopLeading()
		p.setRole(RoleNone, s.LeaderEpoch, 0)
		p.m.unfollow(p)
		p.maybeReportLogEnd()
	case p.role != RoleFollower || p.leaderID != s.Leader || p.epoch != s.LeaderEpoch:
		p.stopLeading()
		p.setRole(RoleFollower, s.LeaderEpoch, s.Leader)
		p.m.follow(p, s.Leader)
	}
}

// offline reports whether group 0 has nobody to elect cleanly: no
// leader, ISR, ELR or last known leader.
func (s State) offline() bool {
	return s.Leader == 0 && len(s.ISR) == 0 && len(s.ELR) == 0 && s.LastKnownLeader == 0
}

// stale reports whether s is older than the state already taken.
func (p *Partition) stale(s State) bool {
	if p.role == RoleNone && p.st.Replicas == nil {
		return false
	}
	return s.LeaderEpoch < p.st.LeaderEpoch ||
		s.LeaderEpoch == p.st.LeaderEpoch && s.PartitionEpoch < p.st.PartitionEpoch
}

func cloneState(s State) State {
	s.Replicas = slices.Clone(s.Replicas)
	s.ISR = slices.Clone(s.ISR)
	s.ELR = slices.Clone(s.ELR)
	return s
}

// term is the leadership group 0 gave, as the leader bookkeeping takes it.
func (p *Partition) term() Term {
	return Term{
		LeaderEpoch:    p.st.LeaderEpoch,
		PartitionEpoch: p.st.PartitionEpoch,
		Replicas:       p.st.Replicas,
		ISR:            p.st.ISR,
		MinISR:         p.st.MinISR,
		BrokerEpoch:    p.st.BrokerEpoch,
	}
}

// becomeLeader is Kafka's makeLeader: the new epoch starts at the log
// end, made durable before the first append of it (ISRLog.BecomeLeader),
// and with a flush policy every earlier batch is flushed first, so that
// the LEO the leader counts is durable.
func (p *Partition) becomeLeader(now time.Time) {
	p.m.unfollow(p)
	epoch := p.st.LeaderEpoch
	err := p.syncForPolicy()
	if err == nil {
		err = p.withSync(func() error { return p.log.BecomeLeader(epoch) })
	}
	if err != nil {
		p.logger.Error("isr: cannot lead", "group", p.cfg.Group, "epoch", epoch, "err", err)
		p.stopLeading()
		p.setRole(RoleNone, epoch, p.st.Leader)
		return
	}
	hw, err := p.lead.becomeLeader(p.term(), p.log.EndOffset(), p.log.HighWatermark(), now)
	if err != nil {
		p.logger.Error("isr: cannot lead", "group", p.cfg.Group, "epoch", epoch, "err", err)
		return
	}
	p.setRole(RoleLeader, epoch, p.m.cfg.Self)
	p.setHW(hw)
	p.afterLeaderChange()
}

// stopLeading drops the leader bookkeeping of the epoch this replica led.
func (p *Partition) stopLeading() {
	if p.role == RoleLeader {
		p.lead.resign()
	}
	p.leadingEpoch.Store(-1)
}

// setRole records a role change and wakes everything waiting on one.
func (p *Partition) setRole(r Role, epoch int32, leader uint64) {
	changed := p.role != r || p.epoch != epoch || p.leaderID != leader
	p.role, p.epoch, p.leaderID = r, epoch, leader
	if r == RoleLeader {
		p.leadingEpoch.Store(int64(epoch))
	} else {
		p.leadingEpoch.Store(-1)
	}
	if changed {
		p.logger.Info("isr: role", "group", p.cfg.Group, "role", r, "epoch", epoch, "leader", leader)
		p.signal()
	}
}

func (p *Partition) signal() {
	defer p.m.activity.notify()
	p.chMu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.chMu.Unlock()
}

// Changed returns a channel closed at the next change of role, leader or
// epoch (or at Close).
func (p *Partition) Changed() <-chan struct{} {
	p.chMu.Lock()
	defer p.chMu.Unlock()
	return p.changed
}

// afterLeaderChange runs after every change of the leader bookkeeping:
// it publishes what waiters read without the lock and starts waiting for
// the answer to a proposal the change may have sent.
func (p *Partition) afterLeaderChange() {
	p.enoughISR.Store(p.lead.AfterAppendOK())
	p.watchAlter()
}

// watchAlter hands the answer to the AlterPartition in flight, when it
// comes, to the leader bookkeeping, unless another proposal replaced it
// meanwhile.
func (p *Partition) watchAlter() {
	ch := p.lead.alterDone()
	if ch == nil {
		return
	}
	if p.m.cfg.Manual {
		p.m.watchAlterManual(p, ch)
		return
	}
	go func() {
		res, ok := <-ch
		if !ok {
			return
		}
		p.alterAnswered(ch, res)
	}()
}

// alterAnswered hands an AlterPartition answer to the bookkeeping, unless
// a newer proposal replaced the one it answers.
func (p *Partition) alterAnswered(ch <-chan coordinator.ItemResult, res coordinator.ItemResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.lead.alterDone() != ch {
		return
	}
	p.setHW(p.lead.handleAlterResult(res, p.m.now()))
	p.afterLeaderChange()
}

// setHW applies the HW the bookkeeping computed to the log and, if it
// rose, wakes the fetch long-polls; it reports whether it rose.
func (p *Partition) setHW(hw int64) bool {
	if hw < 0 || hw <= p.log.HighWatermark() {
		return false
	}
	if _, err := p.log.SetHighWatermark(hw); err != nil {
		p.logger.Warn("isr: set high watermark", "group", p.cfg.Group, "hw", hw, "err", err)
	}
	p.m.activity.notify()
	return true
}

// maybeShrink runs the leader's ISR expiration check.
func (p *Partition) maybeShrink(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.role != RoleLeader {
		return
	}
	if p.lead.maybeShrink(now) {
		p.afterLeaderChange()
	}
}

// SetFlush changes the flush policy (an altered topic config).
func (p *Partition) SetFlush(f FlushPolicy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flush.policy = f
}

// Log is the local partition log, for reads.
func (p *Partition) Log() *partition.Log { return p.log.Log() }

// Leadership returns the leader known, its epoch and whether it is us.
func (p *Partition) Leadership() (leader uint64, epoch int32, isLeader bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaderID, p.epoch, p.role == RoleLeader
}

// Epochs lists the leader epochs in the log and where each starts.
func (p *Partition) Epochs() []partition.EpochStart { return p.log.Epochs() }

// Producers summarises the idempotent producers the replica remembers
// (DescribeProducers).
func (p *Partition) Producers() []partition.ProducerInfo { return p.log.Producers() }

// EndOffsetFor answers a consumer's OffsetForLeaderEpoch, which the broker
// serves on the leader only. It is not clamped to the HW: a new leader's
// HW lags the epoch's start until its followers fetch, and an answer
// below a consumer's position would make the consumer think its records
// were truncated and reset (franz-go does, to the answer or the start).
// Kafka's leader answers from its log too; KIP-392's clamp is for
// followers, which do not answer here.
func (p *Partition) EndOffsetFor(epoch int32) (int32, int64) {
	return p.log.EndOffsetFor(epoch, false)
}

// CaughtUp reports whether this replica leads epoch and its HW has reached
// the start of that epoch: Kafka's test before it answers OUT_OF_RANGE
// rather than OFFSET_NOT_AVAILABLE [KP 1604–1621]. Until then an earlier
// leader may have shown a higher HW.
func (p *Partition) CaughtUp(epoch int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.role == RoleLeader && p.epoch == epoch && p.log.HighWatermark() >= p.lead.epochStart
}

// AdvanceStart moves the log start (retention, DeleteRecords) on the
// leader; followers follow the leader's log start as they fetch. It never
// passes the HW.
func (p *Partition) AdvanceStart(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return ErrClosed
	case p.role != RoleLeader:
		return ErrNotLeader
	}
	if hw := p.log.HighWatermark(); offset > hw {
		return fmt.Errorf("isr: log start %d above the high watermark %d", offset, hw)
	}
	return p.log.Log().AdvanceStart(offset)
}

// Status reports the replica's replication state.
func (p *Partition) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.log.Log()
	s := Status{
		Role: p.role, Leader: p.leaderID, LeaderEpoch: p.epoch,
		PartitionEpoch: p.st.PartitionEpoch, ISR: slices.Clone(p.st.ISR), ELR: slices.Clone(p.st.ELR),
		Recovering: p.st.Recovering, HighWatermark: l.HighWatermark(), EndOffset: l.EndOffset(), LogStart: l.StartOffset(),
	}
	if p.role != RoleLeader {
		return s
	}
	s.ISR, s.PartitionEpoch = slices.Clone(p.lead.isr), p.lead.partitionEpoch
	for _, id := range p.lead.replicas {
		r, ok := p.lead.followers[id]
		if !ok {
			continue
		}
		s.Followers = append(s.Followers, FollowerStatus{ID: id, EndOffset: r.leo, LastCaughtUp: r.lastCaughtUpTime, InISR: slices.Contains(p.lead.isr, id)})
	}
	return s
}

// Close stops the replica and closes its log; with purge it also deletes
// its directory. Waiters get ErrClosed.
func (p *Partition) Close(purge bool) error {
	p.m.remove(p)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.stopLeading()
	p.signal()
	err := p.withSync(p.log.Close)
	p.durable.notify()
	p.mu.Unlock()
	if purge {
		if rerr := os.RemoveAll(p.cfg.Dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// checkpoint syncs the log and writes a checkpoint (the Manager's timer).
func (p *Partition) checkpoint() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	end := p.log.EndOffset()
	if err := p.withSync(p.log.Checkpoint); err != nil {
		p.logger.Warn("isr: checkpoint", "group", p.cfg.Group, "err", err)
		return
	}
	p.flush.unflushed = 0
	p.markFlushed(end)
}
