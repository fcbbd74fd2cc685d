package raftgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/raftq/raftq/internal/logging"
)

// SetWALSegmentSize sets the size of every etcd WAL segment this process
// creates from now on. etcd keeps it in a package variable
// (wal.SegmentSizeBytes, 64 MB by default) and preallocates each segment,
// so a node running many groups must lower it: 1,000 groups at 64 MB would
// reserve 64 GB before the first write. Call it once at start-up, before any
// Host opens a group; it is not safe to call while WALs are open.
func SetWALSegmentSize(bytes int64) {
	if bytes < 64<<10 {
		bytes = 64 << 10
	}
	wal.SegmentSizeBytes = bytes
}

// keepSnapFiles is how many snapshot files Release leaves behind.
const keepSnapFiles = 2

// DiskStorage is a group's etcd WAL (dir/wal) and snapshotter (dir/snap).
type DiskStorage struct {
	dir   string
	fsync FsyncPolicy
	w     *wal.WAL
	snaps *snap.Snapshotter
	zl    *zap.Logger
	state State
	last  *raftpb.HardState // last hard state saved, to mirror the WAL's sync rule
	// mu makes a Save and a snapshot's tail guard (guardSnapshot), which
	// a background snapshot writes, one step each: a guard must never
	// land after an entry it would hide. It guards the fields below;
	// the WAL's own lock is taken under it.
	mu sync.Mutex
	// lastIndex is the log's last index (the snapshot's if it has no
	// entries after it), to know when a snapshot needs a tail guard.
	lastIndex uint64
	// guardAfter is an installed snapshot's index whose tail guard waits
	// for the Save that commits it (guardSnapshot); 0: none.
	guardAfter uint64
	// retire takes the segments Release unlocks, off the caller's
	// goroutine and a little at a time (wal_retire.go).
	retire *retirer
}

var _ Storage = (*DiskStorage)(nil)

// OpenDiskStorage opens, or creates, the WAL and snapshots of group on node
// in dir. A WAL written for another node or group is refused. A torn last
// record (a crash mid-write) is repaired once, as etcd does.
func OpenDiskStorage(dir string, node, group uint64, fsync FsyncPolicy, l *slog.Logger) (*DiskStorage, error) {
	s := &DiskStorage{dir: dir, fsync: fsync, zl: logging.Zap(l)}
	snapDir := filepath.Join(dir, "snap")
	if err := os.MkdirAll(snapDir, 0o750); err != nil {
		return nil, fmt.Errorf("create snap dir %s: %w", snapDir, err)
	}
	s.snaps = snap.New(s.zl, snapDir)
	meta := walMetadata(node, group)
	walDir := filepath.Join(dir, "wal")
	var err error
	if !wal.Exist(walDir) {
		s.w, err = wal.Create(s.zl, walDir, meta)
		if err != nil {
			return nil, fmt.Errorf("create wal %s: %w", walDir, err)
		}
		if _, err := minSegmentBytes(walDir); err != nil {
			s.w.Close()
			return nil, err
		}
	} else if err = s.openExisting(walDir, meta, fsync != FsyncNever); err != nil {
		return nil, err
	}
	if fsync == FsyncNever {
		s.w.SetUnsafeNoFsync()
	}
	s.retire = newRetirer(walDir, fsync, func(err error) {
		s.zl.Warn("cannot retire old wal segments", zap.Error(err))
	})
	s.retire.wake() // segments a crash left retired, and any before the snapshot
	return s, nil
}

func walMetadata(node, group uint64) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[:8], node)
	binary.BigEndian.PutUint64(b[8:], group)
	return b
}

