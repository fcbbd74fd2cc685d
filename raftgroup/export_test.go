package raftgroup

import (
	"errors"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// WALSegmentSize returns the current process-wide WAL segment size.
func WALSegmentSize() int64 { return wal.SegmentSizeBytes }

// Exports for the external test package (benchmarks over transport/peer,
// which imports raftgroup and so cannot be imported by package raftgroup's
// own tests).

// MemNet is the in-memory FAKE network of the cluster tests.
type MemNet = memNet

// NewMemNet returns a fake network.
func NewMemNet() *MemNet { return newMemNet() }

// Transport returns node from's endpoint.
func (n *memNet) Transport(from uint64) Transport { return n.transport(from) }

// Attach routes traffic for node id to r.
func (n *memNet) Attach(id uint64, r Receiver) { n.attach(id, r) }

// Close stops delivery.
func (n *memNet) Close() { n.close() }

// OpenNodeStorage opens group 1's storage on a node WAL of its own in
// dir/wal, as a Host with SharedWAL does; closing the storage closes the
// node WAL too, so that a reopen replays it.
func OpenNodeStorage(dir string) (AsyncStorage, error) {
	l, err := openNodeLog(filepath.Join(dir, "wal"), walMetadata(1, HostGroupID), FsyncAlways, zap.NewNop(), nil, nil)
	if err != nil {
		return nil, err
	}
	s, err := openNodeStorage(l, filepath.Join(dir, "group"), 1, zap.NewNop())
	if err != nil {
		return nil, errors.Join(err, l.close())
	}
	return soleNodeStorage{s}, nil
}

// soleNodeStorage is a nodeStorage alone on its node WAL.
type soleNodeStorage struct{ *nodeStorage }

func (s soleNodeStorage) Close() error {
	return errors.Join(s.nodeStorage.Close(), s.log.close())
}
