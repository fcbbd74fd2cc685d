package raftgroup

import (
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// earlyApply lets a leader's Ready's committed entries be applied before
// its write only while they were durable here before it: not past the last
// stable index, not at or past an entry the Ready rewrites, not a conf
// change or anything after one, and nothing in a Ready with a snapshot.
func TestEarlyApply(t *testing.T) {
	ent := func(i uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: new(i), Term: new(uint64(2)), Type: raftpb.EntryNormal.Enum()}
	}
	conf := func(i uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: new(i), Term: new(uint64(2)), Type: raftpb.EntryConfChangeV2.Enum()}
	}
	ents := func(es ...*raftpb.Entry) []*raftpb.Entry { return es }
	snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(3)), Term: new(uint64(2))}}
	cases := []struct {
		name      string
		stable    uint64
		entries   []*raftpb.Entry
		committed []*raftpb.Entry
		snap      *raftpb.Snapshot
		want      int
	}{
		{"steady stream: the last Ready's entries commit while new ones are written", 5, ents(ent(6), ent(7)), ents(ent(4), ent(5)), nil, 2},
		{"committed but not yet durable here", 5, ents(ent(6)), ents(ent(5), ent(6)), nil, 1},
		{"no new entries", 5, nil, ents(ent(4), ent(5)), nil, 2},
		{"a rewrite from index 4", 5, ents(ent(4), ent(5)), ents(ent(3), ent(4)), nil, 1},
		{"a conf change stops the prefix", 5, nil, ents(ent(3), conf(4), ent(5)), nil, 1},
		{"a snapshot in the Ready", 5, nil, ents(ent(4)), snap, 0},
		{"nothing durable yet", 0, ents(ent(1)), ents(ent(1)), nil, 0},
	}
	for _, c := range cases {
		g := &Group{stable: c.stable, lastSoft: raft.SoftState{RaftState: raft.StateLeader}}
		rd := raft.Ready{Entries: c.entries, CommittedEntries: c.committed}
		if c.snap != nil {
			rd.Snapshot = c.snap
		}
		if got := g.earlyApply(rd, c.snap != nil); got != c.want {
			t.Errorf("%s: %d entries applied early, want %d", c.name, got, c.want)
		}
	}
	// A follower, or a leader stepping down in this Ready, applies after
	// the write (and, for a follower, after its acknowledgement).
	rd := raft.Ready{Entries: ents(ent(6)), CommittedEntries: ents(ent(5))}
	follower := &Group{stable: 5, lastSoft: raft.SoftState{RaftState: raft.StateFollower}}
	if got := follower.earlyApply(rd, false); got != 0 {
		t.Errorf("a follower applied %d entries early", got)
	}
	rd.SoftState = &raft.SoftState{RaftState: raft.StateFollower}
	stepping := &Group{stable: 5, lastSoft: raft.SoftState{RaftState: raft.StateLeader}}
	if got := stepping.earlyApply(rd, false); got != 0 {
		t.Errorf("a leader stepping down applied %d entries early", got)
	}
}
