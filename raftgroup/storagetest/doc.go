// Package storagetest is the contract suite of raftgroup.Storage, in the
// model of litestream's RunWithReplicaClient: every implementation (the
// per-group DiskStorage, the shared node WAL's storage, the simulator's
// sim.Store) runs the same checks from its own package's tests through
// Run and a Harness that opens it.
//
// The contract is what the group's driver relies on (raftgroup/group.go
// restoreStorage, group_step.go persist, group_async.go, snapshot.go):
//
//   - Load on a directory never written returns a State that IsNew.
//   - Save(hs, ents) records hs (nil: unchanged) and appends ents,
//     overwriting any suffix of the log from ents[0]'s index on; an empty
//     Save is a no-op. Load after a reopen returns the last hard state
//     and the log as the saves left it, in index order with no gap.
//   - Close is a clean stop: everything saved, synced or not, is durable.
//   - SaveSnapshot(snap, false) (a local snapshot) covers a prefix: the
//     entries after snap survive. SaveSnapshot(snap, true) (installed from
//     the leader) replaces the whole log, entries after snap included.
//     Load returns the newest snapshot and only entries after it, and
//     Release(snap) never drops anything Load must return.
//   - A tail that an overwrite cut, from an index a later snapshot
//     covers, stays cut: neither a local snapshot covering the whole log
//     nor an installed one beyond its end brings it back on replay.
//   - AsyncStorage.SaveAsync is Save in order with the other saves; done
//     runs exactly once, with nil, once the save is durable.
//
// raftgroup.Storage has no Entries/Term/FirstIndex reads: the driver keeps
// its log in raft's MemoryStorage and only loads from the Storage once,
// so ErrCompacted and ErrUnavailable are MemoryStorage's business, not
// this contract's.
//
// Durability here means across a clean Close and reopen; a crash that
// loses unsynced writes is the simulator's and the crash tests' business.
//
// Every check can fail: storagetest's own tests run the suite against
// planted-bug wrappers of a correct Storage and require each check to
// catch at least one of them.
//
// Goroutines: the checks run on the test's goroutine; done callbacks of
// SaveAsync may run on any goroutine and only send on a channel.
package storagetest
