package raftgroup

import (
	"go.etcd.io/raft/v3/raftpb"
)

// Storage is a group's durable raft state: its log, hard state and latest
// snapshot metadata. The group's goroutine is its only caller.
//
// Any error from Save, SaveSnapshot or Release is fatal to the node: the
// group stops and the Host's fatal handler runs.
//
// raftgroup/storagetest states the contract in full and checks it; every
// implementation runs it from its own package's tests.
type Storage interface {
	// Load returns what has been persisted; a new store returns the zero
	// State. It is called once, before any write.
	Load() (State, error)
	// Save records hs (nil: unchanged) and appends ents, which may
	// overwrite a suffix of the log. When sync is true both are durable
	// when Save returns.
	Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error
	// SaveSnapshot durably records snap. It is called before the log
	// entries it covers are dropped. install says snap came from the
	// leader and replaces the whole log, entries after it included; a
	// local snapshot (install false) covers only a prefix.
	SaveSnapshot(snap *raftpb.Snapshot, install bool) error
	// Release allows the store to drop log data covered by snap.
	Release(snap *raftpb.Snapshot) error
	// Close releases files and locks.
	Close() error
}

// State is what a Storage held when it was opened.
type State struct {
	Snapshot  *raftpb.Snapshot // nil or empty: none
	HardState *raftpb.HardState
	Entries   []*raftpb.Entry // entries after Snapshot
}

// IsNew reports whether nothing has ever been persisted.
func (s State) IsNew() bool {
	return s.Snapshot.GetMetadata().GetIndex() == 0 && s.HardState.GetTerm() == 0 && len(s.Entries) == 0
}

// AsyncStorage is a Storage that can persist without blocking the group.
// With Config.AsyncStorageWrites a group queues its saves through it and
// keeps stepping raft (acknowledgements, commits, applies) while they are
// written; a Storage without it is written inline.
type AsyncStorage interface {
	Storage
	// SaveAsync records hs and ents as Save does, in order with earlier
	// saves, and calls done with nil once they are durable (or, without
	// sync, once queued), or with the error that stopped the store. done
	// may run on any goroutine, even before SaveAsync returns, and must
	// not block. The group itself orders what follows each save, so done
	// calls may come in any order.
	SaveAsync(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool, done func(error))
}
