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
//     ErrStopped. A context ending only ends the caller's wait.
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
// the owner publishes atomically after every turn. The Host runs a ticker
// goroutine (one tick for all groups) and a flusher goroutine that hands
// each destination's queued envelopes to Transport.Send as one batch
// (bounded by MaxOutboundMessages; on overflow or a refused batch the
// messages are dropped and the groups told ReportUnreachable). Transport
// goroutines call Receive and ReceiveSnapshot, which only enqueue (and
// stage snapshot data through StateMachine.ReceiveSnapshot). Nothing on
// these paths blocks on another loop.
//
// Lock order (A -> B: A may be held when B is taken):
//
//	Host.mu -> Group.mu
//	DiskStorage.mu -> the etcd WAL's own lock (a Save, or a background
//	snapshot's tail guard)
//	Group.mu, Group.statusMu, Host.outMu, Host.heardMu: leaves
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
// # WAL segment size
//
// etcd's WAL segment size is the package variable wal.SegmentSizeBytes
// (64 MB, preallocated). SetWALSegmentSize sets it for the process; call it
// once at start-up before any Host opens a group. 1,000 groups want a few
// MiB at most.
//
// # Measurements (2-core VM, disk shared with other work; see bench_test.go
// and idle_bench_test.go for the commands)
//
// Idle CPU, 1,000 groups per node (3 nodes in one process, 100 ms ticks):
// 112 ms/s per node (11% of a core) awake; 5.9 ms/s (0.6%) quiesced.
//
// Throughput: BenchmarkPropose, 3 nodes in one process over loopback TCP,
// real WAL with fsync always on the one disk they share, acks=all
// (committed and applied), 16 MiB segments. Run 2026-11-30 on a quiet
// machine:
//
//	go test ./raftgroup -run '^$' -bench 'BenchmarkPropose/(baseline|transport=tcp)' -benchtime 4s
//
// Same-run baselines: one writer appending and fdatasyncing 100 B does
// 1,882-2,465 fsyncs/s; 64 KiB, 81-107 MB/s; three writers side by side
// (one per replica), 256 KiB per fsync, 139-189 MB/s each: the ceiling on
// committed MB/s when every byte lands on this disk three times.
//
//	size  groups proposers depth  proposals/s      MB/s      fsyncs/s
//	100   1      64        1          17,314-18,218   1.7-1.8  3,018-3,054
//	100   1      64        16        175,934-248,633 18-25    2,288-2,600
//	100   1      64        64        379,253-392,792 38-39      958-1,029
//	100   64     64        1           1,813-2,707    0.2-0.3  4,034-5,441
//	100   64     64        16          5,227-8,822    0.5-0.9  2,352-3,897
//	64Ki  1      16        1           1,372-1,484   90-97       879-967
//	64Ki  1      16        8           2,257-2,766  148-181      194-239
//	64Ki  1      16        32          2,635-3,102  171-203       59-74
//	64Ki  64     64        1             453-513     30-34     1,094-1,185
//
// Ranges are over the runs of that day; the 64 KiB depth-32 row comes from
// four runs interleaved with the three-writer baseline (171/139, 190/189,
// 180/147, 203/173 MB/s raft/baseline).
//
// Batching factor: at 100 B, depth 16, about 90 proposals share an fsync
// (233,586 proposals/s over 2,600 fsyncs/s, counted on all three nodes),
// coalesced into entries of up to 64 KiB, which is why entries/fsync stays
// near 1 while proposals/fsync grows with the load.
//
// Targets: 100 B from 64 proposers reaches 176k-249k proposals/s at depth
// 16 and 379k-393k at depth 64 (target
// 200k) once the proposers pipeline. 64 KiB entries commit 171-203 MB/s at
// depth 32, at or above the three-writer disk ceiling measured beside them
// at 256 KiB per fsync; 200 MB/s was reached in 2 of 12 runs that day, so
// the target holds only when the disk does. These runs save about 8 MiB
// per fsync (64 KiB proposals are coalesced, 14 to an entry), and beside
// three writers fdatasyncing 8 MiB at a time (196-243 MB/s each, a later
// day) they reach 70-99% of it. Until 2026-11-30 the transport grew one buffer per burst
// of MsgApps with protobuf's exact-size reallocation, and 64 KiB runs were
// CPU-bound at 114-119 MB/s; see transport/peer. With 64 groups each group
// fsyncs its own WAL: 192 WALs share the disk's fsync rate, and throughput
// follows it.
//
// The shared node WAL (SharedWAL) fixes that: runs of the same case back
// to back, WAL per group then shared, 3 s each:
//
//	size  groups proposers depth  wal=group            wal=shared
//	100   64     64        16     5,240-8,366/s        57,389-64,633/s
//	100   64     64        1      1,333/s              5,282/s
//	100   1      64        64     373,149-383,182/s    368,412-416,631/s
//	64Ki  64     64        1      36.8-44.2 MB/s       56.1-77.6 MB/s
//	64Ki  1      16        32     154.9-192.9 MB/s     176.7-177.7 MB/s
//
// The last row is with records under 768 KiB (saveChunk); at 1 MiB, etcd
// re-marshalled and re-padded every record outside its encoder buffer and
// the shared WAL gave 141-145 MB/s. It still uses 10% more CPU for the
// same work: one more copy of each entry, into its record.
package raftgroup
