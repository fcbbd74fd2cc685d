package raftgroup

import (
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// Entry is one committed log entry as the state machine sees it: the
// proposer's payload, without the group's own framing.
type Entry struct {
	Index uint64
	Term  uint64
	// Sub numbers the payloads of one raft entry from 0: small proposals
	// are coalesced into one entry (framing.go), and each reaches the
	// state machine on its own with the entry's Index.
	Sub int
	// Data is the proposal payload. It is empty for the no-op entry a new
	// leader appends at the start of its term, which is passed on so that a
	// state machine can record term boundaries (Kafka leader epochs).
	Data []byte
}

// StateMachine is what a Group applies its committed entries to.
//
// Apply, Snapshot and Restore are called only from the group's own goroutine
// (or the simulator's single driver), in log order. SnapshotBody and
// ReceiveSnapshot are called from transport goroutines, concurrently with
// Apply, so they must work on immutable or staged data.
type StateMachine interface {
	// Applied returns the index of the last entry whose effects the state
	// machine holds durably. It is called once when the group opens: raft
	// restarts with it and re-delivers the committed entries after it.
	Applied() uint64

	// Apply applies one committed entry and returns the result that the
	// proposer's waiter receives (nil for entries proposed elsewhere is
	// fine). An error means the state machine can no longer follow the log;
	// the group stops and the node must not carry on.
	Apply(e Entry) (any, error)

	// Snapshot returns the state as of the last applied entry, after making
	// that state durable: the group compacts its raft log behind it.
	Snapshot() ([]byte, error)

	// SnapshotBody returns the bulk data that must reach a follower along
	// with snap (for a partition, the segment bytes it refers to), or nil.
	SnapshotBody(snap *raftpb.Snapshot) (io.ReadCloser, error)

	// ReceiveSnapshot stages the bulk data of an incoming snapshot, before
	// raft sees the snapshot message. Staged data is not live until Restore.
	ReceiveSnapshot(snap *raftpb.Snapshot, body io.Reader) error

	// Restore replaces the state with snap (and any data staged for it).
	Restore(snap *raftpb.Snapshot) error
}

// ConfIndexer is a StateMachine whose Applied() survives restarts (a
// durable checkpoint) and so must count the entries the group applies
// itself: configuration changes. The group calls SkipEntry with each
// one's index after applying it, so that a snapshot taken just after a
// change (at its index; a new member needs one that names it) does not
// find the state machine behind it at the next start, which would take
// it for a snapshot received and not yet restored.
type ConfIndexer interface {
	SkipEntry(index uint64)
}
