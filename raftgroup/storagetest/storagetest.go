package storagetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// Harness opens the Storage under test.
type Harness struct {
	// Open opens the storage kept in dir: a new one, or, after Close, the
	// same one again. It fails tb rather than return an error.
	Open func(tb testing.TB, dir string) raftgroup.Storage
	// Sync, if set, completes the storage's pending SaveAsync calls.
	// sim.Store completes a synced SaveAsync only when the simulator
	// syncs its disk; a real store needs no help.
	Sync func(s raftgroup.Storage)
}

// Check is one clause of the contract.
type Check struct {
	Name string
	// Async marks a check of AsyncStorage.SaveAsync.
	Async bool
	Run   func(tb testing.TB, h Harness)
}

// Checks returns the contract, in the order Run runs it.
func Checks() []Check {
	return []Check{
		{Name: "NewIsEmpty", Run: checkNewIsEmpty},
		{Name: "SaveRoundTrip", Run: checkSaveRoundTrip},
		{Name: "EmptySaveIsNoop", Run: checkEmptySaveIsNoop},
		{Name: "NilHardStateKeepsLast", Run: checkNilHardStateKeepsLast},
		{Name: "AppendsAcrossSavesAndReopens", Run: checkAppendsAcrossReopens},
		{Name: "OverwritesConflictingTail", Run: checkOverwritesConflictingTail},
		{Name: "CloseMakesUnsyncedDurable", Run: checkCloseMakesUnsyncedDurable},
		{Name: "LocalSnapshotKeepsLaterEntries", Run: checkLocalSnapshot},
		{Name: "NewestSnapshotWins", Run: checkNewestSnapshotWins},
		{Name: "OverwriteBelowSnapshotStays", Run: checkOverwriteBelowSnapshot},
		{Name: "InstalledSnapshotReplacesLog", Run: checkInstallReplacesLog},
		{Name: "InstallBeyondLogLeavesNoTail", Run: checkInstallBeyondLog},
		{Name: "SavesAfterInstall", Run: checkSavesAfterInstall},
		{Name: "AsyncSavesInOrder", Async: true, Run: checkAsyncInOrder},
		{Name: "AsyncDoneOnce", Async: true, Run: checkAsyncDoneOnce},
		{Name: "AsyncMixesWithSave", Async: true, Run: checkAsyncMixesWithSave},
	}
}

// Run runs every check of the contract against the storage h opens, the
// async ones only if it is an AsyncStorage.
func Run(t *testing.T, h Harness) {
	t.Helper()
	async := IsAsync(t, h)
	for _, c := range Checks() {
		if c.Async && !async {
			continue
		}
		t.Run(c.Name, func(t *testing.T) { c.Run(t, h) })
	}
}

// IsAsync reports whether the storage h opens is an AsyncStorage.
func IsAsync(tb testing.TB, h Harness) bool {
	tb.Helper()
	s := h.Open(tb, tb.TempDir())
	_, ok := s.(raftgroup.AsyncStorage)
	if err := s.Close(); err != nil {
		tb.Fatalf("close: %s", err)
	}
	return ok
}

// store is an open Storage under test; a failed check closes it at
// cleanup.
type store struct {
	raftgroup.Storage
	tb     testing.TB
	h      Harness
	dir    string
	closed bool
}

func open(tb testing.TB, h Harness, dir string) *store {
	tb.Helper()
	s := &store{Storage: h.Open(tb, dir), tb: tb, h: h, dir: dir}
	tb.Cleanup(func() {
		if !s.closed {
			_ = s.Storage.Close() // a failed check's leftover; its error says nothing new
		}
	})
	return s
}

// fresh opens a new store in a directory of its own.
func fresh(tb testing.TB, h Harness) *store {
	tb.Helper()
	return open(tb, h, tb.TempDir())
}

func (s *store) close() {
	s.tb.Helper()
	s.closed = true
	if err := s.Storage.Close(); err != nil {
		s.tb.Fatalf("close: %s", err)
	}
}

// reopen closes s and opens its directory again.
func (s *store) reopen() *store {
	s.tb.Helper()
	s.close()
	return open(s.tb, s.h, s.dir)
}

func (s *store) load() raftgroup.State {
	s.tb.Helper()
	st, err := s.Load()
	if err != nil {
		s.tb.Fatalf("load: %s", err)
	}
	return st
}

func (s *store) save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) {
	s.tb.Helper()
	if err := s.Save(hs, ents, sync); err != nil {
		s.tb.Fatalf("save: %s", err)
	}
}

