package raftgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// These tests drive the shared node WAL on its own, on a real disk.

func openTestLog(t *testing.T, dir string) *nodeLog {
	t.Helper()
	l, err := openNodeLog(dir, walMetadata(1, HostGroupID), FsyncAlways, zap.NewNop(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ents(term uint64, from, to uint64) []*raftpb.Entry {
	var es []*raftpb.Entry
	for i := from; i <= to; i++ {
		es = append(es, &raftpb.Entry{Term: new(term), Index: new(i), Data: fmt.Appendf(nil, "%d/%d", term, i)})
	}
	return es
}

func hardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func walSnap(index, term uint64) *walpb.Snapshot {
	return &walpb.Snapshot{Index: new(index), Term: new(term), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}
}

// describe renders a claimed group as "hs=term/vote/commit snap=i ents=t/i,..."
func describe(t *testing.T, l *nodeLog, id uint64) string {
	t.Helper()
	hs, sn, es, err := l.claim(id)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "hs=%d/%d/%d snap=%d ents=", hs.GetTerm(), hs.GetVote(), hs.GetCommit(), sn.GetIndex())
	for i, e := range es {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.GetData())
	}
	return b.String()
}

// wantGroup checks what the log replayed for group id (see describe).
func wantGroup(t *testing.T, l *nodeLog, id uint64, want string) {
	t.Helper()
	if got := describe(t, l, id); got != want {
		t.Errorf("group %d replayed %s, want %s", id, got, want)
	}
}

func mustSave(t *testing.T, l *nodeLog, id uint64, hs *raftpb.HardState, es []*raftpb.Entry) {
	t.Helper()
	if err := l.save(id, hs, es, true); err != nil {
		t.Fatal(err)
	}
}

func reopen(t *testing.T, l *nodeLog) *nodeLog {
	t.Helper()
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	return openTestLog(t, l.dir)
}

func TestNodeLog_ReplaySortsGroupsOut(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	mustSave(t, l, 1, hardState(1, 1, 0), ents(1, 1, 3))
	mustSave(t, l, 2, hardState(4, 2, 0), ents(4, 1, 2))
	mustSave(t, l, 1, hardState(1, 1, 2), nil)
	// A new leader's entries overwrite group 1's unsynced tail from 3 on.
	mustSave(t, l, 1, hardState(2, 3, 2), ents(2, 3, 4))
	// Not waited for: it still goes out before the log closes.
	if err := l.save(2, hardState(4, 2, 2), nil, false); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, l)
	defer l.close()
	wantGroup(t, l, 1, "hs=2/3/2 snap=0 ents=1/1,1/2,2/3,2/4")
	wantGroup(t, l, 2, "hs=4/2/2 snap=0 ents=4/1,4/2")
	wantGroup(t, l, 3, "hs=0/0/0 snap=0 ents=")
	if _, _, _, err := l.claim(1); err == nil {
		t.Error("a group claimed twice was handed out twice")
	}
	l.closeGroup(2)
	if _, _, _, err := l.claim(2); err == nil {
		t.Error("a group closed and claimed again was handed out without the entries written since")
	}
}

func TestNodeLog_Snapshots(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	// Group 1 snapshots locally at 2: entries 3 and 4 stay.
	mustSave(t, l, 1, hardState(1, 1, 4), ents(1, 1, 4))
	if err := l.saveSnapshot(1, walSnap(2, 1), false); err != nil {
		t.Fatal(err)
	}
	// Group 2 installs the leader's snapshot at 3 over a divergent tail:
	// its old entries 3..5 (term 1) must not come back after it.
	mustSave(t, l, 2, hardState(1, 1, 2), ents(1, 1, 5))
	if err := l.saveSnapshot(2, walSnap(3, 2), true); err != nil {
		t.Fatal(err)
	}
	mustSave(t, l, 2, hardState(2, 0, 4), ents(2, 4, 4))
	l = reopen(t, l)
	defer l.close()
	wantGroup(t, l, 1, "hs=1/1/4 snap=2 ents=1/3,1/4")
	wantGroup(t, l, 2, "hs=2/0/4 snap=3 ents=2/4")
}

func TestNodeLog_RemoveForgetsGroup(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	mustSave(t, l, 5, hardState(3, 1, 2), ents(3, 1, 2))
	if err := l.remove(5); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, l)
	defer l.close()
	wantGroup(t, l, 5, "hs=0/0/0 snap=0 ents=")
}

