package storagetest

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// checkNewIsEmpty: a store never written loads as new, and still does
// after a reopen (opening writes nothing the driver would take for state).
func checkNewIsEmpty(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	if st := s.load(); !st.IsNew() {
		tb.Fatalf("a new store loads %s / %s / %s", describeSnap(st.Snapshot), describeHS(st.HardState), describeEnts(st.Entries))
	}
	s = s.reopen()
	if st := s.load(); !st.IsNew() {
		tb.Fatalf("a reopened empty store loads %s / %s / %s", describeSnap(st.Snapshot), describeHS(st.HardState), describeEnts(st.Entries))
	}
	s.close()
}

// checkSaveRoundTrip: a synced save loads back as it was, entry types,
// terms and data included.
func checkSaveRoundTrip(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	ents := Entries(1, 3, 1, "a")
	ents[0].Type = raftpb.EntryConfChange.Enum()
	s.save(HardState(1, 2, 1), ents, true)
	s = s.reopen()
	expect(tb, "after one synced save", s.load(), want{hs: HardState(1, 2, 1), ents: ents})
	s.close()
}

// checkEmptySaveIsNoop: a Save of nothing (the driver's Readys often have
// neither) succeeds and changes nothing.
func checkEmptySaveIsNoop(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(2, 1, 2), Entries(1, 2, 2, "a"), true)
	s.save(nil, nil, true)
	s.save(nil, nil, false)
	s = s.reopen()
	expect(tb, "after empty saves", s.load(), want{hs: HardState(2, 1, 2), ents: Entries(1, 2, 2, "a")})
	s.close()
}

// checkNilHardStateKeepsLast: nil means the hard state is unchanged, and
// the last one saved wins.
func checkNilHardStateKeepsLast(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 0), Entries(1, 2, 1, "a"), true)
	s.save(HardState(2, 3, 2), nil, true)
	s.save(nil, Entries(3, 4, 2, "b"), true)
	s = s.reopen()
	expect(tb, "after a nil hard state", s.load(), want{hs: HardState(2, 3, 2), ents: concat(Entries(1, 2, 1, "a"), Entries(3, 4, 2, "b"))})
	s.close()
}

// checkAppendsAcrossReopens: saves append, and a reopened store goes on
// appending where the last one stopped.
func checkAppendsAcrossReopens(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 0), Entries(1, 3, 1, "a"), false)
	s.save(HardState(1, 1, 3), Entries(4, 5, 1, "a"), true)
	s = s.reopen()
	s.load()
	s.save(HardState(1, 1, 5), Entries(6, 8, 1, "a"), true)
	s = s.reopen()
	expect(tb, "after two incarnations", s.load(), want{hs: HardState(1, 1, 5), ents: Entries(1, 8, 1, "a")})
	s.close()
}

// checkOverwritesConflictingTail: entries overwrite the log from their
// first index on, dropping the old tail beyond them too (a new leader's
// shorter log wins), in one incarnation and across a reopen.
func checkOverwritesConflictingTail(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 1), Entries(1, 6, 1, "a"), true)
	s.save(HardState(2, 2, 1), Entries(3, 4, 2, "b"), true)
	s = s.reopen()
	expect(tb, "after a conflicting save", s.load(), want{hs: HardState(2, 2, 1), ents: concat(Entries(1, 2, 1, "a"), Entries(3, 4, 2, "b"))})
	s.save(HardState(3, 3, 1), Entries(2, 2, 3, "c"), true)
	s = s.reopen()
	expect(tb, "after a conflicting save in the next incarnation", s.load(), want{hs: HardState(3, 3, 1), ents: concat(Entries(1, 1, 1, "a"), Entries(2, 2, 3, "c"))})
	s.save(nil, Entries(1, 1, 4, "d"), true)
	s = s.reopen()
	expect(tb, "after overwriting from the first entry", s.load(), want{hs: HardState(3, 3, 1), ents: Entries(1, 1, 4, "d")})
	s.close()
}

