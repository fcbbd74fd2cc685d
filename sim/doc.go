// Package sim is a deterministic simulation of raftq's raft groups: whole
// clusters of raftgroup Hosts, in manual mode, driven by one goroutine in
// virtual time. It runs the code that ships — raftgroup's Ready handling,
// apply path, proposal waiters, quiescence, host routing and batching —
// through an injected clock (Host.Tick), network (a raftgroup.Transport
// that delays, reorders, drops and partitions) and storage (Store, a
// raftgroup.Storage that loses unsynced writes, keeping a random prefix of
// them, when a node crashes).
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
// is a violation too.
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
// Replay a failing seed with the command the failure prints:
//
//	go test ./sim -run 'TestSim$' -seed N -v
//
// Planted bugs (Config.LieAboutSync, Config.ApplyTwice) prove that the
// checker fails when it should. Store runs raftgroup/storagetest, the
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