func (s *DiskStorage) openExisting(walDir string, meta []byte, sized bool) error {
	if err := checkWAL(walDir, sized); err != nil {
		return err
	}
	walSnaps, err := wal.ValidSnapshotEntries(s.zl, walDir)
	if err != nil {
		return fmt.Errorf("list wal snapshots %s: %w", walDir, err)
	}
	sn, err := s.snaps.LoadNewestAvailable(walSnaps)
	if err != nil && !errors.Is(err, snap.ErrNoSnapshot) {
		return fmt.Errorf("load snapshot %s: %w", s.dir, err)
	}
	start := &walpb.Snapshot{Index: new(uint64), Term: new(uint64)}
	if sn != nil {
		start = &walpb.Snapshot{Index: new(sn.GetMetadata().GetIndex()), Term: new(sn.GetMetadata().GetTerm()), ConfState: sn.GetMetadata().GetConfState()}
	}
	w, got, hs, ents, err := readWAL(s.zl, walDir, start)
	if err != nil {
		return err
	}
	if string(got) != string(meta) {
		w.Close()
		return fmt.Errorf("open wal %s: written for node/group %x, not %x", walDir, got, meta)
	}
	s.w = w
	ents = dropGuard(ents)
	s.state = State{Snapshot: sn, HardState: hs, Entries: ents}
	s.last = hs
	s.lastIndex = sn.GetMetadata().GetIndex()
	if len(ents) > 0 {
		s.lastIndex = ents[len(ents)-1].GetIndex()
	}
	return nil
}

// readWAL opens the etcd WAL in walDir at start and reads it all. A torn
// last record (a crash mid-write) is repaired once, as etcd does, and the
// segment grown back to its preallocated size (checkWAL); the WAL
// returned is ready to append. Callers run checkWAL first: other damage
// is refused, not repaired.
func readWAL(zl *zap.Logger, walDir string, start *walpb.Snapshot) (*wal.WAL, []byte, *raftpb.HardState, []*raftpb.Entry, error) {
	for repaired := false; ; repaired = true {
		w, err := wal.Open(zl, walDir, start)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("open wal %s: %w", walDir, err)
		}
		meta, hs, ents, err := w.ReadAll()
		if err == nil {
			return w, meta, hs, ents, nil
		}
		w.Close()
		if repaired || !errors.Is(err, io.ErrUnexpectedEOF) || !wal.Repair(zl, walDir) {
			return nil, nil, nil, nil, &WALDamageError{Dir: walDir, Err: err}
		}
		if err := regrowLast(walDir); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("repair wal %s: %w", walDir, err)
		}

	}
}

// Load returns the state read when the storage was opened.
func (s *DiskStorage) Load() (State, error) { return s.state, nil }

// Save appends to the WAL. The WAL fsyncs by itself exactly when raft's
// MustSync rule holds against its last hard state; when the group asks for
// a sync beyond that (a Ready that carried a snapshot, whose commit index
// must be durable before old log data is released) Save adds one.
// FsyncNever turns every fsync off.
func (s *DiskStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	walSyncs := len(ents) > 0 || hs != nil && (hs.GetTerm() != s.last.GetTerm() || hs.GetVote() != s.last.GetVote())
	if err := s.w.Save(hs, ents); err != nil {
		return fmt.Errorf("save wal %s: %w", s.dir, err)
	}
	if len(ents) > 0 {
		s.lastIndex = ents[len(ents)-1].GetIndex()
		s.guardAfter = 0 // they overwrite the stale tail themselves
	}
	if s.guardAfter > 0 && max(hs.GetCommit(), s.last.GetCommit()) >= s.guardAfter {
		if err := s.guardTail(s.guardAfter); err != nil {
			return err
		}
		s.guardAfter, walSyncs = 0, true
	}
	if !raft.IsEmptyHardState(hs) {
		s.last = hs
	}
	if sync && !walSyncs {
		if err := s.w.Sync(); err != nil {
			return fmt.Errorf("sync wal %s: %w", s.dir, err)
		}
	}
	return nil
}

