package raftgroup

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

func TestCluster_SnapshotInstall(t *testing.T) { testSnapshotInstall(t, storageMode{}) }

func testSnapshotInstall(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 3, []uint64{1}, func(cfg *Config) {
		cfg.SnapshotEntries = 20
		cfg.SnapshotCatchUpEntries = 5
	})
	l := c.leader(1)
	for _, d := range seq("a", 0, 10) {
		c.propose(l, d)
	}
	f := l.node%3 + 1
	c.converged(1, seq("a", 0, 10), f)
	c.stop(f)
	for _, d := range seq("b", 0, 100) {
		c.propose(l, d)
	}
	eventually(t, "the leader to compact past the stopped follower", func() bool {
		first, _ := l.mem.FirstIndex()
		return first > 20
	})
	c.restart(f, 1)
	want := append(seq("a", 0, 10), seq("b", 0, 100)...)
	c.converged(1, want, 1, 2, 3)

	sm := c.sm(f, 1)
	sm.mu.Lock()
	restores, staged := sm.restores, len(sm.staged)
	sm.mu.Unlock()
	if restores == 0 || staged == 0 {
		t.Fatalf("follower restores=%d staged=%d: caught up without a snapshot", restores, staged)
	}
	var found bool
	for idx := range sm.staged {
		if got := sm.stagedBody(idx); string(got) == string(snapBody(idx)) {
			found = true
		}
	}
	if !found {
		t.Fatal("no staged snapshot body matches what the leader's state machine sent")
	}
	if got := l.host.Metrics().SnapshotsSent; got == 0 {
		t.Error("leader sent no snapshot through Transport.SendSnapshot")
	}
}

func confChange(changes ...*raftpb.ConfChangeSingle) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: changes}
}

func change(typ raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeSingle {
	return &raftpb.ConfChangeSingle{Type: typ.Enum(), NodeId: new(id)}
}

func (c *cluster) confChange(cc *raftpb.ConfChangeV2) *raftpb.ConfState {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		l := c.leader(1)
		p, err := l.ProposeConfChange(ctx, cc)
		if err == nil {
			var res Result
			if res, err = p.Wait(ctx); err == nil {
				return res.Value.(*raftpb.ConfState)
			}
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrProposalDropped) && !errors.Is(err, ErrProposalLost) {
			c.t.Fatalf("conf change: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // raft refuses a change while one is pending; retry shortly
	}
}

func (c *cluster) waitConf(nodes []uint64, voters []uint64) {
	c.t.Helper()
	for _, id := range nodes {
		eventually(c.t, "configuration to settle", func() bool {
			s := c.host(id).Group(1).Status()
			return slices.Equal(s.Voters, voters) && len(s.VotersOutgoing) == 0 && len(s.Learners) == 0
		})
	}
}

func TestCluster_MembershipChange3to5to3(t *testing.T) { testMembershipChange3to5to3(t, storageMode{}) }

func testMembershipChange3to5to3(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 3, []uint64{1}, nil)
	c.propose(c.leader(1), "three")
	for _, id := range []uint64{4, 5} {
		c.start(id)
		c.createGroup(id, 1, GroupConfig{ID: 1, Join: true})
	}

	// Learners first: they catch up without counting toward quorum.
	cs := c.confChange(confChange(change(raftpb.ConfChangeAddLearnerNode, 4), change(raftpb.ConfChangeAddLearnerNode, 5)))
	if got := sortedCopy(cs.GetLearners()); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("learners = %v, want [4 5]", got)
	}
	c.converged(1, []string{"three"}, 4, 5)

	// Promote both at once: a joint configuration, left automatically.
	cs = c.confChange(confChange(change(raftpb.ConfChangeAddNode, 4), change(raftpb.ConfChangeAddNode, 5)))
	if len(cs.GetVotersOutgoing()) == 0 {
		t.Fatalf("promoting two voters did not enter a joint configuration: %v", cs)
	}
	all := []uint64{1, 2, 3, 4, 5}
	c.waitConf(all, all)
	c.propose(c.leader(1), "five")
	c.converged(1, []string{"three", "five"}, all...)

	// Back to three, removing the leader and one other node jointly.
	l := c.leader(1).node
	other := uint64(1)
	if other == l {
		other = 2
	}
	c.confChange(confChange(change(raftpb.ConfChangeRemoveNode, l), change(raftpb.ConfChangeRemoveNode, other)))
	var rest []uint64
	for _, id := range all {
		if id != l && id != other {
			rest = append(rest, id)
		}
	}
	c.waitConf(rest, rest)
	// The removed leader applies the final configuration just after the
	// others learn its commit; then it steps down (StepDownOnRemoval).
	var nl *Group
	eventually(t, "a leader among the remaining nodes", func() bool {
		nl = c.leader(1)
		return nl.node != l && nl.node != other
	})
	for _, id := range []uint64{l, other} {
		if err := c.host(id).RemoveGroup(1, true); err != nil {
			t.Fatal(err)
		}
	}
	c.propose(nl, "three again")
	c.converged(1, []string{"three", "five", "three again"}, rest...)
}

