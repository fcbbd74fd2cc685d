package raftgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// storageMode is how a test cluster's hosts store their groups: on a WAL
// per group or on the shared node WAL, written inline or with raft's
// asynchronous storage writes. The cluster tests take it as a parameter,
// so that every mode runs the same tests without a flipped global.
type storageMode struct {
	sharedWAL   bool // Config.SharedWAL
	asyncWrites bool // Config.AsyncStorageWrites
}

func (m storageMode) apply(cfg *Config) {
	cfg.SharedWAL = m.sharedWAL
	cfg.AsyncStorageWrites = m.asyncWrites
}

// TestSharedWAL runs the cluster tests that restart nodes, kill leaders,
// install snapshots and change membership again with every group of a
// node on the shared node WAL.
func TestSharedWAL(t *testing.T) { runSharedWALSuite(t, storageMode{sharedWAL: true}) }

// TestAsyncStorageWrites runs the same cluster tests with raft's
// asynchronous storage writes: on the shared WAL, whose saves complete on
// its flusher while the groups go on, and on a WAL per group, written
// inline through the same message path.
func TestAsyncStorageWrites(t *testing.T) {
	t.Run("SharedWAL", func(t *testing.T) { runSharedWALSuite(t, storageMode{sharedWAL: true, asyncWrites: true}) })
	t.Run("GroupWAL", func(t *testing.T) { runClusterSuite(t, storageMode{asyncWrites: true}) })
}

// runSharedWALSuite runs the cluster suite and the shared WAL's own
// cluster tests in mode m.
func runSharedWALSuite(t *testing.T, m storageMode) {
	runClusterSuite(t, m)
	t.Run("RemovedGroupStaysRemoved", func(t *testing.T) { testRemovedGroupStaysRemoved(t, m) })
	t.Run("IdleGroupDoesNotPinTheLog", func(t *testing.T) { testIdleGroupDoesNotPinTheLog(t, m) })
}

// runClusterSuite runs the cluster tests that exercise storage in mode m.
func runClusterSuite(t *testing.T, m storageMode) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, storageMode)
	}{
		{"Election", testElection},
		{"FollowerRestartFromWAL", testFollowerRestartFromWAL},
		{"LeaderKill", testLeaderKill},
		{"PartitionedLeaderLosesProposal", testPartitionedLeaderLosesProposal},
		{"SnapshotInstall", testSnapshotInstall},
		{"SnapshotByBytes", testSnapshotByBytes},
		{"MembershipChange3to5to3", testMembershipChange3to5to3},
		{"SnapshotPersistsInBackground", testSnapshotPersistsInBackground},
		{"TransferLeadership", testTransferLeadership},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, m) })
	}
}

// testRemovedGroupStaysRemoved: a group removed with purge must not come
// back from the shared WAL when the node restarts and a group of the same
// id is created again; it starts empty.
func testRemovedGroupStaysRemoved(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 1, []uint64{4}, nil)
	l := c.leader(4)
	for _, d := range seq("a", 0, 5) {
		c.propose(l, d)
	}
	if err := c.host(1).RemoveGroup(4, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.host(1).cfg.DataDir, "raft", "4")); !os.IsNotExist(err) {
		t.Fatalf("group dir still there: %v", err)
	}
	c.stop(1)
	c.start(1)
	c.createGroup(1, 4, GroupConfig{ID: 4, Peers: []uint64{1}})
	l = c.leader(4)
	c.propose(l, "fresh")
	c.converged(4, []string{"fresh"}, 1)
}

// testIdleGroupDoesNotPinTheLog: a group that writes a few entries and
// then idles, far below its snapshot thresholds, must not keep the node
// WAL from deleting old segments while another group writes a lot: the
// checkpoint asks it to snapshot. Its data survives a restart.
func testIdleGroupDoesNotPinTheLog(t *testing.T, m storageMode) {
	useWALSegmentSize(t, 64<<10)
	c := newClusterIn(t, m, 1, []uint64{1, 2}, func(cfg *Config) { cfg.SnapshotBytes = 256 << 10 })
	c.propose(c.leader(1), "idle")
	busy := c.leader(2)
	big := strings.Repeat("x", 8<<10)
	dir := filepath.Join(c.host(1).cfg.DataDir, "raft", "wal")
	most := 0
	for i := range 512 { // 4 MiB: 64 segments if nothing were deleted
		c.propose(busy, fmt.Sprint(i, big))
		names, err := sortedNames(dir, ".wal")
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, len(names))
	}
	if most > 24 {
		t.Errorf("node wal grew to %d segments of 64 KiB for 4 MiB written: the idle group pins it", most)
	}
	c.stop(1)
	c.restart(1, 1, 2)
	c.converged(1, []string{"idle"}, 1)
}

// TestSharedWAL_SwitchingLayouts: a node's data decides where each
// group's log lives. A group with its own WAL keeps it when the node
// turns SharedWAL on; a node whose data has a shared WAL refuses to run
// without it; a group logged in the shared WAL refuses a fsync policy the
// shared WAL does not follow, rather than move.
func TestSharedWAL_SwitchingLayouts(t *testing.T) {
	c := newCluster(t, 1, []uint64{1}, nil)
	c.propose(c.leader(1), "own-wal")
	c.stop(1)

	c.mod = func(cfg *Config) { cfg.SharedWAL = true }
	c.restart(1, 1)
	c.converged(1, []string{"own-wal"}, 1)
	g := c.createGroup(1, 2, GroupConfig{ID: 2, Peers: []uint64{1}})
	if _, ok := g.storage.(*nodeStorage); !ok {
		t.Fatalf("a new group on a shared-WAL node got %T", g.storage)
	}
	if _, ok := c.host(1).Group(1).storage.(*DiskStorage); !ok {
		t.Fatalf("a group with its own WAL moved to %T", c.host(1).Group(1).storage)
	}
	c.propose(c.leader(2), "shared")
	c.stop(1)

	c.mod = nil
	if h, err := NewHost(c.config(1)); err == nil {
		h.Close()
		t.Fatal("a node with a shared WAL started without SharedWAL")
	}

	c.mod = func(cfg *Config) { cfg.SharedWAL, cfg.Fsync = true, FsyncNever }
	h := c.start(1)
	if _, err := h.CreateGroup(GroupConfig{ID: 2, Join: true, AlwaysFsync: true, StateMachine: newKVSM()}); err == nil {
		t.Fatal("an always-fsync group logged in a never-fsynced shared WAL opened")
	}
	c.createGroup(1, 1, GroupConfig{ID: 1, Join: true})
	c.converged(1, []string{"own-wal"}, 1)
}