// TestNodeLog_CheckpointsBoundTheLog writes many small segments' worth of
// entries for a busy group that snapshots as it goes, beside an idle group
// whose only record is old and a group that never snapshots. The busy
// group's old segments must go; the idle group's state must survive them;
// the unsnapshotted group's entries must pin their segments.
func TestNodeLog_CheckpointsBoundTheLog(t *testing.T) {
	useWALSegmentSize(t, 64<<10)
	dir := filepath.Join(t.TempDir(), "wal")
	l := openTestLog(t, dir)
	mustSave(t, l, 1, hardState(7, 2, 1), ents(7, 1, 1)) // idle, snapshotted below
	if err := l.saveSnapshot(1, walSnap(1, 7), false); err != nil {
		t.Fatal(err)
	}
	l.release(1, 1)
	mustSave(t, l, 3, hardState(2, 2, 1), ents(2, 1, 1)) // never snapshotted
	var maxFiles int
	saveSnapshotting(t, l, 2, 400, func() { maxFiles = max(maxFiles, countWALFiles(t, dir)) })
	if maxFiles < 4 {
		t.Fatalf("only %d segments: the test wrote too little to cut any", maxFiles)
	}
	l = reopen(t, l)
	wantGroup(t, l, 1, "hs=7/2/1 snap=1 ents=")
	wantGroup(t, l, 3, "hs=2/2/1 snap=0 ents=2/1")
	hs, sn, es, _ := l.claim(2)
	if hs.GetCommit() != 400 || sn.GetIndex() != 400 || len(es) != 0 {
		t.Errorf("busy group: commit %d snap %d, %d entries", hs.GetCommit(), sn.GetIndex(), len(es))
	}
	l.close()

	// Without the unsnapshotted group's pin the old segments go.
	l = openTestLog(t, dir)
	defer l.close()
	pinned := countWALFiles(t, dir)
	if err := l.remove(3); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<10)
	for i := uint64(401); i <= 500; i++ {
		e := &raftpb.Entry{Term: new(uint64(1)), Index: new(i), Data: big}
		mustSave(t, l, 2, hardState(1, 1, i), []*raftpb.Entry{e})
		if err := l.saveSnapshot(2, walSnap(i, 1), false); err != nil {
			t.Fatal(err)
		}
		l.release(2, i)
	}
	// The purger deletes them in the background.
	eventually(t, fmt.Sprintf("fewer than the %d segments held while pinned, and at most 6", pinned), func() bool {
		n := countWALFiles(t, dir)
		return n < pinned && n <= 6
	})
}

