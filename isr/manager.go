package isr

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/raftq/raftq/internal/logging"
)

// Manager is a node's ISR side: its ISR partitions, one fetcher per leader
// node that replicates the partitions this node follows from it (Kafka's
// ReplicaFetcherThread, num.replica.fetchers=1), the server of its own
// followers' fetches, and the timers of ISR expiration, flush.ms and the
// checkpoint.
type Manager struct {
	cfg    ManagerConfig
	logger *slog.Logger

	mu       sync.Mutex
	closed   bool
	parts    map[uint64]*Partition // by group
	byTopic  map[partKey]*Partition
	fetchers map[uint64]*fetcher // by leader node

	// activity is notified at every append, HW change and role change of
	// a partition here, for the fetch long-polls.
	activity notifier

	// Manual mode only (manual.go), guarded by mu.
	alters  []alterWatch // AlterPartition answers Step hands over
	flushes []*Partition // leader flushes Step runs
	ticks   manualTimers

	ctx    context.Context // ends at Close: fetches in flight stop
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup
}

// partKey names a partition the way Kafka's Fetch does.
type partKey struct {
	topic [16]byte
	index int32
}

// Validate reports the first invalid field.
func (c ManagerConfig) Validate() error {
	switch {
	case c.Self == 0:
		return errors.New("isr: no node id")
	case c.ReplicaLagTimeMax <= 0:
		return fmt.Errorf("isr: replica lag time max %s must be positive", c.ReplicaLagTimeMax)
	case c.ReplicaFetchWaitMax <= 0:
		return fmt.Errorf("isr: replica fetch wait max %s must be positive", c.ReplicaFetchWaitMax)
	case c.MaxFetchBytes <= 0:
		return fmt.Errorf("isr: max fetch bytes %d must be positive", c.MaxFetchBytes)
	case c.Fetch == nil:
		return errors.New("isr: no fetch transport")
	case c.Propose == nil:
		return errors.New("isr: no AlterPartition proposer")
	case c.CheckpointInterval <= 0:
		return fmt.Errorf("isr: checkpoint interval %s must be positive", c.CheckpointInterval)
	}
	return nil
}

// NewManager starts a node's ISR side.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg: cfg, logger: logging.Discard(cfg.Logger),
		parts: map[uint64]*Partition{}, byTopic: map[partKey]*Partition{}, fetchers: map[uint64]*fetcher{},
		stop: make(chan struct{}),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if cfg.Manual {
		m.ticks = newManualTimers(m.now())
		return m, nil
	}
	m.wg.Add(1)
	go m.timers()
	return m, nil
}

// Close stops every fetcher and timer and waits for them. Partitions are
// closed by their owners (Partition.Close), before or after.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.stop)
	m.cancel()
	m.mu.Unlock()
	m.wg.Wait()
}

// Open opens (creating if new) the replica cfg names and registers it; it
// takes no role until the first Update.
func (m *Manager) Open(cfg PartitionConfig) (*Partition, error) {
	m.mu.Lock()
	_, dup := m.parts[cfg.Group]
	closed := m.closed
	m.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case dup:
		return nil, fmt.Errorf("isr: group %d is open already", cfg.Group)
	}
	p, err := newPartition(m, cfg)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		_ = p.log.Close()
		return nil, ErrClosed
	}
	m.parts[cfg.Group] = p
	m.byTopic[partKey{cfg.TopicID, cfg.Index}] = p
	return p, nil
}

// leaderConfig is the leader bookkeeping's configuration for group.
func (m *Manager) leaderConfig(group uint64, logger *slog.Logger) Config {
	return Config{
		Self: m.cfg.Self, Group: group, ReplicaLagTimeMax: m.cfg.ReplicaLagTimeMax,
		Propose: m.cfg.Propose, Eligible: m.cfg.Eligible, Logger: logger,
	}
}

// remove forgets a partition that is closing.
func (m *Manager) remove(p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parts[p.cfg.Group] == p {
		delete(m.parts, p.cfg.Group)
		delete(m.byTopic, partKey{p.cfg.TopicID, p.cfg.Index})
	}
	m.unfollowLocked(p)
}

// lookup finds the partition Kafka's Fetch names.
func (m *Manager) lookup(topic [16]byte, index int32) *Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byTopic[partKey{topic, index}]
}

func (m *Manager) partitions() []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedParts(m.parts)
}

// sortedParts lists ps by group, so that every pass over them (and a
// simulated run) goes in one order.
func sortedParts(ps map[uint64]*Partition) []*Partition {
	out := make([]*Partition, 0, len(ps))
	for _, p := range ps {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Partition) int { return cmp.Compare(a.cfg.Group, b.cfg.Group) })
	return out
}

// now is the Manager's time: Config.Clock, or the wall clock.
func (m *Manager) now() time.Time {
	if m.cfg.Clock != nil {
		return m.cfg.Clock()
	}
	return time.Now()
}

// follow moves p to the fetcher towards leader, starting it if new.
func (m *Manager) follow(p *Partition, leader uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unfollowLocked(p)
	if m.closed {
		return
	}
	f := m.fetchers[leader]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[leader] = f
		if !m.cfg.Manual {
			m.wg.Add(1)
			go f.run()
		}
	}
	f.parts[p.cfg.Group] = p
	f.kick()
}

// unfollow takes p off whatever fetcher replicates it.
func (m *Manager) unfollow(p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unfollowLocked(p)
}

func (m *Manager) unfollowLocked(p *Partition) {
	for _, f := range m.fetchers {
		delete(f.parts, p.cfg.Group)
	}
}

// fetchSet returns f's partitions, or reports that f is done: the
// Manager closed or f has nothing left to fetch, in which case it is
// forgotten so that the next follow starts a new one.
func (m *Manager) fetchSet(f *fetcher) ([]*Partition, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || len(f.parts) == 0 {
		if m.fetchers[f.leader] == f {
			delete(m.fetchers, f.leader)
		}
		return nil, false
	}
	return sortedParts(f.parts), true
}

// timers runs ISR expiration every half lag time (Kafka's
// "isr-expiration"), the flush.ms check and the periodic checkpoint.
func (m *Manager) timers() {
	defer m.wg.Done()
	expire := time.NewTicker(max(m.cfg.ReplicaLagTimeMax/2, time.Millisecond))
	defer expire.Stop()
	flush := time.NewTicker(100 * time.Millisecond)
	defer flush.Stop()
	cp := time.NewTicker(m.cfg.CheckpointInterval)
	defer cp.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-expire.C:
			for _, p := range m.partitions() {
				p.maybeShrink(now)
				p.retryResign()
				p.retryReportLogEnd()
			}
		case now := <-flush.C:
			for _, p := range m.partitions() {
				p.flushIfDue(now)
			}
		case <-cp.C:
			for _, p := range m.partitions() {
				p.checkpoint()
			}
		}
	}
}