func (c *cluster) rafTicks() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for _, h := range c.hosts {
		n += h.Metrics().Ticks
	}
	return n
}

func TestHost_QuiesceAndWake(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, func(cfg *Config) {
		cfg.QuiesceAfterTicks = 5
		cfg.KeepaliveTicks = 2
		cfg.PeerTimeoutTicks = 50
	})
	l := c.leader(1)
	c.propose(l, "x")
	allQuiesced := func() bool {
		for id := uint64(1); id <= 3; id++ {
			if h := c.host(id); h != nil && !h.Group(1).Status().Quiesced {
				return false
			}
		}
		return true
	}
	eventually(t, "all replicas to quiesce", allQuiesced)

	// Over 30 host ticks, an idle quiesced group ticks raft (almost) never;
	// awake, its three replicas would tick 90 times.
	before, t0 := c.rafTicks(), l.host.ticks.Load()
	eventually(t, "30 host ticks", func() bool { return l.host.ticks.Load() >= t0+30 })
	if got := c.rafTicks() - before; got >= 30 {
		t.Fatalf("quiesced group ticked raft %d times in 30 host ticks", got)
	}

	// A proposal wakes it; it commits everywhere and quiesces again.
	c.propose(l, "y")
	c.converged(1, []string{"x", "y"}, 1, 2, 3)
	eventually(t, "all replicas to quiesce again", allQuiesced)

	// The leader dies while quiesced: the followers' hosts stop hearing
	// its keepalives, wake the group, and elect a new leader.
	old := l.node
	c.stop(old)
	nl := c.leader(1)
	if nl.node == old {
		t.Fatal("dead node still leads")
	}
	c.propose(nl, "z")
	var live []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != old {
			live = append(live, id)
		}
	}
	c.converged(1, []string{"x", "y", "z"}, live...)
}

// failingStorage wraps a real DiskStorage and fails every write once
// armed, counting writes attempted after the failure.
type failingStorage struct {
	Storage
	armed      atomic.Bool
	afterFault atomic.Int32
}

var errDiskFull = errors.New("injected: no space left on device")

func (f *failingStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	if f.armed.Load() {
		f.afterFault.Add(1)
		return errDiskFull
	}
	return f.Storage.Save(hs, ents, sync)
}

func TestHost_WALSaveErrorStopsNode(t *testing.T) {
	stores := map[uint64]*failingStorage{}
	var c *cluster
	c = newCluster(t, 3, nil, func(cfg *Config) {
		node, fsync := cfg.NodeID, cfg.Fsync
		cfg.NewStorage = func(group uint64, dir string) (Storage, error) {
			ds, err := OpenDiskStorage(dir, node, group, fsync, nil)
			if err != nil {
				return nil, err
			}
			fs := &failingStorage{Storage: ds}
			stores[node] = fs
			return fs, nil
		}
	})
	for id := uint64(1); id <= 3; id++ {
		c.createGroup(id, 1, GroupConfig{ID: 1, Peers: []uint64{1, 2, 3}})
	}
	l := c.leader(1)
	c.propose(l, "ok")
	stores[l.node].armed.Store(true)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The next save fails, whatever it carries (this proposal, or a commit
	// index a heartbeat brought first): either way the proposal must end
	// with ErrStopped.
	p, err := l.Propose(ctx, []byte("doomed"))
	if err == nil {
		_, err = p.Wait(ctx)
	}
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("proposal on a node whose WAL failed: err = %v, want ErrStopped", err)
	}
	eventually(t, "the fatal handler", func() bool { return len(c.fatalErrors()) > 0 })
	fatals := c.fatalErrors()
	var fe *FatalError
	if len(fatals) != 1 || !errors.As(fatals[0], &fe) || !errors.Is(fatals[0], errDiskFull) || fe.Op != "save entries" {
		t.Fatalf("fatal handler got %v, want one save-entries FatalError wrapping the disk error", fatals)
	}
	if !l.Status().Stopped {
		t.Error("group status does not say stopped")
	}
	if _, err := l.Propose(ctx, []byte("more")); !errors.Is(err, ErrStopped) {
		t.Errorf("propose after fatal: err = %v, want ErrStopped", err)
	}
	// Nothing more is written after the failed save, however long raft
	// keeps being ticked and messaged.
	t0 := l.host.ticks.Load()
	eventually(t, "20 host ticks", func() bool { return l.host.ticks.Load() >= t0+20 })
	if n := stores[l.node].afterFault.Load(); n != 1 {
		t.Errorf("%d saves attempted after the fault, want exactly the failing one", n)
	}
}

// TestCluster_SnapshotByBytes: large entries trigger snapshots by size,
// long before SnapshotEntries, and compaction keeps about
// SnapshotCatchUpBytes behind them, so memory stays bounded.
func TestCluster_SnapshotByBytes(t *testing.T) { testSnapshotByBytes(t, storageMode{}) }

