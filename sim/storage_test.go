package sim

import (
	"testing"

	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/raftgroup/storagetest"
)

// TestStore_Contract runs the Storage contract against the simulated
// disk, whose verdicts the simulator's rest on. A directory names one
// disk; reopening it is a restart after a clean stop.
func TestStore_Contract(t *testing.T) {
	storagetest.Run(t, StoreHarness())
}

// StoreHarness opens one Store per directory name, so that a reopen finds
// the same disk.
func StoreHarness() storagetest.Harness {
	disks := map[string]*Store{}
	return storagetest.Harness{
		Open: func(_ testing.TB, dir string) raftgroup.Storage {
			if disks[dir] == nil {
				disks[dir] = &Store{}
			}
			return disks[dir]
		},
		Sync: func(s raftgroup.Storage) { s.(*Store).Sync() },
	}
}
