package raftgroup

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"golang.org/x/time/rate"

	"github.com/raftq/raftq/internal/logging"
)

// Host runs the raft groups of one node: it creates and removes them,
// ticks them from one ticker, routes inbound traffic to them by group id
// (it is the node's Receiver), and batches their outbound messages per
// destination node.
type Host struct {
	cfg       Config
	log       *slog.Logger
	transport Transport
	// learnerSnaps paces snapshot bodies sent to learners (nil: no
	// bound; Config.LearnerSnapshotBytesPerSec).
	learnerSnaps *rate.Limiter

	mu     sync.Mutex // guards groups and closed (lock order: DESIGN.md)
	groups map[uint64]*Group
	list   atomic.Pointer[[]*Group] // sorted by id, copy-on-write under mu
	closed bool

	// countMu guards closing and retired, and is held while a group moves
	// from list to closing; a leaf lock, taken after mu. closing are
	// removed groups still closing, retired what removed groups counted:
	// Metrics adds both, so that its counters never go back when a group
	// goes, and never waits for mu (held while a group opens).
	countMu sync.Mutex
	closing map[*Group]struct{}
	retired Metrics // only the per-group counters

	outMu  sync.Mutex // guards out; a leaf lock
	out    map[uint64][]Envelope
	flushc chan struct{}

	ticks   atomic.Int64
	heardMu sync.Mutex // guards heard; a leaf lock
	heard   map[uint64]int64

	nodeLog *nodeLog // nil unless Config.SharedWAL

	fatalOnce sync.Once
	stopc     chan struct{}
	wg        sync.WaitGroup
	metrics   hostMetrics
}

var _ Receiver = (*Host)(nil)

// NewHost validates cfg and, unless cfg.Manual, starts the ticker and the
// outbound flusher.
func NewHost(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Host{
		cfg:       cfg,
		log:       logging.Discard(cfg.Logger).With("node", cfg.NodeID),
		transport: cfg.Transport,
		groups:    map[uint64]*Group{},
		closing:   map[*Group]struct{}{},
		out:       map[uint64][]Envelope{},
		flushc:    make(chan struct{}, 1),
		heard:     map[uint64]int64{},
		stopc:     make(chan struct{}),
	}
	h.list.Store(&[]*Group{})
	if r := cfg.LearnerSnapshotBytesPerSec; r > 0 {
		h.learnerSnaps = rate.NewLimiter(rate.Limit(r), throttleBurst(r))
	}
	if err := h.openNodeLog(); err != nil {
		return nil, err
	}
	if h.cfg.Fatal == nil {
		h.cfg.Fatal = func(err error) {
			h.log.Error("fatal storage or state machine error: exiting", "err", err)
			os.Exit(1)
		}
	}
	if !cfg.Manual {
		h.wg.Add(2)
		go h.runTicker()
		go h.runFlusher()
	}
	return h, nil
}

// openNodeLog opens the shared WAL of a SharedWAL host, and refuses to
// run a host without it on data that has one.
func (h *Host) openNodeLog() error {
	cfg := h.cfg
	if cfg.NewStorage != nil {
		return nil
	}
	dir := filepath.Join(cfg.DataDir, "raft", "wal")
	if !cfg.SharedWAL {
		if wal.Exist(dir) {
			return fmt.Errorf("raftgroup: %s holds a shared node WAL: this node must run with SharedWAL (--wal shared)", dir)
		}
		return nil
	}
	l, err := openNodeLog(dir, walMetadata(cfg.NodeID, HostGroupID), cfg.Fsync, logging.Zap(h.log), cfg.ObserveSync, h.compactGroup)
	if err != nil {
		return err
	}
	h.nodeLog = l
	return nil
}

// CreateGroup opens (or creates) a group's storage under
// DataDir/raft/<id>/ and starts the group. A group that has state on disk
// restarts from it; gc.Peers and gc.Join matter only for a new one.
func (h *Host) CreateGroup(gc GroupConfig) (*Group, error) {
	if err := gc.Validate(h.cfg.NodeID); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrStopped
	}
	if _, ok := h.groups[gc.ID]; ok {
		return nil, fmt.Errorf("%w: %d", ErrGroupExists, gc.ID)
	}
	fsync := h.cfg.Fsync
	if gc.AlwaysFsync {
		fsync = FsyncAlways
	}
	st, err := h.openStorage(gc.ID, fsync)
	if err != nil {
		return nil, err
	}
	g, err := newGroup(h, gc, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	h.groups[gc.ID] = g
	h.rebuildList()
	if !h.cfg.Manual {
		go g.run()
	}
	return g, nil
}

func (h *Host) groupDir(id uint64) string {
	return filepath.Join(h.cfg.DataDir, "raft", strconv.FormatUint(id, 10))
}

func (h *Host) openStorage(id uint64, fsync FsyncPolicy) (Storage, error) {
	dir := h.groupDir(id)
	if h.cfg.NewStorage != nil {
		return h.cfg.NewStorage(id, dir)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create group dir %s: %w", dir, err)
	}
	if h.nodeLog != nil {
		shared, err := h.onNodeLog(id, dir, fsync)
		if err != nil {
			return nil, err
		}
		if shared {
			return openNodeStorage(h.nodeLog, dir, id, logging.Zap(h.log.With("group", id)))
		}
	}
	return OpenDiskStorage(dir, h.cfg.NodeID, id, fsync, h.log.With("group", id))
}