func testSnapshotByBytes(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 3, []uint64{1}, func(cfg *Config) {
		cfg.SnapshotEntries = 1 << 30
		cfg.SnapshotBytes = 64 << 10
		cfg.SnapshotCatchUpBytes = 16 << 10
	})
	l := c.leader(1)
	big := string(make([]byte, 8<<10))
	for i := range 40 {
		c.propose(l, big[:len(big)-i])
	}
	eventually(t, "a snapshot by bytes and a compacted log", func() bool {
		first, _ := l.mem.FirstIndex()
		last, _ := l.mem.LastIndex()
		// 40 entries of ~8 KiB: snapshots every 8, keeping 2 behind.
		return first > 10 && last-first < 12
	})
	// About five snapshots by bytes on each node (40 entries of ~8 KiB,
	// one per 64 KiB); counted, as the broker exports them.
	if n := c.host(l.node).Metrics().SnapshotsTaken; n < 3 || n > 8 {
		t.Errorf("leader took %d snapshots, want about 5", n)
	}
}

// A host's counters never go back: what a removed group counted stays in
// the sums (Prometheus reads a counter that drops as a restart).
func TestHost_MetricsKeepRemovedGroups(t *testing.T) {
	c := newCluster(t, 3, []uint64{1, 2}, nil)
	for range 5 {
		c.propose(c.leader(2), "x")
	}
	h := c.host(1)
	eventually(t, "node 1 to apply group 2's entries", func() bool { return len(c.sm(1, 2).data()) == 5 })
	before := h.Metrics()
	if err := h.RemoveGroup(2, false); err != nil {
		t.Fatal(err)
	}
	after := h.Metrics()
	if after.EntriesApplied < before.EntriesApplied || after.Readys < before.Readys || after.Syncs < before.Syncs {
		t.Errorf("counters went back when a group was removed: applied %d -> %d, readys %d -> %d, syncs %d -> %d",
			before.EntriesApplied, after.EntriesApplied, before.Readys, after.Readys, before.Syncs, after.Syncs)
	}
}

// A learner added to a group whose log was compacted catches up from one
// snapshot: raft must not send it the snapshot from before it was added,
// whose configuration lacks it and which it would refuse after the whole
// body had streamed (snapshotGate).
func TestCluster_NewLearnerGetsOneSnapshot(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, func(cfg *Config) {
		cfg.SnapshotEntries = 20
		cfg.SnapshotCatchUpEntries = 5
	})
	l := c.leader(1)
	want := seq("a", 0, 100)
	for _, d := range want {
		c.propose(l, d)
	}
	eventually(t, "the leader to compact", func() bool {
		first, _ := l.mem.FirstIndex()
		return first > 20
	})
	c.start(4)
	c.createGroup(4, 1, GroupConfig{ID: 1, Join: true})
	before := c.leader(1).host.Metrics().SnapshotsSent
	c.confChange(confChange(change(raftpb.ConfChangeAddLearnerNode, 4)))
	c.converged(1, want, 4)
	if sent := c.leader(1).host.Metrics().SnapshotsSent - before; sent != 1 {
		t.Fatalf("the leader sent %d snapshots to the new learner, want 1", sent)
	}
	sm := c.sm(4, 1)
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.restores != 1 {
		t.Fatalf("the learner restored %d snapshots, want 1", sm.restores)
	}
}

// The snapshot a group takes right after a change that adds a member is
// at the change's index, which the state machine never applied: a
// ConfIndexer counts it, so that its durable Applied() is not behind the
// snapshot at the next start (which would look like a snapshot received
// and never restored: a partition then refuses to open).
func TestCluster_SnapshotAtConfChangeCountsAsApplied(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	l := c.leader(1)
	c.propose(l, "a")
	c.start(4)
	c.createGroup(4, 1, GroupConfig{ID: 1, Join: true})
	c.confChange(confChange(change(raftpb.ConfChangeAddLearnerNode, 4)))
	last := l.lastIndex()
	var snapAt uint64
	eventually(t, "a snapshot at the change", func() bool {
		snap, err := l.mem.Snapshot()
		snapAt = snap.GetMetadata().GetIndex()
		return err == nil && snapAt >= last
	})
	if got := c.sm(l.node, 1).Applied(); got < snapAt {
		t.Fatalf("state machine applied %d, behind the snapshot at %d taken at the conf change", got, snapAt)
	}
}

// A leader elected after the old one died must not count the dead node
// caught up: a reassignment hands leadership to a target voter only once
// it is caught up (coordinator.moveStateOf: MemberProgress lag < 1 s),
// and a transfer to a dead voter makes raft drop every proposal until
// the transfer times out.
func TestGroup_NewLeaderDoesNotCountTheDeadOldLeaderCaughtUp(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	old := c.leader(1)
	c.propose(old, "a")
	dead := old.node
	c.stop(dead)
	lead := c.leader(1)
	p, last, ok := lead.MemberProgress(dead)
	if !ok {
		t.Fatalf("no progress of %d", dead)
	}
	if lag := p.Lag(time.Now(), last); lag < time.Second {
		t.Errorf("new leader %d counts the dead old leader %d caught up (match %d of %d, lag %s)",
			lead.node, dead, p.Match, last, lag)
	}
}