// checkCloseMakesUnsyncedDurable: Close is a clean stop; saves without
// sync survive it.
func checkCloseMakesUnsyncedDurable(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 0), Entries(1, 2, 1, "a"), true)
	s.save(HardState(1, 1, 2), Entries(3, 4, 1, "a"), false)
	s = s.reopen()
	expect(tb, "after unsynced saves and a close", s.load(), want{hs: HardState(1, 1, 2), ents: Entries(1, 4, 1, "a")})
	s.close()
}

// checkLocalSnapshot: a local snapshot covers a prefix; the entries after
// it survive its Release, and Load returns only those.
func checkLocalSnapshot(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 6), Entries(1, 10, 1, "a"), true)
	snap := Snapshot(6, 1, "state@6")
	s.saveSnapshot(snap, false)
	s.release(snap)
	s = s.reopen()
	expect(tb, "after a local snapshot", s.load(), want{snap: snap, hs: HardState(1, 1, 6), ents: Entries(7, 10, 1, "a")})
	s.save(HardState(1, 1, 11), Entries(11, 11, 1, "a"), true)
	s = s.reopen()
	expect(tb, "after a save past the snapshot", s.load(), want{snap: snap, hs: HardState(1, 1, 11), ents: Entries(7, 11, 1, "a")})
	s.close()
}

// checkNewestSnapshotWins: of several snapshots, Load returns the newest,
// its releases having dropped the older ones.
func checkNewestSnapshotWins(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 9), Entries(1, 9, 1, "a"), true)
	for _, i := range []uint64{3, 5, 8} {
		snap := Snapshot(i, 1, "state")
		s.saveSnapshot(snap, false)
		s.release(snap)
	}
	s = s.reopen()
	expect(tb, "after three snapshots", s.load(), want{snap: Snapshot(8, 1, "state"), hs: HardState(1, 1, 9), ents: Entries(9, 9, 1, "a")})
	s.close()
}

// checkInstallReplacesLog: a snapshot installed from the leader replaces
// the whole log, the entries after its index included: they came from a
// deposed leader and conflict with the snapshot's history.
func checkInstallReplacesLog(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 2), Entries(1, 9, 1, "stale"), true)
	snap := Snapshot(5, 3, "leader@5")
	s.saveSnapshot(snap, true)
	s.save(HardState(3, 0, 5), nil, true)
	s.release(snap)
	s = s.reopen()
	expect(tb, "after installing a snapshot", s.load(), want{snap: snap, hs: HardState(3, 0, 5)})
	s.close()
}

// checkSavesAfterInstall: the log goes on from an installed snapshot, and
// a later reopen keeps what came after it (the install's own clean-up
// must not reach entries written after it).
func checkSavesAfterInstall(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 2), Entries(1, 9, 1, "stale"), true)
	snap := Snapshot(5, 3, "leader@5")
	s.saveSnapshot(snap, true)
	s.save(HardState(3, 0, 5), nil, true)
	s.release(snap)
	s.save(HardState(3, 0, 6), Entries(6, 7, 3, "new"), true)
	s = s.reopen()
	expect(tb, "after saves past an installed snapshot", s.load(), want{snap: snap, hs: HardState(3, 0, 6), ents: Entries(6, 7, 3, "new")})
	s.save(nil, Entries(8, 8, 3, "new"), true)
	s = s.reopen()
	expect(tb, "in the next incarnation", s.load(), want{snap: snap, hs: HardState(3, 0, 6), ents: Entries(6, 8, 3, "new")})
	s.close()
}

func asyncOf(tb testing.TB, s *store) raftgroup.AsyncStorage {
	tb.Helper()
	as, ok := s.Storage.(raftgroup.AsyncStorage)
	if !ok {
		tb.Fatalf("%T is not an AsyncStorage", s.Storage)
	}
	return as
}

