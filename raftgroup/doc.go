// Package raftgroup runs many raft groups on one node: each group is a
// go.etcd.io/raft/v3 RawNode with durable storage (etcd's storage/wal and
// snapshotter) and a StateMachine; a Host ticks the groups, routes their
// traffic by group id and batches it per destination node.
//
// # Public surface
//
//	NewHost(Config) (*Host, error)          Host is the node's Receiver
//	(*Host).CreateGroup(GroupConfig) (*Group, error)
//	(*Host).Group(id) / Groups() / RemoveGroup(id, purge) / Close() / Metrics()
//	(*Host).Tick() / Process()              manual mode (the simulator)
//	(*Group).Propose(ctx, data) (*Proposal, error)
//	(*Group).ProposeConfChange(ctx, *raftpb.ConfChangeV2) (*Proposal, error)
//	(*Group).TransferLeadership(ctx, to) / ReadIndex(ctx) / Campaign()
//	(*Group).Status() / WaitStatus(ctx, cond)
//	(*Group).Progress()                     a leader's voters: match index, last caught up (progress.go)
//	(*Group).Members(ctx)                   a leader's members, learners too: match index (members.go)
//	(*Proposal).Appended() / Done() / WaitAppended(ctx) / Wait(ctx)
//	OpenDiskStorage(...) *DiskStorage; SetWALSegmentSize(bytes)
//
// # Proposals
//
// Propose frames the payload with a header naming this node and a proposal
// id (framing.go; ids start at a random point per incarnation so that old
// entries never match new waiters), queues it and returns at once. The
// group's goroutine drains the whole queue into as few MsgProps as fit
// MaxSizePerMsg-sized batches, so many callers share one Ready, one WAL
// write and one fsync. A Proposal then reports:
//   - Appended/WaitAppended: the entry is durable in this node's log, at
//     the index and term returned (Kafka acks=1);
//   - Done/Wait: the entry was applied; the value StateMachine.Apply
//     returned (acks=all);
//   - or one error: *NotLeaderError (ErrNotLeader; never forwarded),
//     ErrProposalDropped (raft refused it: not in any log),
//     ErrProposalLost (a new leader overwrote its index: will never commit;
//     joined with a *NotLeaderError naming the new leader),
//     ErrOutcomeUnknown (a leader's snapshot replaced the log over it),
//     ErrLeadershipLost (GroupConfig.FailOnStepDown: this replica stopped
//     leading with the entry unapplied; it may still commit; joined with
//     a *NotLeaderError), ErrStopped. A context ending only ends the caller's wait.
//
// One caller's accepted proposals enter the log in call order: the queue
// is FIFO, and once raft refuses a batch every later proposal of that turn
// fails too, so the accepted ones are always a prefix.
//
// The leader's empty no-op entry reaches the StateMachine as an Entry with
// empty Data (so empty proposals are refused with ErrEmptyProposal). Conf
// change entries are applied by the group and never reach the
// StateMachine, so the indexes it sees may have gaps.
//
// # The Ready contract as implemented (group_step.go handleReady)
//
//  1. save rd.Snapshot (snapshot file, then the WAL's snapshot record,
//     fsynced);
//  2. save rd.HardState and rd.Entries, fsynced when rd.MustSync, or when
//     the Ready carried a snapshot (its commit index must not trail the
//     durable snapshot); then mirror them into raft.MemoryStorage and mark
//     our own entries appended;
//  3. send rd.Messages (after step 2: they promise what it made durable;
//     a leader that stays leader, with term and vote unchanged, sends
//     before step 2 instead, as raft thesis 10.2.1 allows: its own copy
//     counts toward a commit only at Advance, after the fsync);
//     MsgSnap goes to Transport.SendSnapshot with StateMachine.SnapshotBody,
//     and its outcome returns through ReportSnapshot;
//  4. restore rd.Snapshot into the StateMachine, apply rd.CommittedEntries,
//     resolve ReadIndex requests, and start a snapshot every SnapshotEntries
//     applied entries or SnapshotBytes applied bytes (snapshot.go): the
//     state is captured here, and a background goroutine makes it durable
//     (BackgroundSnapshotter's persist), records it (MemoryStorage
//     snapshot, Storage.SaveSnapshot), compacts MemoryStorage keeping
//     about SnapshotCatchUpBytes, and calls Storage.Release, which unlocks
//     and deletes old WAL segments and snapshot files. One runs at a time;
//     installing a leader's snapshot and closing wait for it; manual mode
//     runs it inline;
//  5. Advance.
//
// Any error from storage or the state machine halts the group on the spot
// (no Advance, no further write) and calls Config.Fatal once per Host
// (default: log and os.Exit(1)).
//
// # With Config.AsyncStorageWrites (group_async.go handleReadyAsync)
//
// raft hands the storage work over as messages: messages to peers go out
// at once; the append (entries, hard state, a received snapshot) goes to
// AsyncStorage.SaveAsync (the shared WAL's flusher; any other Storage is
// written inline, and an append with a snapshot is saved at once, hard
// state with it); appends finish in the order raft issued them, each
// mirrored into MemoryStorage, the snapshot restored, our proposals
// marked appended, and its held-back responses stepped or sent; committed
// entries, which raft hands out only once durable here, are applied
// inline. There is no Advance. New proposals wait while an append is in
// flight, so that they batch as behind a synchronous fsync. Off by
// default: it helps few groups of large entries and costs many groups of
// small ones (BENCHMARKS.md).
//
// Restart: storage is loaded into MemoryStorage; a StateMachine whose
// Applied() is behind the snapshot is Restored from it; raft.Config.Applied
// is the snapshot index, so raft re-delivers every committed entry after
// the snapshot. This departs from "Applied() sets raft.Config.Applied":
// conf changes between the snapshot and Applied() must reach raft's
// configuration again, so the group re-applies them and passes to the
// StateMachine only the entries after its Applied().
//
// Raft runs with CheckQuorum, PreVote, DisableProposalForwarding,
// StepDownOnRemoval and ReadOnlySafe.
//
// # Goroutines and ownership
//
// Each group has one owner: its goroutine (Group.run) or, in manual mode,
// the caller of Host.Process. Only the owner touches the RawNode, the
// MemoryStorage, the Storage, the StateMachine's Apply/Snapshot/Restore and
// the waiter registry, with one exception: a background snapshot calls
// the MemoryStorage and the Storage's SaveSnapshot and Release (all of
// which lock) and the state machine's persist function. Other goroutines queue work in the group's inbox
// (bounded: MaxQueuedProposals proposals, MaxInboundMessages messages; a
// full message queue drops, raft retransmits) and read the Status, which
// the owner publishes atomically after every turn, and on a leader the
// voters' Progress, whose atomics the owner stores into after every turn
// (allocating only on a new term or voter set). The Host runs a ticker
// goroutine (one tick for all groups) and a flusher goroutine that hands
// each destination's queued envelopes to Transport.Send as one batch
// (bounded by MaxOutboundMessages; on overflow or a refused batch the
// messages are dropped and the groups told ReportUnreachable). Transport
// goroutines call Receive and ReceiveSnapshot, which only enqueue (and
// stage snapshot data through StateMachine.ReceiveSnapshot). Nothing on
// these paths blocks on another loop.
//
// Locks: Host.mu (the group map; held across CreateGroup's storage open
// and replay), Host.countMu, Host.outMu, Host.heardMu, Group.mu (the
// inbox), Group.statusMu, nodeLog.mu, retirer.mu and DiskStorage.mu. Their order, and
// what each is held across, is in the repository's DESIGN.md ("Lock
// order"), the one list for every package.
//
// # Quiescence
//
// An idle group costs no heartbeats. A leader quiesces after
// QuiesceAfterTicks ticks with no activity when its log is committed and
// applied everywhere (every member's Match is the last index, in
// StateReplicate), nothing is pending (proposals, reads, transfer) and the
// Host has heard from every member recently. It tags its next heartbeats
// with a marker in Message.Context and stops being ticked. A follower that
// receives the tagged heartbeat from its leader in the current term strips
// the marker (raft sees a plain heartbeat) and stops its election clock.
// Any message (other than heartbeat responses for a leader, the notice for
// a follower), proposal or operation wakes a group.
//
// A leader that dies while quiesced sends nothing, so followers need
// another clock: every Host sends each peer node a keepalive every
// KeepaliveTicks (an Envelope for the reserved group HostGroupID, which
// the receiving Host consumes), and wakes any quiesced group with a member
// it has not heard from within PeerTimeoutTicks. The woken follower's
// election clock runs and it elects a new leader. A leader quiesced on the
// wrong side of a partition is woken the same way and steps down by
// CheckQuorum. Safety never depends on quiescence, only liveness: a missed
// notice leaves a follower awake; its pre-vote wakes the leader, whose
// heartbeats resume (PreVote and the leader lease keep the term stable).
//
// # Shared node WAL (Config.SharedWAL)
//
// By default each group has its own etcd WAL and fsyncs it alone, so N
// groups with work make N fdatasyncs a round. With SharedWAL every group
// of the node writes through one etcd WAL in DataDir/raft/wal
// (nodelog.go): a group's Save queues a record and waits; one flusher
// goroutine writes all queued records as one WAL Save and one fdatasync,
// then wakes the writers (group commit across groups, as dragonboat's and
// TiKV's raft-engine logs do). The flusher yields once before taking a
// small queue, so that groups made runnable by the same network read join
// the batch. Records (nodelog_record.go) are tagged by group: a Save (hard
// state and entries, split into records under 768 KiB, which etcd's
// encoder handles without a second copy, with the hard state in the
// last), a snapshot (installed ones replace the group's
// log on replay, local ones cover a prefix), a removal, and a checkpoint.
// Each WAL entry's index is the log's own sequence number; replay sorts
// the records back out by group. Every four segments the flusher writes a
// checkpoint restating every group's hard state and snapshot and moves the
// WAL's start (an etcd snapshot record) to just before the oldest record
// that still holds entries some group has not snapshotted; segments before
// it are retired on a goroutine of their own: renamed out of etcd's
// sight, shrunk a little at a time, then unlinked (wal_retire.go). A
// group's own WAL (DiskStorage) retires the segments its snapshots
// release the same way. etcd's WAL replays from its snapshot and skips the
// entries at or below it, overwrites included, so DiskStorage writes a
// tail guard (a term-0 entry after the snapshot, dropped on replay) for a
// snapshot after which the log holds nothing (storage_disk.go
// guardSnapshot): otherwise a tail an overwrite or an install cut would
// come back. raftgroup/storagetest is the Storage contract every
// implementation runs (DiskStorage, the node WAL's, sim.Store).
// Up to 64 groups are asked to snapshot (Group.snapshotNow), oldest
// records first: those whose records outlived
// the previous checkpoint and that wrote no entries since (idle, so an
// idle group cannot pin the log), and busy ones still holding a record
// from eight checkpoints back; other busy groups snapshot by their own
// thresholds. One still holding the same record at the third checkpoint
// that asked it is logged. Snapshots stay per group (DataDir/raft/<id>/snap). A
// group whose fsync policy differs from the host's (AlwaysFsync) keeps
// its own WAL. Host.RemoveGroup(id, true) and DropGroupData write a
// removal, so a group id created again later starts empty.
//
// # A damaged WAL (wal_damage.go)
//
// Before etcd reads a WAL (the node's shared one or a group's own),
// checkWAL decodes every segment on its own: each record against its
// CRC, and each segment's first (CRC) record against the running CRC the
// segment before ended with, so that a segment cut at a record boundary
// shows. It also checks sizes: etcd preallocates each segment and cuts
// to the next only once one has reached wal.SegmentSizeBytes, truncating
// it to its records but never below that, so a crash never leaves a
// segment shorter; a truncation does. The bound is the smallest segment
// size the WAL was written with (<wal dir>.segment-bytes beside it), so
// raising --wal-segment-bytes is no truncation; with fsync never, whose
// preallocations a power loss may undo, sizes are not checked. A torn
// last record is etcd's wal.Repair's, as before, and the segment is
// grown back to its preallocated size after it; but etcd's decoder takes
// any record that fails its check while holding an all-zero sector for
// torn, so a record counts as torn only when nothing but zeros follows
// where it claims to end (a torn write is the last one). A damaged
// length that claims past the file end still passes for torn: raft then
// halts the node at its leader's first heartbeat ("tocommit out of
// range"), which the corrupt nemesis counts as a refusal. Any other damage makes
// the open fail with a *WALDamageError naming the segment, and the node
// refuses to start: it lost raft state (votes, entries it acknowledged),
// and a voter that forgot them can elect a leader without committed
// entries, so it must not rejoin as the same member; the way back is to
// decommission and remove it and start it empty with --seeds (a new
// incarnation).
//
// # WAL segment size
//
// etcd's WAL segment size is the package variable wal.SegmentSizeBytes
// (64 MB, preallocated). SetWALSegmentSize sets it for the process; call it
// once at start-up before any Host opens a group. 1,000 groups want a few
// MiB at most.
//
// # Performance
//
// The design choices the measurements support (figures and commands:
// BENCHMARKS.md):
//   - Proposals batch: concurrent proposers share one Ready, one WAL write
//     and one fsync, so throughput grows with the proposers' pipelining
//     depth, not with the fsync rate.
//   - With a WAL per group, N groups with work make N fdatasyncs a round
//     and follow the disk's fsync rate; SharedWAL group-commits them, which
//     is why the broker defaults to it.
//   - Shared-WAL records stay under 768 KiB (saveChunk): etcd encodes a
//     larger record outside its kept encoder buffer and copies it again.
//   - A quiesced group costs no ticks or heartbeats, so 1,000 idle groups
//     per node cost a small fraction of a core.
package raftgroup
