package raftgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// testSharedWAL makes newCluster's hosts use the shared node WAL. Only
// TestSharedWAL sets it, around subtests that run one at a time.
var testSharedWAL bool

// TestSharedWAL runs the cluster tests that restart nodes, kill leaders,
// install snapshots and change membership again with every group of a
// node on the shared node WAL.
func TestSharedWAL(t *testing.T) {
	testSharedWAL = true
	defer func() { testSharedWAL = false }()
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"Election", TestCluster_Election},
		{"FollowerRestartFromWAL", TestCluster_FollowerRestartFromWAL},
		{"LeaderKill", TestCluster_LeaderKill},
		{"PartitionedLeaderLosesProposal", TestCluster_PartitionedLeaderLosesProposal},
		{"SnapshotInstall", TestCluster_SnapshotInstall},
		{"SnapshotByBytes", TestCluster_SnapshotByBytes},
		{"MembershipChange3to5to3", TestCluster_MembershipChange3to5to3},
		{"SnapshotPersistsInBackground", TestCluster_SnapshotPersistsInBackground},
		{"TransferLeadership", TestGroup_TransferLeadership},
		{"RemovedGroupStaysRemoved", testRemovedGroupStaysRemoved},
	} {
		t.Run(tc.name, tc.test)
	}
}

// testRemovedGroupStaysRemoved: a group removed with purge must not come
// back from the shared WAL when the node restarts and a group of the same
// id is created again; it starts empty.
func testRemovedGroupStaysRemoved(t *testing.T) {
	c := newCluster(t, 1, []uint64{4}, nil)
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
