package raftgroup

import (
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// nodeStorage is a group's Storage on the node's shared WAL: its log and
// hard state go through the nodeLog, its snapshots into its own
// snapshotter (dir/snap), as with DiskStorage.
type nodeStorage struct {
	log   *nodeLog
	id    uint64
	dir   string
	snaps *snap.Snapshotter
	state State
}

var _ AsyncStorage = (*nodeStorage)(nil)

func openNodeStorage(l *nodeLog, dir string, id uint64, zl *zap.Logger) (*nodeStorage, error) {
	snapDir := filepath.Join(dir, "snap")
	if err := os.MkdirAll(snapDir, 0o750); err != nil {
		return nil, fmt.Errorf("create snap dir %s: %w", snapDir, err)
	}
	s := &nodeStorage{log: l, id: id, dir: dir, snaps: snap.New(zl, snapDir)}
	hs, ws, ents, err := l.claim(id)
	if err != nil {
		return nil, err
	}
	var sn *raftpb.Snapshot
	if ws.GetIndex() > 0 {
		if sn, err = s.snaps.LoadNewestAvailable([]*walpb.Snapshot{ws}); err != nil {
			l.closeGroup(id)
			return nil, fmt.Errorf("load snapshot %d of group %d from %s: %w", ws.GetIndex(), id, snapDir, err)
		}
	}
	s.state = State{Snapshot: sn, HardState: hs, Entries: ents}
	return s, nil
}

// Load returns what the node log replayed for this group.
func (s *nodeStorage) Load() (State, error) { return s.state, nil }

// Save queues the group's record; with sync it returns once the batch
// holding it is fsynced. Without, it goes out with the next batch.
func (s *nodeStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	if hs == nil && len(ents) == 0 {
		return nil
	}
	return s.log.save(s.id, hs, ents, sync)
}

// SaveAsync queues the group's record; done runs once the batch holding
// it is fsynced (sync), or at once.
func (s *nodeStorage) SaveAsync(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool, done func(error)) {
	if hs == nil && len(ents) == 0 {
		done(nil)
		return
	}
	s.log.saveAsync(s.id, hs, ents, sync, done)
}

// SaveSnapshot writes the snapshot file, then the log's durable record
// of it, so a record never names a missing file.
func (s *nodeStorage) SaveSnapshot(sn *raftpb.Snapshot, install bool) error {
	if err := s.snaps.SaveSnap(sn); err != nil {
		return fmt.Errorf("save snapshot %s: %w", s.dir, err)
	}
	md := sn.GetMetadata()
	rec := &walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: raftpb.EnsureConfState(md.GetConfState())}
	return s.log.saveSnapshot(s.id, rec, install)
}

// Release lets the node log drop this group's records up to snap and
// deletes all but the newest snapshot files.
func (s *nodeStorage) Release(sn *raftpb.Snapshot) error {
	s.log.release(s.id, sn.GetMetadata().GetIndex())
	return purgeOldest(filepath.Join(s.dir, "snap"), ".snap", keepSnapFiles)
}

// Close detaches the group; its records stay in the node log.
func (s *nodeStorage) Close() error {
	s.log.closeGroup(s.id)
	return nil
}