// checkAsyncInOrder: SaveAsync calls land in the order made, overwrites
// included, with and without sync.
func checkAsyncInOrder(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	as := asyncOf(tb, s)
	done := make(chan error, 8)
	cb := func(err error) { done <- err }
	as.SaveAsync(HardState(1, 1, 0), Entries(1, 5, 1, "a"), true, cb)
	as.SaveAsync(HardState(2, 2, 1), Entries(3, 3, 2, "b"), false, cb)
	as.SaveAsync(nil, Entries(4, 4, 2, "b"), true, cb)
	as.SaveAsync(HardState(2, 2, 4), nil, true, cb)
	waitDone(tb, h, as, done, 4)
	s = s.reopen()
	expect(tb, "after async saves", s.load(), want{hs: HardState(2, 2, 4), ents: concat(Entries(1, 2, 1, "a"), Entries(3, 4, 2, "b"))})
	s.close()
}

// checkAsyncDoneOnce: every SaveAsync, an empty one included, calls done
// exactly once.
func checkAsyncDoneOnce(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	as := asyncOf(tb, s)
	done := make(chan error, 16)
	cb := func(err error) { done <- err }
	as.SaveAsync(nil, nil, true, cb)
	as.SaveAsync(HardState(1, 1, 0), Entries(1, 2, 1, "a"), true, cb)
	as.SaveAsync(nil, Entries(3, 3, 1, "a"), false, cb)
	waitDone(tb, h, as, done, 3)
	s.save(HardState(1, 1, 3), nil, true) // a synced Save flushes whatever is still queued
	s = s.reopen()
	if n := len(done); n != 0 {
		tb.Fatalf("%d done calls beyond one per SaveAsync", n)
	}
	expect(tb, "after async saves", s.load(), want{hs: HardState(1, 1, 3), ents: Entries(1, 3, 1, "a")})
	s.close()
}

// checkAsyncMixesWithSave: Save and SaveAsync share one order.
func checkAsyncMixesWithSave(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	as := asyncOf(tb, s)
	done := make(chan error, 4)
	cb := func(err error) { done <- err }
	s.save(HardState(1, 1, 0), Entries(1, 4, 1, "a"), true)
	as.SaveAsync(HardState(2, 2, 0), Entries(2, 3, 2, "b"), true, cb)
	waitDone(tb, h, as, done, 1)
	s.save(nil, Entries(4, 4, 2, "c"), true)
	as.SaveAsync(HardState(2, 2, 4), nil, false, cb)
	waitDone(tb, h, as, done, 1)
	s = s.reopen()
	expect(tb, "after mixed saves", s.load(), want{hs: HardState(2, 2, 4), ents: concat(Entries(1, 1, 1, "a"), Entries(2, 3, 2, "b"), Entries(4, 4, 2, "c"))})
	s.close()
}

// checkOverwriteBelowSnapshot: a tail overwritten from an index the next
// snapshot covers stays overwritten: the deposed leader's entries after
// the snapshot must not come back.
func checkOverwriteBelowSnapshot(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(5, 1, 5), Entries(1, 9, 5, "stale"), true)
	s.save(HardState(6, 2, 5), Entries(6, 7, 4, "true"), true)
	s.save(HardState(6, 2, 7), nil, true)
	snap := Snapshot(7, 4, "state@7")
	s.saveSnapshot(snap, false)
	s.release(snap)
	s = s.reopen()
	expect(tb, "after a snapshot over an overwritten tail", s.load(), want{snap: snap, hs: HardState(6, 2, 7)})
	s.close()
}

// checkInstallBeyondLog: a snapshot installed beyond the end of a log
// whose longer tail an overwrite had already cut also leaves no entry
// after it: the cut tail must not come back either.
func checkInstallBeyondLog(tb testing.TB, h Harness) {
	s := fresh(tb, h)
	s.save(HardState(1, 1, 2), Entries(1, 9, 1, "stale"), true)
	s.save(HardState(2, 2, 2), Entries(3, 4, 2, "cut"), true)
	snap := Snapshot(6, 3, "leader@6")
	s.saveSnapshot(snap, true)
	s.save(HardState(3, 0, 6), nil, true)
	s.release(snap)
	s = s.reopen()
	expect(tb, "after installing a snapshot beyond the log", s.load(), want{snap: snap, hs: HardState(3, 0, 6)})
	s.close()
}
