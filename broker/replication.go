package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/partition"
)

// The Kafka API files see a partition's replication only through the
// interfaces below, as Redpanda's Kafka layer sees only partition_proxy:
// who leads and at which epoch, the local log, and an append with two
// stages. Each replication mode implements them (raft: replication_raft.go);
// nothing of a mode's own machinery (terms, proposals, fetchers) shows here.

// leadership is a replica's view of who leads its partition.
type leadership struct {
	Leader   uint64 // 0: none known
	Epoch    int32  // the leader epoch this replica knows (raft: the term)
	IsLeader bool
	// Settling means leadership is changing: no leader is known (an
	// election) or the leader is handing over (a transfer, during which
	// it takes no appends). It ends within an election timeout or two.
	Settling bool
}

// leaderView is what every hosted replica, of either kind, tells about
// leadership; the hint, balance, metrics and status code walk both kinds
// through it.
type leaderView interface {
	Leadership() leadership
	// WaitSettled waits until Settling is false or ctx ends, and returns
	// the latest leadership.
	WaitSettled(ctx context.Context) leadership
	// TransferLeadership hands leadership to node to and waits for it.
	TransferLeadership(ctx context.Context, to uint64) error
	// successor is the node of candidates (eligible replicas, in
	// preference order) to hand this leader's partition to when the node
	// drains (drain.go), or 0 for none, or when the mode's leadership does
	// not move by hand-over to any replica (ISR: group 0 elects at the
	// node's controlled shutdown).
	successor(candidates []uint64) uint64
	// describe reports the replica's replication state for /v1/status
	// and metrics.
	describe() GroupStatus
	// remove stops the replica's replication and closes its local state;
	// purge also deletes the replication's own data.
	remove(purge bool) error
}

// replication is a data partition's replication, as its Kafka APIs use it.
//
// Offsets below the high watermark of Log are committed: every replica
// that the mode could elect holds them, and consumers read up to it on
// every replica. Append is called with the partition's produce lock held,
// so appends reach the log in the order produce requests arrived.
type replication interface {
	leaderView
	// Log is the local partition log: reads, high watermark, log start.
	Log() *partition.Log
	// Epochs lists the leader epochs and where each began in the log.
	Epochs() []partition.EpochStart
	// Producers summarises the idempotent producers the replica
	// remembers (DescribeProducers).
	Producers() []partition.ProducerInfo
	// EndOffsetFor answers OffsetForLeaderEpoch: the largest epoch <= epoch
	// that the log knows and the offset where it ended.
	EndOffsetFor(epoch int32) (int32, int64)
	// CaughtUp reports whether this replica, leading at epoch, has a
	// high watermark at least as high as any earlier leader showed: only
	// then is an offset above it out of range rather than not yet there.
	// It never turns false again within an epoch, so callers check it
	// before they read the high watermark they compare with.
	CaughtUp(epoch int32) bool
	// AwaitLeading waits, until ctx ends, while this replica has yet to
	// take a leadership that its node's metadata already gives it (ISR:
	// reconcile has still to pass on group 0's election, moments away),
	// and returns the leadership it ends with. A produce that arrives in
	// that moment is then appended, not sent back to the old leader that
	// just sent its client here, whose client would back off. A mode
	// whose replicas elect themselves (raft) returns at once.
	AwaitLeading(ctx context.Context) leadership
	// Append replicates one validated batch. It fails at once with
	// errNotLeader when this replica does not lead. acksAll says the
	// producer waits for the commit (acks=all): a mode that refuses such
	// a batch before appending it (ISR below min.insync.replicas:
	// NOT_ENOUGH_REPLICAS) does so here; raft ignores it.
	Append(ctx context.Context, batch []byte, info partition.BatchInfo, acksAll bool) (pendingAppend, error)
	// AdvanceStart moves the log start offset forward on every replica
	// (retention, DeleteRecords) and waits until this replica has moved.
	AdvanceStart(ctx context.Context, offset int64) error
	// Close closes the local state of a replica whose replication the
	// node has already stopped (Node.Close).
	Close() error
}

// pendingAppend is an append under way.
type pendingAppend interface {
	// Appended waits until the batch is durable in the leader's own log
	// (acks=1) and returns its base offset if the mode knows it at that
	// stage, or -1 if only Committed can tell.
	Appended(ctx context.Context) (base int64, err error)
	// Committed waits until the batch is committed and returns what it
	// got: its offsets, or for an idempotent retry the first ones, or the
	// Kafka error that refused it.
	Committed(ctx context.Context) (partition.ProduceResult, error)
}

// Replication failures, as every mode reports them (wrapping the mode's
// own error). A context's error passes through as it is.
var (
	// errNotLeader: this replica does not lead; nothing was appended.
	errNotLeader = errors.New("broker: not the partition leader")
	// errAppendLost: the batch reached the leader's log, but a new leader
	// replaced it there; it will never commit.
	errAppendLost = errors.New("broker: append lost to a new leader")
	// errAppendRefused: the leader refused the batch for now (a transfer
	// under way, too much uncommitted); it is in no log.
	errAppendRefused = errors.New("broker: append refused for now")
	// errLeadershipLost: the leader stepped down with the batch in its
	// log, unapplied; it may still commit under the next leader. It is
	// answered REQUEST_TIMED_OUT, not NOT_LEADER_OR_FOLLOWER
	// (answerFailed): franz-go takes NOT_LEADER to mean the batch is in
	// no log, and may then fail a record whose delivery timed out and
	// give its sequence number to the next one, which the partition
	// would take for a retry of this batch if it commits: a record
	// acknowledged and never written.
	errLeadershipLost = errors.New("broker: leadership lost before the append committed")
	// errOutcomeUnknown: the batch may or may not commit.
	errOutcomeUnknown = errors.New("broker: append outcome unknown")
	// errReplicaStopped: the replica was closed or halted.
	errReplicaStopped = errors.New("broker: replica stopped")
)

// isLeadershipLoss reports whether an append failed because leadership
// changed (or is changing) under it.
func isLeadershipLoss(err error) bool {
	return errors.Is(err, errNotLeader) || errors.Is(err, errAppendLost) || errors.Is(err, errAppendRefused) ||
		errors.Is(err, errLeadershipLost)
}

// replicationErrCode maps a replication failure to a retriable Kafka
// error: the client refreshes metadata and retries on the leader.
func replicationErrCode(err error) int16 {
	switch {
	case errors.Is(err, errNotLeader), errors.Is(err, errAppendLost):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, errOutcomeUnknown), errors.Is(err, errLeadershipLost):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, errAppendRefused):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, errReplicaStopped):
		return kerr.KafkaStorageError.Code
	}
	return errCode(err)
}