// SaveSnapshot writes the snapshot file first, then a tail guard if the
// log ends at the snapshot (guardSnapshot), and the WAL's snapshot record last
// (fsynced), so that a WAL record never names a missing file; an orphaned
// file is harmless.
func (s *DiskStorage) SaveSnapshot(sn *raftpb.Snapshot, install bool) error {
	if err := s.snaps.SaveSnap(sn); err != nil {
		return fmt.Errorf("save snapshot %s: %w", s.dir, err)
	}
	md := sn.GetMetadata()
	if err := s.guardSnapshot(md.GetIndex(), install); err != nil {
		return err
	}
	rec := &walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: raftpb.EnsureConfState(md.GetConfState())}
	if err := s.w.SaveSnapshot(rec); err != nil {
		return fmt.Errorf("save wal snapshot record %s: %w", s.dir, err)
	}
	return nil
}

// guardSnapshot guards the log's tail (guardTail) for a snapshot at
// index after which it holds nothing: an installed snapshot, or a local
// one covering the whole log. The guard goes in now if the log reaches
// index: a replay from an older snapshot, which is what etcd does while
// the hard state's commit index is below this one's, then finds no gap
// before it. An installed snapshot beyond the log waits for the Save
// whose hard state commits it, making it the snapshot replay starts at; a
// crash in between can let a stale tail come back, as it always could in
// etcd.
func (s *DiskStorage) guardSnapshot(index uint64, install bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.lastIndex >= index && (install || s.lastIndex == index):
		if err := s.guardTail(index); err != nil {
			return err
		}
	case install:
		s.guardAfter = index
	}
	if install {
		s.lastIndex = index
	}
	return nil
}

// guardTail writes a guard entry (term 0, which raft never uses) at
// index+1, for a snapshot at index after which the log holds nothing: an
// installed snapshot, or a local one covering the whole log.
//
// etcd's WAL replays from its snapshot record and skips the entries at or
// below its index, overwrites among them included. A deposed leader's
// entries after the index that an overwrite starting at or below it had
// replaced, or that an installed snapshot replaced, would then come back
// on replay. The guard, written after them, overwrites them on replay as
// any entry does; the group's next entry, at index+1, overwrites the
// guard, and dropGuard removes a guard nothing overwrote. With entries
// after the snapshot the log needs no guard: the last write of index+1
// overwrote whatever came before it.
func (s *DiskStorage) guardTail(index uint64) error {
	guard := &raftpb.Entry{Index: new(index + 1), Term: new(uint64(0)), Type: raftpb.EntryNormal.Enum()}
	if err := s.w.Save(nil, []*raftpb.Entry{guard}); err != nil {
		return fmt.Errorf("save wal tail guard %s: %w", s.dir, err)
	}
	return nil
}

// dropGuard cuts a replayed log at its tail guard, if one is left: only
// the last entry can be one, since any later entry overwrites it.
func dropGuard(ents []*raftpb.Entry) []*raftpb.Entry {
	for i, e := range ents {
		if e.GetTerm() == 0 {
			return ents[:i]
		}
	}
	return ents
}

// Release unlocks WAL segments wholly before snap, has the retirer take
// them, and deletes all but the newest snapshot files.
func (s *DiskStorage) Release(sn *raftpb.Snapshot) error {
	if err := s.w.ReleaseLockTo(sn.GetMetadata().GetIndex()); err != nil {
		return fmt.Errorf("release wal %s: %w", s.dir, err)
	}
	s.retire.wake()
	return purgeOldest(filepath.Join(s.dir, "snap"), ".snap", keepSnapFiles)
}

// Close retires what is released, then closes the WAL (whose locks mark
// the live segments, so it goes last).
func (s *DiskStorage) Close() error {
	s.retire.close()
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("close wal %s: %w", s.dir, err)
	}
	return nil
}

func purgeOldest(dir, suffix string, keep int) error {
	names, err := sortedNames(dir, suffix)
	if err != nil {
		return err
	}
	for _, name := range names[:max(len(names)-keep, 0)] {
		p := filepath.Join(dir, name)
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("remove snapshot %s: %w", p, err)
		}
	}
	return nil
}

func sortedNames(dir, suffix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}