func (s *store) saveSnapshot(snap *raftpb.Snapshot, install bool) {
	s.tb.Helper()
	if err := s.SaveSnapshot(snap, install); err != nil {
		s.tb.Fatalf("save snapshot (install %t): %s", install, err)
	}
}

func (s *store) release(snap *raftpb.Snapshot) {
	s.tb.Helper()
	if err := s.Release(snap); err != nil {
		s.tb.Fatalf("release: %s", err)
	}
}

// want is what Load must return.
type want struct {
	snap *raftpb.Snapshot // nil: none
	hs   *raftpb.HardState
	ents []*raftpb.Entry
}

// expect fails tb unless st is w.
func expect(tb testing.TB, what string, st raftgroup.State, w want) {
	tb.Helper()
	var diffs []string
	gotSnap := st.Snapshot
	if gotSnap.GetMetadata().GetIndex() == 0 {
		gotSnap = nil
	}
	if describeSnap(gotSnap) != describeSnap(w.snap) {
		diffs = append(diffs, fmt.Sprintf("snapshot %s, want %s", describeSnap(gotSnap), describeSnap(w.snap)))
	}
	if describeHS(st.HardState) != describeHS(w.hs) && !(isEmpty(st.HardState) && isEmpty(w.hs)) {
		diffs = append(diffs, fmt.Sprintf("hard state %s, want %s", describeHS(st.HardState), describeHS(w.hs)))
	}
	if !entriesEqual(st.Entries, w.ents) {
		diffs = append(diffs, fmt.Sprintf("entries %s, want %s", describeEnts(st.Entries), describeEnts(w.ents)))
	}
	if len(diffs) > 0 {
		tb.Fatalf("%s: %s", what, strings.Join(diffs, "; "))
	}
}

func isEmpty(hs *raftpb.HardState) bool {
	return hs.GetTerm() == 0 && hs.GetVote() == 0 && hs.GetCommit() == 0
}

func entriesEqual(a, b []*raftpb.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if describeEnt(a[i]) != describeEnt(b[i]) {
			return false
		}
	}
	return true
}

func describeSnap(s *raftpb.Snapshot) string {
	if s == nil {
		return "none"
	}
	md := s.GetMetadata()
	return fmt.Sprintf("%d/%d %q voters %v", md.GetIndex(), md.GetTerm(), s.GetData(), md.GetConfState().GetVoters())
}

// describeEnt names what an entry holds; comparing descriptions ignores
// protobuf field presence, which a store need not keep.
func describeEnt(e *raftpb.Entry) string {
	return fmt.Sprintf("%d/%d:%s:%q", e.GetIndex(), e.GetTerm(), e.GetType(), e.GetData())
}

func describeHS(hs *raftpb.HardState) string {
	if hs == nil {
		return "none"
	}
	return fmt.Sprintf("term %d vote %d commit %d", hs.GetTerm(), hs.GetVote(), hs.GetCommit())
}

func describeEnts(ents []*raftpb.Entry) string {
	parts := make([]string, len(ents))
	for i, e := range ents {
		parts[i] = describeEnt(e)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// HardState returns a hard state.
func HardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

// Entries returns normal entries first..last of term, each holding its
// index and tag.
func Entries(first, last, term uint64, tag string) []*raftpb.Entry {
	var ents []*raftpb.Entry
	for i := first; i <= last; i++ {
		ents = append(ents, &raftpb.Entry{Index: new(i), Term: new(term), Type: raftpb.EntryNormal.Enum(),
			Data: fmt.Appendf(nil, "%s%d", tag, i)})
	}
	return ents
}

// Snapshot returns a snapshot at index and term of voters 1-3.
func Snapshot(index, term uint64, data string) *raftpb.Snapshot {
	return &raftpb.Snapshot{Data: []byte(data), Metadata: &raftpb.SnapshotMetadata{
		Index: new(index), Term: new(term), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}
}

func concat(parts ...[]*raftpb.Entry) []*raftpb.Entry {
	var out []*raftpb.Entry
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// waitDone waits for n done calls on ch, failing tb on an error or when
// they do not come; after them no more may come.
func waitDone(tb testing.TB, h Harness, s raftgroup.Storage, ch <-chan error, n int) {
	tb.Helper()
	if h.Sync != nil {
		h.Sync(s)
	}
	deadline := time.After(30 * time.Second)
	for i := range n {
		select {
		case err := <-ch:
			if err != nil {
				tb.Fatalf("SaveAsync done %d: %s", i, err)
			}
		case <-deadline:
			tb.Fatalf("SaveAsync: %d of %d done calls came", i, n)
		}
	}
}
