package isr

import (
	"context"
	"time"

	"github.com/raftq/raftq/partition"
)

// TEMPORARY: the signatures the broker codes against while the bodies are
// written (replaced before merge).

// Manager is a node's ISR side: its ISR partitions, the fetchers that
// replicate them from their leaders, and the server of its followers'
// fetches.
type Manager struct{}

// NewManager starts a node's ISR side.
func NewManager(cfg ManagerConfig) (*Manager, error) { panic("isr: not yet") }

// Close stops every fetcher and ticker. Partitions are closed by their
// owners (Partition.Close) before.
func (m *Manager) Close() {}

// HandleFetch answers a follower's fetch request (the peer transport's
// FetchHandler): from is the fetching node.
func (m *Manager) HandleFetch(from uint64, req []byte, deadline time.Time) []byte {
	panic("isr: not yet")
}

// Open opens (creating if new) the replica cfg names and registers it; it
// takes no role until the first Update.
func (m *Manager) Open(cfg PartitionConfig) (*Partition, error) { panic("isr: not yet") }

// Partition is one ISR-mode partition replica on this node.
type Partition struct{}

// Update takes group 0's latest state of the partition: it becomes leader,
// follower or neither, or takes an ISR change within its epoch.
func (p *Partition) Update(s State) {}

// SetFlush changes the flush policy (an altered topic config).
func (p *Partition) SetFlush(f FlushPolicy) {}

// Log is the local partition log, for reads.
func (p *Partition) Log() *partition.Log { return nil }

// Leadership returns the leader known, its epoch and whether it is us.
func (p *Partition) Leadership() (leader uint64, epoch int32, isLeader bool) { return }

// Changed returns a channel closed at the next change of role, leader or
// epoch (or at Close).
func (p *Partition) Changed() <-chan struct{} { return nil }

// Epochs lists the leader epochs in the log and where each starts.
func (p *Partition) Epochs() []partition.EpochStart { return nil }

// EndOffsetFor answers a consumer's OffsetForLeaderEpoch (clamped to the HW).
func (p *Partition) EndOffsetFor(epoch int32) (int32, int64) { return -1, -1 }

// CaughtUp reports whether this replica leads epoch and its HW has reached
// the start of that epoch (Kafka's test before answering OUT_OF_RANGE).
func (p *Partition) CaughtUp(epoch int32) bool { return false }

// Append appends a validated batch as the leader. acksAll asks for Kafka's
// min.insync.replicas check before the append (NOT_ENOUGH_REPLICAS). A
// refused batch comes back in the Appended's Result with its Kafka error.
func (p *Partition) Append(batch []byte, info partition.BatchInfo, acksAll bool) (*Appended, error) {
	return nil, ErrNotLeader
}

// AdvanceStart moves the log start (retention, DeleteRecords) on the
// leader; followers follow the leader's log start as they fetch.
func (p *Partition) AdvanceStart(offset int64) error { return ErrNotLeader }

// Status reports the replica's replication state.
func (p *Partition) Status() Status { return Status{} }

// Close stops the replica and closes its log; with purge it also deletes
// its directory.
func (p *Partition) Close(purge bool) error { return nil }

// Appended is a batch in the leader's log.
type Appended struct{}

// Result is what the append got (offsets, or for an idempotent retry the
// first ones, or a refusal).
func (a *Appended) Result() partition.ProduceResult { return partition.ProduceResult{} }

// Committed waits until the HW passes the batch and returns its result,
// with kerr.NotEnoughReplicasAfterAppend in Err if the ISR fell below
// min.insync.replicas meanwhile; ErrLeaderChanged if this replica stopped
// leading the batch's epoch first.
func (a *Appended) Committed(ctx context.Context) (partition.ProduceResult, error) {
	return partition.ProduceResult{}, ErrLeaderChanged
}
