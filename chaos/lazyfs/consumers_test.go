package lazyfs

import (
	"fmt"
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// TestFS_EtcdWALRoundTrip runs etcd's WAL on the mount the way raftgroup
// does: create (tmp dir, flock, fallocate, rename), save with fsync,
// close, power loss, reopen and read everything back.
func TestFS_EtcdWALRoundTrip(t *testing.T) {
	fsys := mountTest(t)
	dir := filepath.Join(fsys.Mountpoint(), "raft", "1", "wal")
	w, err := wal.Create(zap.NewNop(), dir, []byte("meta"))
	if err != nil {
		t.Fatal(err)
	}
	var ents []*raftpb.Entry
	for i := uint64(1); i <= 20; i++ {
		ents = append(ents, &raftpb.Entry{Term: ptr(1), Index: ptr(i), Data: []byte(fmt.Sprintf("entry-%d", i))})
	}
	if err := w.Save(&raftpb.HardState{Term: ptr(1), Vote: ptr(1), Commit: ptr(20)}, ents); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lose(t, fsys)

	w, err = wal.Open(zap.NewNop(), dir, &walpb.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	meta, hs, got, err := w.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if string(meta) != "meta" || hs.GetCommit() != 20 || len(got) != 20 || string(got[19].Data) != "entry-20" {
		t.Fatalf("read back meta %q, commit %d, %d entries", meta, hs.Commit, len(got))
	}
	// Appending after reopen exercises the preallocated tail and the lock.
	if err := w.Save(&raftpb.HardState{Term: ptr(2), Vote: ptr(1), Commit: ptr(21)}, []*raftpb.Entry{{Term: ptr(2), Index: ptr(21)}}); err != nil {
		t.Fatal(err)
	}
}

// TestFS_BadgerRoundTrip checks that badger (which mmaps its tables,
// memtables and value log) runs on the mount, in a separate process as a
// node would, and that what a clean close made durable survives a power
// loss.
func TestFS_BadgerRoundTrip(t *testing.T) {
	fsys := mountTest(t)
	dir := filepath.Join(fsys.Mountpoint(), "meta")
	runHelperOK(t, "badger-write", dir)
	lose(t, fsys)
	runHelperOK(t, "badger-read", dir)
}

func ptr(v uint64) *uint64 { return &v }
