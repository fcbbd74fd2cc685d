package raftgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/internal/logging"
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
// first up to the first one a WAL still holds locked, the newest never;
// every one is renamed out of etcd's sight before any is shrunk, and
// nothing is left renamed once they are gone.
func TestRetireUnlocked_StopsAtTheLiveSegments(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"1.wal", "2.wal", "3.wal", "4.wal", "5.wal"} {
		writeFile(t, filepath.Join(dir, n), 2*retireStep)
	}
	live, err := fileutil.LockFile(filepath.Join(dir, "3.wal"), os.O_WRONLY, fileutil.PrivateFileMode)
	if err != nil {
		t.Fatal(err)
	}
	waits := 0
	renamedFirst := func() {
		waits++
		for _, n := range []string{"1.wal", "2.wal"} {
			if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
				t.Errorf("%s is still in etcd's sight while a retired segment is shrunk", n)
			}
		}
	}
	if err := retireUnlocked(dir, syncDir, renamedFirst); err != nil {
		t.Fatal(err)
	}
	if waits == 0 {
		t.Error("segments of two steps each were shrunk without a wait")
	}
	if got, want := dirNames(t, dir), []string{"3.wal", "4.wal", "5.wal"}; !slices.Equal(got, want) {
		t.Errorf("with 3.wal locked: %v, want %v", got, want)
	}
	live.Close()
	if err := retireUnlocked(dir, syncDir, func() {}); err != nil {
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

// TestNodeLog_RetiresLeftoversAfterOpen: closing retires every released
// segment; a segment a crash left retired (older than the log's first,
// and cut short) is not read when the log opens, and the first purge
// removes it.
func TestNodeLog_RetiresLeftoversAfterOpen(t *testing.T) {
	useWALSegmentSize(t, 64<<10)
	dir := filepath.Join(t.TempDir(), "wal")
	l := openTestLog(t, dir)
	saveSnapshotting(t, l, 1, 200, nil)
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := sortedNames(dir, retiredSuffix); len(left) != 0 {
		t.Errorf("closed with %v still retired", left)
	}
	names, err := sortedNames(dir, ".wal")
	if err != nil || len(names) == 0 {
		t.Fatalf("segments %v, %v", names, err)
	}
	const oldest = "0000000000000000-0000000000000000.wal"
	if names[0] == oldest {
		t.Fatal("no segment was released: the test wrote too little")
	}
	first, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(dir, oldest+retiredSuffix)
	if err := os.WriteFile(left, first[:len(first)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir)
	defer l.close()
	hs, sn, es, err := l.claim(1)
	if err != nil || hs.GetCommit() != 200 || sn.GetIndex() != 200 || len(es) != 0 {
		t.Errorf("after reopening: commit %d snap %d, %d entries, %v", hs.GetCommit(), sn.GetIndex(), len(es), err)
	}
	eventually(t, "the leftover retired", func() bool {
		_, err := os.Stat(left)
		return os.IsNotExist(err)
	})
}

// TestDiskStorage_RetiresReleasedSegments: a group's own WAL hands the
// segments a snapshot releases to its retirer; the live segments stay,
// nothing is left renamed,
// and the WAL reopens at the snapshot with every entry after it. A
// segment a crash left retired goes once the WAL opens again.
func TestDiskStorage_RetiresReleasedSegments(t *testing.T) {
	useWALSegmentSize(t, 64<<10)
	dir := t.TempDir()
	walDir := filepath.Join(dir, "wal")
	s, err := OpenDiskStorage(dir, 1, 7, FsyncAlways, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<10)
	for i := uint64(1); i <= 200; i++ {
		e := &raftpb.Entry{Term: new(uint64(1)), Index: new(i), Data: big}
		if err := s.Save(hardState(1, 1, i), []*raftpb.Entry{e}, true); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := sortedNames(walDir, ".wal")
	sn := &raftpb.Snapshot{Data: []byte("sm"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(150)), Term: new(uint64(1)), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}}
	if err := s.SaveSnapshot(sn, false); err != nil { // local: entries 151-200 stay
		t.Fatal(err)
	}
	if err := s.Release(sn); err != nil {
		t.Fatal(err)
	}
	eventually(t, "released segments retired", func() bool {
		names, _ := sortedNames(walDir, ".wal")
		left, _ := sortedNames(walDir, retiredSuffix)
		return len(names) < len(before)/2 && len(left) == 0
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := sortedNames(walDir, ".wal")
	first, err := os.ReadFile(filepath.Join(walDir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(walDir, before[0]+retiredSuffix)
	if err := os.WriteFile(left, first[:len(first)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(walDir, before[1]+legacyRetiredSuffix)
	if err := os.WriteFile(legacy, first[:len(first)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logging.Buffer{}
	s, err = OpenDiskStorage(dir, 1, 7, FsyncAlways, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if strings.Contains(logs.String(), filepath.Base(left)) {
		t.Errorf("etcd warned about a retired segment at open:\n%s", logs)
	}
	st, _ := s.Load()
	if got := st.Snapshot.GetMetadata().GetIndex(); got != 150 || len(st.Entries) != 50 || st.Entries[0].GetIndex() != 151 || st.HardState.GetCommit() != 200 {
		t.Errorf("reopened at snapshot %d with %d entries from %d, commit %d; want 150, 50 from 151, 200",
			got, len(st.Entries), st.Entries[0].GetIndex(), st.HardState.GetCommit())
	}
	eventually(t, "the leftovers retired", func() bool {
		_, err := os.Stat(left)
		_, errLegacy := os.Stat(legacy)
		return os.IsNotExist(err) && os.IsNotExist(errLegacy)
	})
}

// TestRetirer_WakeDuringAPassRunsAnother: a wake while a pass runs is not
// lost (that pass has listed the directory already), close waits for the
// goroutine and makes a last pass, and a wake after close starts nothing.
func TestRetirer_WakeDuringAPassRunsAnother(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1.wal"), 2*retireStep)
	writeFile(t, filepath.Join(dir, "9.wal"), 1) // the newest is never taken
	r := newRetirer(dir, FsyncAlways, func(err error) { t.Error(err) })
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.wait = func() { once.Do(func() { close(held); <-release }) }
	r.wake()
	<-held // the first pass is shrinking 1.wal
	writeFile(t, filepath.Join(dir, "2.wal"), 1)
	r.wake()
	r.mu.Lock()
	again := r.again
	r.mu.Unlock()
	if !again {
		t.Error("a wake during a pass did not ask for another")
	}
	close(release)
	eventually(t, "both retired", func() bool {
		return slices.Equal(dirNames(t, dir), []string{"9.wal"})
	})
	writeFile(t, filepath.Join(dir, "3.wal"), 4*retireStep)
	r.close()
	if got := dirNames(t, dir); !slices.Equal(got, []string{"9.wal"}) {
		t.Errorf("after close: %v, want only 9.wal", got)
	}
	r.close() // a second close returns once the first is over
	r.wake()
	r.mu.Lock()
	busy := r.busy
	r.mu.Unlock()
	if busy {
		t.Error("a wake after close started a pass")
	}
}

// TestRetirer_HaltsAfterAFailedDirSync: once a directory sync fails, the
// retirer cuts nothing more, not even the file whose rename was synced
// before: no later sync can vouch for a rename made before the failure.
// The next retirer (the WAL opened again) takes what was left.
func TestRetirer_HaltsAfterAFailedDirSync(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"1.wal", "2.wal", "9.wal"} {
		writeFile(t, filepath.Join(dir, n), retireStep)
	}
	var warned []error
	r := newRetirer(dir, FsyncAlways, func(err error) { warned = append(warned, err) })
	syncs := 0
	r.sync = func(string) error {
		if syncs++; syncs == 2 {
			return fmt.Errorf("%w: injected", errDirSync)
		}
		return nil
	}
	r.wake()
	r.wg.Wait()
	r.wake() // halted: takes nothing
	r.wg.Wait()
	r.close()
	want := []string{"1.wal" + retiredSuffix, "2.wal" + retiredSuffix, "9.wal"}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("after a failed sync: %v, want %v (renamed, nothing cut)", got, want)
	}
	if st, err := os.Stat(filepath.Join(dir, "1.wal"+retiredSuffix)); err != nil || st.Size() != retireStep {
		t.Errorf("1.wal.retired was cut: %v, %v", st, err)
	}
	if len(warned) != 1 || !errors.Is(warned[0], errDirSync) {
		t.Errorf("warnings %v, want the one failed sync", warned)
	}
	r = newRetirer(dir, FsyncAlways, func(err error) { t.Error(err) })
	r.wake()
	r.close()
	if got := dirNames(t, dir); !slices.Equal(got, []string{"9.wal"}) {
		t.Errorf("a new retirer left %v, want only 9.wal", got)
	}
}

// TestRenameUnlocked_SyncsAfterEachRename: each rename is made durable
// before the next begins, so that a crash cannot leave a newer segment
// renamed and an older one still in etcd's sight (a hole its CRC chain
// cannot cross); a failed sync stops the renames there.
func TestRenameUnlocked_SyncsAfterEachRename(t *testing.T) {
	segments := func() string {
		dir := t.TempDir()
		for _, n := range []string{"1.wal", "2.wal", "3.wal", "4.wal"} {
			writeFile(t, filepath.Join(dir, n), 1)
		}
		return dir
	}
	dir := segments()
	var seen [][]string
	if err := renameUnlocked(dir, func(d string) error {
		seen = append(seen, dirNames(t, d))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"1.wal" + retiredSuffix, "2.wal", "3.wal", "4.wal"},
		{"1.wal" + retiredSuffix, "2.wal" + retiredSuffix, "3.wal", "4.wal"},
		{"1.wal" + retiredSuffix, "2.wal" + retiredSuffix, "3.wal" + retiredSuffix, "4.wal"},
	}
	if !slices.EqualFunc(seen, want, slices.Equal) {
		t.Errorf("directory at each sync: %v, want %v", seen, want)
	}

	dir = segments()
	syncs := 0
	err := renameUnlocked(dir, func(string) error {
		syncs++
		return errors.New("disk gone")
	})
	if err == nil || syncs != 1 {
		t.Errorf("failing sync: %v after %d syncs, want the error after 1", err, syncs)
	}
	if got, want := dirNames(t, dir), []string{"1.wal" + retiredSuffix, "2.wal", "3.wal", "4.wal"}; !slices.Equal(got, want) {
		t.Errorf("after a failed sync: %v, want %v", got, want)
	}
}
