package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"

	"github.com/raftq/raftq/internal/durable"
)

// store holds one small state per partition.
type store interface {
	// Put replaces partition p's state durably.
	Put(p int, v []byte) error
	// ReadAll reads every partition's state, as a restart does.
	ReadAll(n int) (int, error)
	Close() error
}

// fileStore is one file per partition, in the partition's own directory
// as partition/ keeps its checkpoints.
type fileStore struct{ dir string }

func openFiles(dir string, n int) (*fileStore, error) {
	for p := range n {
		if err := os.MkdirAll(filepath.Join(dir, partDir(p)), 0o750); err != nil {
			return nil, fmt.Errorf("create partition dir: %w", err)
		}
	}
	return &fileStore{dir: dir}, nil
}

func partDir(p int) string { return fmt.Sprintf("topic-%04d", p) }

func (s *fileStore) name(p int) string { return filepath.Join(s.dir, partDir(p), "state") }

func (s *fileStore) Put(p int, v []byte) error { return durable.WriteFile(s.name(p), v, 0o640) }

func (s *fileStore) ReadAll(n int) (int, error) {
	bytes := 0
	for p := range n {
		b, err := os.ReadFile(s.name(p))
		if err != nil {
			return 0, fmt.Errorf("read state: %w", err)
		}
		bytes += len(b)
	}
	return bytes, nil
}

func (s *fileStore) Close() error { return nil }

// badgerStore is one badger database for the node, a key per partition.
type badgerStore struct{ db *badger.DB }

func openBadger(dir string) (*badgerStore, error) {
	opts := badger.DefaultOptions(filepath.Join(dir, "badger")).
		WithSyncWrites(true).WithLogger(nil).WithNumVersionsToKeep(1).
		WithMemTableSize(16 << 20).WithValueLogFileSize(64 << 20)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open badger %s: %w", dir, err)
	}
	return &badgerStore{db: db}, nil
}

func key(p int) []byte { return fmt.Appendf(nil, "state/%04d", p) }

func (s *badgerStore) Put(p int, v []byte) error {
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(key(p), v) })
}

func (s *badgerStore) ReadAll(n int) (int, error) {
	bytes := 0
	err := s.db.View(func(txn *badger.Txn) error {
		for p := range n {
			it, err := txn.Get(key(p))
			if err != nil {
				return fmt.Errorf("get %s: %w", key(p), err)
			}
			bytes += int(it.ValueSize())
		}
		return nil
	})
	return bytes, err
}

func (s *badgerStore) Close() error { return s.db.Close() }

func open(kind, dir string, n int) (store, error) {
	switch kind {
	case "files":
		return openFiles(dir, n)
	case "badger":
		return openBadger(dir)
	}
	return nil, errors.New("statebench: -store is files or badger")
}
