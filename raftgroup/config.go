package raftgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// FsyncPolicy says whether WAL writes are fsynced when raft asks.
type FsyncPolicy int

const (
	// FsyncAlways fsyncs whenever raft says MustSync: raft's own safety
	// assumption, and the default.
	FsyncAlways FsyncPolicy = iota
	// FsyncNever never fsyncs the WAL (etcd's SetUnsafeNoFsync). It exists
	// for research runs that measure what is lost without it.
	FsyncNever
)

func (p FsyncPolicy) String() string {
	if p == FsyncNever {
		return "never"
	}
	return "always"
}

// HostGroupID is reserved: envelopes for it are node-to-node keepalives
// that the Host itself sends and consumes (see doc.go, quiescence).
const HostGroupID = ^uint64(0)

// Config configures a Host and every group it runs.
type Config struct {
	// NodeID is this node's raft id, non-zero and unique in the cluster.
	NodeID uint64
	// DataDir holds group data under DataDir/raft/<group-id>/{wal,snap}.
	// Required unless NewStorage is set.
	DataDir string
	// Transport carries outbound traffic. Required.
	Transport Transport

	// TickInterval is the wall-clock length of one raft tick (ignored when
	// Manual is set: the caller ticks).
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks are raft's timeouts, in ticks.
	ElectionTicks  int
	HeartbeatTicks int

	// QuiesceAfterTicks is how long a leader waits with nothing to do and
	// every follower caught up before it stops heartbeating the group.
	// 0 disables quiescence.
	QuiesceAfterTicks int
	// KeepaliveTicks is how often the Host sends each peer node a
	// node-level keepalive; PeerTimeoutTicks is how long without any traffic
	// from a peer before the Host wakes the quiesced groups it is in.
	KeepaliveTicks   int
	PeerTimeoutTicks int

	// Raft flow control; see raft.Config.
	MaxSizePerMsg             uint64
	MaxInflightMsgs           int
	MaxUncommittedEntriesSize uint64
	MaxCommittedSizePerReady  uint64

	// SnapshotEntries is how many applied entries trigger a snapshot and
	// log compaction; SnapshotCatchUpEntries is how many entries are kept
	// behind a snapshot for slow followers.
	SnapshotEntries        uint64
	SnapshotCatchUpEntries uint64
	// LearnerSnapshotBytesPerSec bounds, over all groups of the host,
	// how fast snapshot bodies stream to learners: the catch-up of a
	// reassignment's new replicas (Kafka's replication throttle for
	// moving replicas). Zero is unbounded. Voters' snapshots are never
	// slowed: a voter behind may be needed for a quorum.
	LearnerSnapshotBytesPerSec float64
	// SnapshotBytes also triggers a snapshot once this many bytes of
	// entries were applied since the last, and SnapshotCatchUpBytes bounds
	// the bytes kept behind it, so that groups of large entries (Kafka
	// batches of a megabyte) do not hold gigabytes in memory.
	SnapshotBytes        uint64
	SnapshotCatchUpBytes uint64

	// Fsync is the WAL fsync policy of the default disk storage.
	Fsync FsyncPolicy
	// SharedWAL writes the log of every group on the node through one
	// etcd WAL (DataDir/raft/wal) with group commit: groups that save at
	// the same time share one fdatasync. Snapshots stay per group. Without
	// it each group has its own WAL and fsyncs alone. A group whose
	// fsync policy differs from Fsync (AlwaysFsync) keeps its own WAL.
	SharedWAL bool
	// AsyncStorageWrites lets a group go on stepping raft while its saves
	// are written (raft's AsynchronousStorageWrites): a leader commits
	// and applies during its own fsync, and on the shared WAL one fsync
	// serves several Readys of a group as well as many groups. Storage
	// that is not an AsyncStorage is then written inline.
	AsyncStorageWrites bool

	// Bounded queues: per group (proposals, inbound messages) and per
	// destination node (outbound messages).
	MaxQueuedProposals  int
	MaxInboundMessages  int
	MaxOutboundMessages int

	// NewStorage opens a group's durable storage in dir. nil means the etcd
	// WAL and snapshotter (OpenDiskStorage). sim/ injects in-memory storage.
	NewStorage func(group uint64, dir string) (Storage, error)
	// Fatal is called once when a group hits a storage or state-machine
	// error after which the node must not carry on. nil means log and
	// os.Exit(1). The group has stopped when Fatal is called.
	Fatal func(error)
	// ObserveSync, if set, is called with the duration of every Save that
	// fsynced (WAL latency for metrics). It must return quickly.
	ObserveSync func(time.Duration)
	// Manual runs no goroutines: the caller drives the Host with Tick and
	// Process from one goroutine (the simulator).
	Manual bool

	Logger *slog.Logger
}

