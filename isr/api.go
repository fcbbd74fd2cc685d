package isr

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/partition"
)

// Errors the node side reports; the broker maps them to Kafka codes.
var (
	// ErrNotLeader: this replica does not lead its partition (or leads an
	// epoch other than the one asked about); nothing was appended.
	ErrNotLeader = errors.New("isr: not the partition leader")
	// ErrLeaderChanged: the batch was appended, but this replica stopped
	// leading the epoch it was appended in before it committed.
	ErrLeaderChanged = errors.New("isr: leadership changed before the batch committed")
	// ErrClosed: the partition was closed.
	ErrClosed = errors.New("isr: partition closed")
)

// ManagerConfig configures a node's ISR side.
type ManagerConfig struct {
	// Self is this node's broker id.
	Self uint64
	// ReplicaLagTimeMax is replica.lag.time.max.ms (Kafka: 30 s).
	ReplicaLagTimeMax time.Duration
	// ReplicaFetchWaitMax is replica.fetch.wait.max.ms (Kafka: 500 ms): how
	// long a leader holds a follower's fetch that finds nothing new.
	ReplicaFetchWaitMax time.Duration
	// MaxFetchBytes bounds one fetch response
	// (replica.fetch.response.max.bytes).
	MaxFetchBytes int
	// Fetch sends a follower's fetch request to leader node to and
	// returns its answer (the peer transport's fetch stream).
	Fetch func(ctx context.Context, to uint64, req []byte) ([]byte, error)
	// Propose sends one AlterPartition item to group 0 (see Config). A
	// channel closed without a result (the node is closing) drops the
	// proposal; a result with Err makes the leader send it again, so the
	// proposer owns the backoff between attempts.
	Propose func(coordinator.AlterPartitionItem) <-chan coordinator.ItemResult
	// Eligible reports whether broker id at brokerEpoch may join an ISR
	// (see Config); nil counts every broker eligible.
	Eligible func(id, brokerEpoch uint64) bool
	// BrokerEpoch returns this node's broker epoch in the metadata, 0
	// while unknown; followers send it in their fetches (KIP-903).
	BrokerEpoch func() uint64
	// CheckpointInterval is how often every partition's log is synced and
	// checkpointed when no flush policy says more (Kafka's recovery point
	// checkpoint, 60 s).
	CheckpointInterval time.Duration
	// Manual runs the Manager without goroutines or timers of its own, as
	// raftgroup's manual mode does, for the simulator: the caller drives
	// it from one goroutine with Step (the timers, AlterPartition answers
	// and leader flushes) and FetchRounds (follower fetches), in the time
	// Clock gives. A manual follower asks its leader not to hold a fetch
	// (MaxWaitMillis 0), and a manual leader answers at once.
	Manual bool
	// Clock is the time source; nil means time.Now.
	Clock func() time.Time
	// Hooks receive events for metrics; nil ones are skipped.
	Hooks Hooks
	// Logger receives role and ISR changes; nil discards them.
	Logger *slog.Logger
}

// Hooks are the Manager's metrics callbacks. They must not block. (ISR
// shrinks and expands are group 0's: the broker counts them from the
// metadata, which also sees the ones fencing makes.)
type Hooks struct {
	// FollowerFetch is called after each fetch round trip a follower made,
	// with its duration and whether it failed.
	FollowerFetch func(d time.Duration, failed bool)
}

// DefaultManagerConfig returns Kafka's defaults.
func DefaultManagerConfig() ManagerConfig {
	return ManagerConfig{
		ReplicaLagTimeMax:   30 * time.Second,
		ReplicaFetchWaitMax: 500 * time.Millisecond,
		MaxFetchBytes:       10 << 20,
		CheckpointInterval:  60 * time.Second,
	}
}

// FlushPolicy is a topic's flush.messages and flush.ms: when an ISR
// replica fsyncs its log. Zero values mean never (Kafka's default, which
// trusts replication).
type FlushPolicy struct {
	// Messages: fsync once this many records are unflushed (1: before
	// every batch counts as appended).
	Messages int64
	// Interval: fsync data older than this.
	Interval time.Duration
}

// PartitionConfig opens one ISR-mode partition replica.
type PartitionConfig struct {
	Group   uint64
	TopicID [16]byte
	Index   int32
	Dir     string
	Log     partition.Config
	Flush   FlushPolicy
	Logger  *slog.Logger
}

// State is group 0's view of one ISR partition, as the broker's reconcile
// passes it on every metadata change.
type State struct {
	Leader         uint64 // 0: none
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []uint64
	ISR            []uint64
	ELR            []uint64
	Recovering     bool
	// LastKnownLeader is KIP-966's replica of last resort (0: none).
	LastKnownLeader uint64
	// MinISR is the topic's min.insync.replicas.
	MinISR int
	// BrokerEpoch is this node's broker epoch in the same metadata.
	BrokerEpoch uint64
	// Reported says group 0 holds this replica's log end report for
	// unclean recovery (coordinator.Partition.LogEnds): a report dropped
	// when its broker was fenced must be made again.
	Reported bool
}

// Role is what a replica does in its partition.
type Role string

// Roles.
const (
	RoleNone     Role = "none" // no leader known, or not yet told
	RoleLeader   Role = "leader"
	RoleFollower Role = "follower"
)

// Status is a replica's replication state, for /v1/status and metrics.
type Status struct {
	Role           Role
	Leader         uint64
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []uint64
	ELR            []uint64
	Recovering     bool
	HighWatermark  int64
	EndOffset      int64
	LogStart       int64
	// Followers is the leader's view of each follower; empty elsewhere.
	Followers []FollowerStatus
}

// FollowerStatus is what a leader knows of one follower.
type FollowerStatus struct {
	ID        uint64
	EndOffset int64 // its latest fetch offset, -1 before any
	// LastCaughtUp is when it was last caught up (zero: never).
	LastCaughtUp time.Time
	InISR        bool
}
