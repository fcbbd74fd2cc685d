package isr

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/raftq/raftq/coordinator"
)

// Config configures the leader side of one ISR-mode partition.
type Config struct {
	// Self is this node's broker id.
	Self uint64
	// Group is the partition's group id, which AlterPartition names.
	Group uint64
	// ReplicaLagTimeMax is Kafka's replica.lag.time.max.ms: a follower
	// not caught up for longer leaves the ISR.
	ReplicaLagTimeMax time.Duration
	// Propose sends one AlterPartition item to group 0 and returns a
	// channel that yields its outcome once. A failure of the whole
	// command (no group-0 leader, a timeout) comes back as the item's Err.
	// The proposer owns any backoff between retries.
	Propose func(coordinator.AlterPartitionItem) <-chan coordinator.ItemResult
	// Eligible reports whether broker id, seen at brokerEpoch, may join
	// an ISR: registered at that epoch, unfenced and not shutting down
	// (Kafka's isReplicaIsrEligible). Nil counts every broker eligible.
	Eligible func(id, brokerEpoch uint64) bool
	// Logger receives ISR changes; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns Kafka's defaults (replica.lag.time.max.ms 30 s).
func DefaultConfig() Config {
	return Config{ReplicaLagTimeMax: 30 * time.Second}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.ReplicaLagTimeMax <= 0 {
		return fmt.Errorf("isr: replica lag time max %s must be positive", c.ReplicaLagTimeMax)
	}
	if c.Propose == nil {
		return errors.New("isr: no AlterPartition proposer")
	}
	return nil
}