// DefaultConfig returns a Config with tuned defaults; NodeID, DataDir and
// Transport remain to be set.
func DefaultConfig() Config {
	return Config{
		TickInterval:              100 * time.Millisecond,
		ElectionTicks:             10,
		HeartbeatTicks:            1,
		QuiesceAfterTicks:         20,
		KeepaliveTicks:            3,
		PeerTimeoutTicks:          10,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxCommittedSizePerReady:  8 << 20,
		SnapshotEntries:           10000,
		SnapshotCatchUpEntries:    5000,
		SnapshotBytes:             16 << 20,
		SnapshotCatchUpBytes:      4 << 20,
		MaxQueuedProposals:        8192,
		MaxInboundMessages:        4096,
		MaxOutboundMessages:       16384,
	}
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == 0 || c.NodeID == HostGroupID:
		return errors.New("raftgroup: config: NodeID must be non-zero")
	case c.Transport == nil:
		return errors.New("raftgroup: config: Transport is required")
	case c.DataDir == "" && c.NewStorage == nil:
		return errors.New("raftgroup: config: DataDir is required")
	case !c.Manual && c.TickInterval <= 0:
		return fmt.Errorf("raftgroup: config: TickInterval %s must be positive", c.TickInterval)
	case c.HeartbeatTicks <= 0 || c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("raftgroup: config: need 0 < HeartbeatTicks (%d) < ElectionTicks (%d)", c.HeartbeatTicks, c.ElectionTicks)
	case c.QuiesceAfterTicks < 0:
		return errors.New("raftgroup: config: QuiesceAfterTicks must not be negative")
	case c.QuiesceAfterTicks > 0 && (c.KeepaliveTicks <= 0 || c.PeerTimeoutTicks <= c.KeepaliveTicks):
		return fmt.Errorf("raftgroup: config: need 0 < KeepaliveTicks (%d) < PeerTimeoutTicks (%d)", c.KeepaliveTicks, c.PeerTimeoutTicks)
	case c.MaxSizePerMsg == 0 || c.MaxInflightMsgs <= 0 || c.MaxUncommittedEntriesSize == 0:
		return errors.New("raftgroup: config: raft flow-control limits must be positive")
	case c.SnapshotEntries == 0 || c.SnapshotBytes == 0:
		return errors.New("raftgroup: config: SnapshotEntries and SnapshotBytes must be positive")
	case c.MaxQueuedProposals <= 0 || c.MaxInboundMessages <= 0 || c.MaxOutboundMessages <= 0:
		return errors.New("raftgroup: config: queue bounds must be positive")
	case c.Fsync != FsyncAlways && c.Fsync != FsyncNever:
		return fmt.Errorf("raftgroup: config: unknown fsync policy %d", c.Fsync)
	}
	return nil
}

// GroupConfig describes one group to create on a Host.
type GroupConfig struct {
	// ID names the group (a partition, or 0 for cluster metadata).
	ID uint64
	// Peers are the initial voters of a brand-new group, this node
	// included. Every initial member must be given the same list. Ignored
	// when the group's storage already holds state.
	Peers []uint64
	// Join starts a brand-new replica empty, to be added by a conf change
	// on the existing members; Peers must then be empty.
	Join bool
	// StateMachine receives committed entries. Required.
	StateMachine StateMachine
	// ForwardProposals lets a follower (or learner) propose: raft forwards
	// the entry to the leader, and the proposer's waiter resolves when the
	// entry reaches this node's log and is applied here. A forwarded entry
	// the leader drops silently fails after two election timeouts with
	// ErrOutcomeUnknown. Meant for the metadata group, where every node
	// proposes registrations and hints; partitions answer clients with the
	// leader's address instead.
	ForwardProposals bool
	// FailOnStepDown fails this replica's appended, unapplied proposals
	// with ErrLeadershipLost as soon as it stops leading (CheckQuorum on
	// the wrong side of a partition, a higher term, a transfer), instead
	// of holding them until the log settles, which for a cut-off leader
	// is when the partition heals. Kafka answers a produce waiting on a
	// leader that lost its leadership the same way (NOT_LEADER_OR_FOLLOWER),
	// and the client retries on the new leader. Partitions set it; the
	// metadata group, whose callers retry commands only when no leader
	// took them, does not.
	FailOnStepDown bool
	// AlwaysFsync fsyncs this group's WAL even when the host's Fsync is
	// FsyncNever. The metadata group sets it: a never-fsync policy trades
	// partition data for speed, as Kafka's default flush policy does, but
	// the cluster's metadata log is fsynced (as KRaft's is), or a power
	// loss could make the cluster forget its topics.
	AlwaysFsync bool
	// HoldElectionTicks, for a brand-new group only, is how many ticks
	// this replica lets pass without a leader before its election clock
	// starts. Give it to every replica but the one meant to lead first,
	// which then wins the first election even when it creates the group
	// later than the others; the hold ends as soon as a leader is known.
	// Ignored when the group's storage already holds state.
	HoldElectionTicks int
}

// Validate reports the first problem with g for a host whose node is node.
func (g *GroupConfig) Validate(node uint64) error {
	switch {
	case g.ID == HostGroupID:
		return fmt.Errorf("raftgroup: group config: id %d is reserved", g.ID)
	case g.StateMachine == nil:
		return fmt.Errorf("raftgroup: group %d: StateMachine is required", g.ID)
	case g.Join && len(g.Peers) > 0:
		return fmt.Errorf("raftgroup: group %d: Join and Peers are exclusive", g.ID)
	case g.HoldElectionTicks < 0:
		return fmt.Errorf("raftgroup: group %d: HoldElectionTicks %d is negative", g.ID, g.HoldElectionTicks)
	case !g.Join && !containsID(g.Peers, node):
		return fmt.Errorf("raftgroup: group %d: Peers %v must include this node %d", g.ID, g.Peers, node)
	}
	return nil
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
