package raftgroup

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestDiskStorage_RefusesAnotherGroupsWAL: a WAL written for another
// group is refused, and the refusal lets the WAL go (its segment locks
// too), so the right group opens it next.
func TestDiskStorage_RefusesAnotherGroupsWAL(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDiskStorage(dir, 1, 7, FsyncAlways, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(hardState(1, 1, 0), nil, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDiskStorage(dir, 1, 8, FsyncAlways, nil); err == nil || !strings.Contains(err.Error(), "written for node/group") {
		t.Fatalf("group 8 opened group 7's WAL: %v", err)
	}
	s, err = OpenDiskStorage(dir, 1, 7, FsyncAlways, nil)
	if err != nil {
		t.Fatalf("group 7 after the refusal: %v", err)
	}
	s.Close()
}

// TestGroup_RestartsAfterInstallWithoutHardState: a crash between
// persisting an installed snapshot and the hard state that commits it
// leaves the snapshot record in a group's own WAL with a commit index
// below it. etcd then replays from the snapshot before it, so the group
// restarts as it was before the install (which never completed); the
// install's tail guard must not leave a gap in that replay.
func TestGroup_RestartsAfterInstallWithoutHardState(t *testing.T) {
	c := newCluster(t, 1, []uint64{1}, nil)
	l := c.leader(1)
	c.propose(l, "a")
	st := l.Status()
	c.stop(1)

	ds, err := OpenDiskStorage(filepath.Join(c.root, "node1", "raft", "1"), 1, 1, FsyncAlways, nil)
	if err != nil {
		t.Fatal(err)
	}
	index, term := st.LastIndex+3, st.Term+1
	data, err := json.Marshal(kvState{Applied: index, Entries: []Entry{{Index: index, Term: term, Data: []byte("snap")}}})
	if err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(index), Term: new(term),
		ConfState: &raftpb.ConfState{Voters: []uint64{1}}}}
	if err := ds.SaveSnapshot(snap, true); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil { // the crash: no hard state after it
		t.Fatal(err)
	}

	c.restart(1, 1)
	c.propose(c.leader(1), "b")
	c.converged(1, []string{"a", "b"}, 1)
}
