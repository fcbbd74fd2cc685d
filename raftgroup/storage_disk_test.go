package raftgroup

import (
	"strings"
	"testing"
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
