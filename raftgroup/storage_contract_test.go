package raftgroup_test

import (
	"testing"

	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/raftgroup/storagetest"
)

// TestDiskStorage_Contract runs the Storage contract against a group's
// own etcd WAL.
func TestDiskStorage_Contract(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{Open: func(tb testing.TB, dir string) raftgroup.Storage {
		s, err := raftgroup.OpenDiskStorage(dir, 1, 1, raftgroup.FsyncAlways, nil)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}})
}

// TestNodeStorage_Contract runs the Storage contract, AsyncStorage
// included, against a group on the shared node WAL.
func TestNodeStorage_Contract(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{Open: func(tb testing.TB, dir string) raftgroup.Storage {
		s, err := raftgroup.OpenNodeStorage(dir)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}})
}