func countWALFiles(t *testing.T, dir string) int {
	t.Helper()
	names, err := sortedNames(dir, ".wal")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// TestNodeLog_GroupCommit: concurrent savers share fsyncs.
func TestNodeLog_GroupCommit(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	defer l.close()
	const groups, saves = 8, 40
	var wg sync.WaitGroup
	for g := uint64(1); g <= groups; g++ {
		wg.Go(func() {
			for i := uint64(1); i <= saves; i++ {
				if err := l.save(g, hardState(1, 1, i-1), ents(1, i, i), true); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := l.fsyncs(); got >= groups*saves {
		t.Errorf("%d fsyncs for %d saves: no group commit", got, groups*saves)
	}
	t.Logf("%d saves, %d fsyncs", groups*saves, l.fsyncs())
}

func TestNodeLog_RefusesAnotherNodesLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openTestLog(t, dir)
	mustSave(t, l, 1, hardState(1, 1, 0), ents(1, 1, 1))
	l.close()
	if _, err := openNodeLog(dir, walMetadata(2, HostGroupID), FsyncAlways, zap.NewNop(), nil, nil); err == nil {
		t.Fatal("node 2 opened node 1's wal")
	}
	// The refused open let go of the files: the right node opens them.
	l = openTestLog(t, dir)
	l.close()
}

// TestNodeLog_InstalledSnapshotAheadOfHardState: a crash between an
// installed snapshot's record and the Ready's hard state must not leave a
// commit index below the snapshot, which raft refuses at start.
func TestNodeLog_InstalledSnapshotAheadOfHardState(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	mustSave(t, l, 1, hardState(2, 3, 30), ents(2, 1, 30))
	if err := l.saveSnapshot(1, walSnap(50, 4), true); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, l)
	defer l.close()
	wantGroup(t, l, 1, "hs=4/0/50 snap=50 ents=")
}

// TestNodeLog_WritesRacingClose: writers that race Close get nil (written)
// or ErrStopped and return; under -race it also checks that the flusher,
// Close and the writers share nothing unguarded. (The kick channel is never
// closed, so a writer between its unlock and its kick cannot panic; that
// window is too narrow for a test to hit on purpose.)
func TestNodeLog_WritesRacingClose(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	var wg sync.WaitGroup
	for g := uint64(1); g <= 8; g++ {
		wg.Go(func() {
			for i := uint64(1); ; i++ {
				err := l.save(g, hardState(1, 1, i-1), ents(1, i, i), true)
				if errors.Is(err, ErrStopped) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	eventually(t, "writers to be under way", func() bool { return l.fsyncs() >= 20 })
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// TestNodeLog_TornTail cuts the last record in half, as a crash mid-write
// would: the log opens, and every record before it is there.
func TestNodeLog_TornTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	l := openTestLog(t, dir)
	mustSave(t, l, 1, hardState(1, 1, 0), ents(1, 1, 2))
	end := tailOffset(t, l)
	// A torn write loses whole sectors: make the last record span several.
	last := &raftpb.Entry{Term: new(uint64(1)), Index: new(uint64(3)), Data: make([]byte, 8<<10)}
	for i := range last.Data {
		last.Data[i] = byte(i%250 + 1)
	}
	mustSave(t, l, 1, hardState(1, 1, 2), []*raftpb.Entry{last})
	torn := tailOffset(t, l)
	l.close()
	names, _ := sortedNames(dir, ".wal")
	f, err := os.OpenFile(filepath.Join(dir, names[len(names)-1]), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, (torn-end)/2)
	if _, err := f.WriteAt(zeros, end+(torn-end)/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openTestLog(t, dir)
	defer l.close()
	wantGroup(t, l, 1, "hs=1/1/0 snap=0 ents=1/1,1/2")
}

func tailOffset(t *testing.T, l *nodeLog) int64 {
	t.Helper()
	names, _ := sortedNames(l.dir, ".wal")
	f, err := os.Open(filepath.Join(l.dir, names[len(names)-1]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The WAL preallocates: find the end of the written part.
	buf, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(buf))
	for n > 0 && buf[n-1] == 0 {
		n--
	}
	return (n + 7) &^ 7
}

func FuzzNodeLogRecord(f *testing.F) {
	f.Add(appendSave(nil, 3, hardState(2, 1, 5), ents(2, 4, 6)))
	f.Add(appendSave(nil, 1, nil, nil))
	f.Add(encodeSnapshot(9, walSnap(12, 3), true))
	f.Add(encodeRemove(4))
	f.Add(encodeCheckpoint([]groupState{{group: 1, hs: hardState(1, 1, 1)}, {group: 2, snap: walSnap(4, 1)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		var again []byte
		switch rec.kind {
		case recSave:
			again = appendSave(nil, rec.group, rec.hs, rec.ents)
		case recSnapshot:
			again = encodeSnapshot(rec.group, rec.snap, rec.install)
		case recRemove:
			again = encodeRemove(rec.group)
		case recCheckpoint:
			again = encodeCheckpoint(rec.groups)
		}
		if _, err := decodeRecord(again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}

// TestNodeLog_LargeSaveSplits: a Save of several megabytes is written as
// records of about saveChunk bytes and replays whole, hard state included.
func TestNodeLog_LargeSaveSplits(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	var es []*raftpb.Entry
	for i := uint64(1); i <= 5; i++ {
		es = append(es, &raftpb.Entry{Term: new(uint64(1)), Index: new(i), Data: make([]byte, 600<<10)})
	}
	w := &logWrite{group: 1}
	splitSave(w, hardState(1, 1, 5), es)
	if len(w.recs) < 3 {
		t.Fatalf("5 x 600 KiB went into %d records", len(w.recs))
	}
	mustSave(t, l, 1, hardState(1, 1, 5), es)
	mustSave(t, l, 1, nil, []*raftpb.Entry{{Term: new(uint64(1)), Index: new(uint64(6)), Data: []byte("1/6")}})
	l = reopen(t, l)
	defer l.close()
	hs, _, got, err := l.claim(1)
	if err != nil {
		t.Fatal(err)
	}
	if hs.GetCommit() != 5 || len(got) != 6 || got[5].GetIndex() != 6 || len(got[2].GetData()) != 600<<10 {
		t.Fatalf("replayed commit %d and %d entries", hs.GetCommit(), len(got))
	}
}

// TestNodeLog_CompactsOldestFirst: a checkpoint asks at most
// compactPerCheckpoint groups to snapshot, those with the oldest records.
func TestNodeLog_CompactsOldestFirst(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	defer l.close()
	const groups = compactPerCheckpoint + 36
	for g := uint64(groups); g >= 1; g-- { // group 100 writes first
		mustSave(t, l, g, hardState(1, 1, 0), ents(1, 1, 1))
	}
	l.mu.Lock()
	l.noteCheckpoint(l.seq)
	l.mu.Unlock()
	start, stale := l.pinnedStart(l.seq + 1)
	if start != 0 {
		t.Errorf("start %d, want 0: group %d's record is the first", start, groups)
	}
	if len(stale) != compactPerCheckpoint {
		t.Fatalf("%d groups asked to snapshot, want %d", len(stale), compactPerCheckpoint)
	}
	for i, id := range stale {
		if want := uint64(groups - i); id != want {
			t.Fatalf("ask %d went to group %d, want %d (oldest records first)", i, id, want)
		}
	}
}

// A group that keeps old records because it snapshots less often than
// the log checkpoints, but releases them, is not reported as stuck; one
// that holds the same record for three checkpoints is.
func TestNodeLog_ReportsOnlyStuckPins(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	defer l.close()
	checkpoint := func() {
		l.mu.Lock()
		l.noteCheckpoint(l.seq)
		l.mu.Unlock()
		l.pinnedStart(l.seq + 1)
	}
	mustSave(t, l, 1, hardState(1, 1, 0), ents(1, 1, 1)) // group 1: stuck
	for i := uint64(1); i <= 4; i++ {                    // group 2: busy
		mustSave(t, l, 2, hardState(1, 1, i-1), ents(1, i, i))
		if i > 1 {
			l.release(2, i-1)
		}
		checkpoint()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.groups[2].stale; s != 1 {
		t.Errorf("busy group: stale for %d checkpoints, want 1 (a new oldest record each time)", s)
	}
	if s := l.groups[1].stale; s < 3 {
		t.Errorf("stuck group: stale for %d checkpoints, want at least 3", s)
	}
}

// An idle group is asked to snapshot at the first checkpoint after its
// last write; a busy one, which writes between every two checkpoints, is
// left to snapshot on its own until it holds a record busyPinCheckpoints
// checkpoints old.
func TestNodeLog_AsksIdleGroupsAndLongPinsToSnapshot(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	defer l.close()
	checkpoint := func() []uint64 {
		_, stale := l.pinnedStart(l.seq + 1)
		mustSave(t, l, 9, hardState(1, 1, 0), nil) // takes the checkpoint's number
		return stale
	}
	mustSave(t, l, 1, hardState(1, 1, 0), ents(1, 1, 1)) // group 1: idle from now on
	for i := uint64(1); i <= busyPinCheckpoints+1; i++ {
		mustSave(t, l, 2, hardState(1, 1, 0), ents(1, i, i)) // group 2: busy, never snapshots
		var want []uint64
		if i > 1 {
			want = append(want, 1)
		}
		if i > busyPinCheckpoints {
			want = append(want, 2)
		}
		if got := checkpoint(); !slices.Equal(got, want) {
			t.Fatalf("checkpoint %d asked %v to snapshot, want %v", i, got, want)
		}
	}
}

// A write nobody waits for (a commit index moving on) gets no fsync of its
// own: it goes with the next one that must be durable.
func TestNodeLog_UnwaitedWritesJoinTheNextFsync(t *testing.T) {
	l := openTestLog(t, filepath.Join(t.TempDir(), "wal"))
	mustSave(t, l, 1, hardState(1, 1, 0), ents(1, 1, 2))
	before := l.fsyncs()
	if err := l.save(1, hardState(1, 1, 2), nil, false); err != nil {
		t.Fatal(err)
	}
	// Wake the flusher as another writer would. The kick channel holds
	// one: the third send completes only once the flusher has taken the
	// second kick, so after the flush that the first one started.
	for range 3 {
		l.kick <- struct{}{}
	}
	if got := l.fsyncs(); got != before {
		t.Errorf("%d fsyncs for a write nobody waits for", got-before)
	}
	mustSave(t, l, 2, hardState(3, 3, 0), ents(3, 1, 1))
	if got := l.fsyncs(); got != before+1 {
		t.Errorf("%d fsyncs for the next durable save, want 1 carrying both", got-before)
	}
	l = reopen(t, l)
	defer l.close()
	wantGroup(t, l, 1, "hs=1/1/2 snap=0 ents=1/1,1/2")
}

// saveSnapshotting saves entries 1..n of 4 KiB each for group, with a
// snapshot and release of every tenth, and calls after (when not nil)
// after each save.
func saveSnapshotting(t *testing.T, l *nodeLog, group, n uint64, after func()) {
	t.Helper()
	big := make([]byte, 4<<10)
	for i := uint64(1); i <= n; i++ {
		e := &raftpb.Entry{Term: new(uint64(1)), Index: new(i), Data: big}
		mustSave(t, l, group, hardState(1, 1, i), []*raftpb.Entry{e})
		if i%10 == 0 {
			if err := l.saveSnapshot(group, walSnap(i, 1), false); err != nil {
				t.Fatal(err)
			}
			l.release(group, i)
		}
		if after != nil {
			after()
		}
	}
}

// useWALSegmentSize sets etcd's process-wide WAL segment size for one
// test, restoring it in a cleanup registered before the test opens
// anything: the logs and clusters it opens register theirs later, so they
// close first and nothing reads the size while it is put back.
func useWALSegmentSize(t testing.TB, n int64) {
	t.Helper()
	old := WALSegmentSize()
	SetWALSegmentSize(n)
	t.Cleanup(func() { SetWALSegmentSize(old) })
}
