// Package sim is a deterministic simulation of raftq's raft groups: whole
// clusters of raftgroup Hosts, in manual mode, driven by one goroutine in
// virtual time. It runs the code that ships — raftgroup's Ready handling,
// apply path, proposal waiters, quiescence, host routing and batching —
// through an injected clock (Host.Tick), network (a raftgroup.Transport
// that delays, reorders, duplicates, drops and partitions) and storage
// (Store, a raftgroup.Storage that loses unsynced writes, keeping a random
// prefix of them, when a node crashes).
//
// Two kinds of group run side by side. Toy groups (Config.Groups) apply
// to StateMachine, an applied-sequence recorder. Partition groups
// (Config.Partitions) run the real partition.Replica, the broker's
// partition state machine, on the real partition log over each node's
// simulated disk: a vfs.Mem, whose crash keeps each file's synced bytes
// plus a random, possibly torn, prefix of the writes after them, and
// forgets file entries whose directory was not synced (internal/vfs).
// Their load is Kafka producers: per partition two idempotent producers,
// which resend a batch with the same sequence until it is acknowledged,
// one plain producer, which never resends, and (Config.Transactions, on
// by default) one transactional producer (txn.go), which ends each
// transaction of one to three batches with a commit or abort marker it
// sends itself, as the coordinator's WriteTxnMarkers would, and now and
// then sends the previous marker again while the next transaction is
// open, as a delayed copy of a coordinator's retry arrives. Its checker
// (txn_check.go) walks every replica's final log: transactions in order,
// each marker once and for the transaction open then, no acknowledged
// marker lost, and the log's aborted-transaction index, open
// transactions and last stable offset what the batches say. Offsets, dedup, leader
// epochs, checkpoints and snapshot transfer and install are the shipping
// code's.
//
// ISR partitions (Config.ISRPartitions, isr.go) run the real isr.Manager
// and isr.Partition of every node in manual mode on the same disks: the
// followers' fetches travel the simulated network, and group 0 is the
// real coordinator.Metadata with its ISR rules (elections, AlterPartition,
// fencing, ELR), applied at once and heard only by nodes the partitions
// leave with the majority. Its controller fences a node silent for ten
// ticks and re-registers a restarted one, which, as the broker's
// updateISR does, takes no role until that registration is in. The topic
// runs min.insync.replicas 2, ELR and flush.messages=1, where Kafka
// promises that no acknowledged batch is lost to single power losses, so
// every check above applies to it (at the end, after every replica is
// back in the ISR at the leader's end). Config.ISRNoFlush runs Kafka's
// default flush instead, under which successive power losses lose
// acknowledged batches, as they do in Kafka; a planted-bug test shows the
// checker finds that.
//
// Config.CorruptRate damages a file of one node per run (the seed's)
// while it is down (corrupt.go): bits flipped or the file cut. A
// partition replica that finds its log cut below its checkpoint
// (partition.GapError, at open or at the restore of its local snapshot)
// refills it from a live, reachable peer (repair.go, as the broker's
// fillFromPeers), or stays offline and is tried again every tick, after
// the heal too. An ISR replica that lost durable records resigns when
// elected (isr/resign.go). One failing disk of three is what replication
// can tolerate: a cut of synced bytes at a log's end is found by no
// check, so damage on every replica may lose what all of them
// acknowledged, in Kafka as here.
//
// The raft log itself stays on Store, not on the node WAL: the WAL is
// etcd's storage/wal, which opens, locks, preallocates and renames through
// os and fileutil directly and has no file-system seam to run over a
// vfs.Mem; a fork would test a WAL we do not ship. Store instead passes
// raftgroup/storagetest, the contract suite the real WALs pass, and the
// WAL's own crash behaviour is tested on real files: the node-log crash
// loop kills real processes mid-write (raftgroup), and chaos's lazyfs
// loses unsynced writes under whole clusters.
//
// Each group starts as the broker starts a partition: all replicas but
// one hold the first election for it (GroupConfig.HoldElectionTicks).
//
// Faults, seeded: crash and restart (state machines are volatile and are
// rebuilt from snapshot and log), one- and two-way partitions of a node,
// message drops, per-message delays (hence reordering), snapshot transfers
// that fail. Load: proposals to whichever node believes it leads.
//
// Invariants (checker.go): at most one leader per group and term; an index
// applied anywhere holds the same data everywhere; every replica applies
// strictly increasing indexes (never twice), so applied sequences are
// prefixes of one another; after a final heal and restart, every group
// commits a marker on every replica within a bounded time, and every
// replica then holds exactly the committed sequence, including every
// acknowledged proposal. A raft panic (it detects a corrupted or lost log)
// is a violation too. Partition groups add Kafka's (partition_check.go):
// every replica's log holds the same bytes at the same offsets (checked
// at each append and, whole, at the end); the high watermark a serving
// replica shows (the leader, once it applied its own term's no-op, as the
// broker serves) never goes backwards, across its restarts too; every
// acknowledged batch is in every replica's final log at the offsets its
// acknowledgement named; no batch sits twice in a log, and every
// acknowledgement of one (producer, sequence) names the same offsets. A
// replica that cannot open or start after a crash is a violation.
//
// Determinism: one seed, one trace. Everything the simulator decides comes
// from a PCG seeded with Config.Seed; nodes, groups, deliveries and
// destinations are iterated in id order; the Hosts in manual mode start no
// goroutines and sort what they iterate. raft v3.7.0 draws its randomized
// election timeout from crypto/rand (raft.go, lockedRand.Intn calls
// crypto/rand.Int(rand.Reader, …)), and raftgroup draws each incarnation's
// proposal-id base from crypto/rand too, so the caller seeds crypto/rand
// with testing/cryptotest.SetGlobalRandom(t, seed) (Go 1.24+, present in Go
// 1.26; it replaces crypto/rand.Reader for the test and so cannot run in
// parallel tests). TestSim_Deterministic checks that a seed reproduces its
// trace hash.
//
// Replay a failing seed with the command the failure prints; -events
// prints what happened, in order (which node started, crashed, was cut
// off, led which term; which batch went to which leader and where it was
// acknowledged):
//
//	go test ./sim -run 'TestSim$' -seed N -nodes 3 -events -v
//
// TestSim runs 2,500 seeds on 3 nodes (60 under the race detector;
// .ci/run runs the 2,500 without it), -seeds N another count, -long
// 100,000, -nodes another cluster size, and -from N starts elsewhere, to
// split a long run across processes. TestSim_FiveNodes runs a tenth as
// many on 5 nodes.
//
// Planted bugs prove that each check fails when it should, each found
// within TestSim's seed count: Config.LieAboutSync (raft stores that
// acknowledge unsynced writes: changed entries, lost and divergent
// partition batches), ApplyTwice, DropProducerID (a retry appended
// twice), ServeBeforeCaughtUp (a high watermark that goes back),
// DiskLiesAboutSync (a partition replica that cannot restart),
// SkipCRCChecks (damaged batches served), ISRNoFlush (acknowledged ISR
// batches lost to successive power losses) and UnnumberedMarkers
// (a late marker copy ending the producer's next transaction). Store runs raftgroup/storagetest, the
// Storage contract the real WALs run, so that a verdict resting on it
// rests on the same promises (a clean Close is a clean stop; Crash is
// the simulator's own).
//
// Goroutines: none. Run owns everything it creates; it is not safe to run
// two simulations at once in one process (crypto/rand is process-global).
//
// Coordinator state machines (Config.MetadataGroups, Config.OffsetGroups;
// metadata.go, groups.go): groups that run coordinator.Metadata, opened as
// the controller opens group 0 (forwarded proposals, always fsync), fed
// by every node the commands brokers and the controller propose
// (registrations on each start, liveness, topics, configs, topic
// defaults, hints, producer ids, reassignments, ISR changes, elections,
// features, shutdowns, maintenance, decommissions), and groups that run
// groups.Machine, fed by the simulator playing the group coordinator on
// the leader (Barrier, NewGeneration, Assign, Remove, ReplaceStatic,
// Commit checked with CheckCommit, DeleteOffsets, DeleteGroups, Expire;
// heartbeats are no command). Built from stale views, some fail at
// apply, as in real use. Checked (metadata_check.go, groups_check.go):
// every replica's state, as Snapshot encodes it, is the same after the
// same entry, the same after a restore from a snapshot at index i as the
// others' after i, and the same at the end, where it must also restore
// into a fresh machine (Metadata's Restore checks its invariants); a
// restored state encodes to its snapshot's bytes; a committed offset
// never goes backwards or vanishes without a reset (OffsetDelete,
// DeleteGroups, expiry, or a simple commit as --reset-offsets makes).
// Planted bugs: SkipMetadataCommand, SkipOffsetCommand, CommitGoesBack.
// These groups are off in DefaultConfig (they double a seed's CPU time:
// two more raft groups, each busier than a toy one);
// TestSim_StateMachines runs 500 seeds with them on.
package sim