// onNodeLog says where a group's log lives when the node has a shared
// WAL: where it already is (its own WAL, or records in the node log), and
// for a new group in the node log unless the group needs an fsync policy
// the node log does not follow.
func (h *Host) onNodeLog(id uint64, dir string, fsync FsyncPolicy) (bool, error) {
	if wal.Exist(filepath.Join(dir, "wal")) {
		return false, nil
	}
	switch {
	case fsync == h.cfg.Fsync:
		return true, nil
	case h.nodeLog.has(id):
		return false, fmt.Errorf("raftgroup: group %d: its log is in the shared WAL, which fsync policy %s does not fsync; start the node with the policy it was written with", id, h.cfg.Fsync)
	}
	return false, nil
}

func (h *Host) rebuildList() {
	l := make([]*Group, 0, len(h.groups))
	for _, g := range h.groups {
		l = append(l, g)
	}
	slices.SortFunc(l, func(a, b *Group) int { return cmp.Compare(a.id, b.id) })
	h.list.Store(&l)
}

// Group returns the group with id, or nil.
func (h *Host) Group(id uint64) *Group {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.groups[id]
}

// Groups returns the host's groups in id order.
func (h *Host) Groups() []*Group { return slices.Clone(*h.list.Load()) }

// RemoveGroup stops a group and closes its storage; with purge it also
// deletes the group's data directory (after the replica was removed from
// the group's configuration, or the group deleted).
func (h *Host) RemoveGroup(id uint64, purge bool) error {
	h.mu.Lock()
	g, ok := h.groups[id]
	if ok {
		delete(h.groups, id)
		h.countMu.Lock()
		h.rebuildList()
		h.closing[g] = struct{}{}
		h.countMu.Unlock()
	}
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %d", ErrGroupNotFound, id)
	}
	err := g.close()
	h.retire(g)
	if purge {
		err = errors.Join(err, h.dropData(id))
	}
	return err
}

// retire moves a closed group's counters from closing to retired.
func (h *Host) retire(g *Group) {
	h.countMu.Lock()
	defer h.countMu.Unlock()
	delete(h.closing, g)
	h.retired.addGroup(&g.metrics)
}

// compactGroup asks group id, if it runs here, to snapshot soon (the
// shared WAL's flusher calls it; it must not block).
func (h *Host) compactGroup(id uint64) {
	l := *h.list.Load()
	i, ok := slices.BinarySearchFunc(l, id, func(g *Group, id uint64) int { return cmp.Compare(g.id, id) })
	if ok {
		_ = l[i].submit(l[i].snapshotNow)
	}
}

// DropGroupData deletes the data a group left on this node, for a group
// that is not running here (a replica removed while the node was down).
func (h *Host) DropGroupData(id uint64) error {
	if h.Group(id) != nil {
		return fmt.Errorf("%w: %d is running", ErrGroupExists, id)
	}
	return h.dropData(id)
}

// dropData forgets the group in the shared WAL, then removes its
// directory.
func (h *Host) dropData(id uint64) error {
	if h.cfg.NewStorage != nil {
		return nil
	}
	if h.nodeLog != nil {
		if err := h.nodeLog.remove(id); err != nil {
			return fmt.Errorf("forget group %d in the node wal: %w", id, err)
		}
	}
	if err := os.RemoveAll(h.groupDir(id)); err != nil {
		return fmt.Errorf("remove group dir: %w", err)
	}
	return nil
}

// Close stops every group and the Host's goroutines. Pending proposals
// fail with ErrStopped.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	groups := *h.list.Load()
	h.groups = map[uint64]*Group{}
	h.countMu.Lock()
	h.rebuildList()
	for _, g := range groups {
		h.closing[g] = struct{}{}
	}
	h.countMu.Unlock()
	h.mu.Unlock()
	close(h.stopc)
	h.wg.Wait()
	var errs []error
	for _, g := range groups {
		errs = append(errs, g.close())
		h.retire(g)
	}
	if h.nodeLog != nil {
		errs = append(errs, h.nodeLog.close())
	}
	return errors.Join(errs...)
}

// run is a group's goroutine in production mode.
func (g *Group) run() {
	defer close(g.donec)
	for {
		select {
		case <-g.stopc:
			return
		case <-g.notifyc:
		}
		if !g.process() {
			return
		}
	}
}

// close stops the owner and closes the storage.
func (g *Group) close() error {
	if !g.host.cfg.Manual {
		close(g.stopc)
		<-g.donec
	}
	if !g.halted {
		g.shutdown()
	}
	return g.storage.Close()
}

func (h *Host) fatal(err error) {
	h.fatalOnce.Do(func() { h.cfg.Fatal(err) })
}

// Tick advances every group's clock by one tick; manual mode only (the
// Host's ticker calls tick otherwise).
func (h *Host) Tick() { h.tick() }

// Process runs one turn of every group in id order, then flushes the
// outbound queues in destination order; manual mode only.
func (h *Host) Process() {
	for _, g := range *h.list.Load() {
		g.process()
	}
	h.flush()
}

func (h *Host) runTicker() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			h.tick()
		case <-h.stopc:
			return
		}
	}
}

// tick ticks every group that is not quiesced, wakes the quiesced ones
// that have a member the Host has not heard from lately, and sends the
// node-level keepalives.
func (h *Host) tick() {
	now := h.ticks.Add(1)
	for _, g := range *h.list.Load() {
		if !g.quiesced.Load() {
			g.addTick()
			continue
		}
		s := g.status.Load()
		if !h.membersAlive(confView{s.Voters, s.VotersOutgoing, s.Learners, s.LearnersNext}) {
			g.quiesced.Store(false)
			g.addTick()
		}
	}
	if h.cfg.QuiesceAfterTicks > 0 && now%int64(h.cfg.KeepaliveTicks) == 0 {
		h.sendKeepalives()
	}
}

func (h *Host) runFlusher() {
	defer h.wg.Done()
	for {
		select {
		case <-h.flushc:
			h.flush()
		case <-h.stopc:
			return
		}
	}
}
