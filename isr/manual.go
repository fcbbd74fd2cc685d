package isr

import (
	"cmp"
	"slices"
	"time"

	"github.com/raftq/raftq/coordinator"
)

// alterWatch is an AlterPartition in flight on a manual Manager: Step hands
// its answer over once the channel has one.
type alterWatch struct {
	p  *Partition
	ch <-chan coordinator.ItemResult
}

// manualTimers are the Manager's timers (timers) as due times.
type manualTimers struct {
	expire, flush, checkpoint time.Time
}

func newManualTimers(now time.Time) manualTimers {
	return manualTimers{expire: now, flush: now, checkpoint: now}
}

// watchAlterManual registers an AlterPartition answer for Step. The
// Partition's mu is held; Manager.mu nests inside it.
func (m *Manager) watchAlterManual(p *Partition, ch <-chan coordinator.ItemResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.alters = append(m.alters, alterWatch{p, ch})
}

// flushManual queues a leader's background flush for Step.
func (m *Manager) flushManual(p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushes = append(m.flushes, p)
}

// Step does on a manual Manager what its goroutines do on another: it
// hands over the AlterPartition answers that have come, runs the leader
// flushes started since the last Step, and runs the timers that are due
// by Clock (ISR expiration every half lag time, the flush.ms check every
// 100 ms, the checkpoint every CheckpointInterval). Partitions go in
// group order.
func (m *Manager) Step() {
	m.mu.Lock()
	alters, flushes := m.alters, m.flushes
	m.alters, m.flushes = nil, nil
	m.mu.Unlock()
	for _, w := range alters {
		select {
		case res, ok := <-w.ch:
			if ok {
				w.p.alterAnswered(w.ch, res)
			}
		default:
			m.watchAlterManual(w.p, w.ch) // not yet: keep waiting
		}
	}
	slices.SortStableFunc(flushes, func(a, b *Partition) int { return cmp.Compare(a.cfg.Group, b.cfg.Group) })
	for _, p := range flushes {
		p.flushLoop()
	}
	m.runDueTimers(m.now())
}

func (m *Manager) runDueTimers(now time.Time) {
	t := &m.ticks
	if !now.Before(t.expire) {
		t.expire = now.Add(max(m.cfg.ReplicaLagTimeMax/2, time.Millisecond))
		for _, p := range m.partitions() {
			p.maybeShrink(now)
			p.retryResign()
			p.retryReportLogEnd()
		}
	}
	if !now.Before(t.flush) {
		t.flush = now.Add(100 * time.Millisecond)
		for _, p := range m.partitions() {
			p.flushIfDue(now)
		}
	}
	if !now.Before(t.checkpoint) {
		t.checkpoint = now.Add(m.cfg.CheckpointInterval)
		for _, p := range m.partitions() {
			p.checkpoint()
		}
	}
}

// FetchRound is one follower fetch a manual Manager wants sent: Request to
// node Leader (whose Manager's HandleFetch answers it), and Done to call
// with the answer or the error that stood in for one.
type FetchRound struct {
	Leader  uint64
	Request []byte
	Done    func(resp []byte, err error)
}

// FetchRounds returns the fetch each leader's fetcher would send now, in
// leader order; a fetcher whose partitions are all held back (after a
// refusal, until their retry time) sends none. Done applies the answer as
// a fetcher's round does; a failed round needs no call.
func (m *Manager) FetchRounds() []FetchRound {
	m.mu.Lock()
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		fs = append(fs, f)
	}
	m.mu.Unlock()
	slices.SortFunc(fs, func(a, b *fetcher) int { return cmp.Compare(a.leader, b.leader) })
	var out []FetchRound
	now := m.now()
	for _, f := range fs {
		parts, ok := m.fetchSet(f)
		if !ok {
			continue
		}
		sent, req := f.request(parts, now)
		if len(sent) == 0 {
			continue
		}
		out = append(out, FetchRound{Leader: f.leader, Request: encodeFetchRequest(req), Done: func(b []byte, err error) {
			if err == nil {
				f.answer(sent, b)
			}
		}})
	}
	return out
}
