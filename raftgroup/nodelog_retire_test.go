package raftgroup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
)

func writeFile(t *testing.T, p string, size int) {
	t.Helper()
	if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestRetireUnlocked_StopsAtTheLiveSegments: segments are retired oldest
// first up to the first one a WAL still holds locked, the newest never,
// and nothing is left renamed once they are gone.
func TestRetireUnlocked_StopsAtTheLiveSegments(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"1.wal", "2.wal", "3.wal", "4.wal", "5.wal"} {
		writeFile(t, filepath.Join(dir, n), 100<<10)
	}
	live, err := fileutil.LockFile(filepath.Join(dir, "3.wal"), os.O_WRONLY, fileutil.PrivateFileMode)
	if err != nil {
		t.Fatal(err)
	}
	if err := retireUnlocked(dir, func() {}); err != nil {
		t.Fatal(err)
	}
	if got, want := dirNames(t, dir), []string{"3.wal", "4.wal", "5.wal"}; !slices.Equal(got, want) {
		t.Errorf("with 3.wal locked: %v, want %v", got, want)
	}
	live.Close()
	if err := retireUnlocked(dir, func() {}); err != nil {
		t.Fatal(err)
	}
	if got, want := dirNames(t, dir), []string{"5.wal"}; !slices.Equal(got, want) {
		t.Errorf("unlocked: %v, want %v (the newest segment stays)", got, want)
	}
}

// TestRetire_TrimsInSteps: a retired file shrinks retireStep bytes at a
// time with a wait between steps, and without waits while more than
// retireBacklog bytes are left to free.
func TestRetire_TrimsInSteps(t *testing.T) {
	p := filepath.Join(t.TempDir(), "1.wal"+retiredSuffix)
	const step = retireStep
	for _, tc := range []struct {
		name    string
		backlog int64
		waits   []int64 // the file's size at each wait
	}{
		{"small backlog", 4 * step, []int64{3 * step, 2 * step, step}},
		{"large backlog", retireBacklog + 4*step, nil},
		{"backlog falling under the bound", retireBacklog + 2*step, []int64{step}},
	} {
		writeFile(t, p, 4*step)
		var waits []int64
		backlog := tc.backlog
		err := trimAndRemove(p, &backlog, func() {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			waits = append(waits, st.Size())
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(waits, tc.waits) {
			t.Errorf("%s: waited at sizes %v, want %v", tc.name, waits, tc.waits)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: the trimmed file is still there (%v)", tc.name, err)
		}
		if want := tc.backlog - 4*step; backlog != want {
			t.Errorf("%s: backlog %d after freeing the file, want %d", tc.name, backlog, want)
		}
	}
}

// TestNodeLog_OpenRemovesRetired: a segment a crash left retired (here a
// shortened copy of the log's first segment, which etcd would refuse to
// read past) is neither read nor kept when the log opens.
func TestNodeLog_OpenRemovesRetired(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openTestLog(t, dir)
	mustSave(t, l, 1, hardState(1, 1, 2), ents(1, 1, 2))
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	names, err := sortedNames(dir, ".wal")
	if err != nil || len(names) == 0 {
		t.Fatalf("segments %v, %v", names, err)
	}
	first, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(dir, "0000000000000000-0000000000000000.wal"+retiredSuffix)
	if err := os.WriteFile(left, first[:len(first)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir)
	defer l.close()
	wantGroup(t, l, 1, "hs=1/1/2 snap=0 ents=1/1,1/2")
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the retired leftover is still there (%v)", err)
	}
}
