package broker

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/partition"
)

// replica is this node's replica of one partition. It is of one of three
// kinds, and exactly one of data, offsets and txns is set:
//   - a data partition: a partition log that the Kafka produce, fetch and
//     offset APIs serve through its replication;
//   - a __consumer_offsets partition: the consumer groups' state machine
//     and coordinator (group_coordinator.go), and no record log;
//   - a __transaction_state partition: the transaction coordinator's
//     state machine and coordinator (txn_coordinator.go), no record log.
type replica struct {
	topic   string
	topicID [16]byte
	index   int32
	gid     uint64
	dir     string
	lead    leaderView // the replication of either kind

	data    *dataPartition
	offsets *offsetsPartition
	txns    *txnPartition
}

// dataPartition is the produce side of a data partition replica.
type dataPartition struct {
	repl replication

	// maxBatchBytes is the largest batch produce takes (maxBatchBytes,
	// the function); larger ones are refused before they are appended.
	// applyTopicConfigs keeps it current.
	maxBatchBytes atomic.Int64
	// codec is the partition.Codec the topic's compression.type names,
	// or -1 for "producer"; applyTopicConfigs keeps it current.
	codec atomic.Int32
	// logAppendTime is set when the topic's message.timestamp.type is
	// LogAppendTime.
	logAppendTime atomic.Bool
	// compacted is set when the topic's cleanup.policy includes compact:
	// produce then refuses records without a key, as Kafka does.
	compacted atomic.Bool

	// produceMu orders appends: a connection's produce requests reach
	// the replication in the order they arrived.
	produceMu sync.Mutex
	stamped   int64     // last LogAppendTime given (guarded by produceMu)
	txnGuards txnGuards // KIP-890 verifications (produce_txn.go; guarded by produceMu)
}

// groupMarker names the raft group a partition directory belongs to, so
// that a directory left by a deleted topic of the same name is never
// mistaken for a new one's.
const groupMarker = "raft.group"

// openReplica opens (creating if new) the local replica of ref and starts
// its replication: the offsets topic's partitions as offsets partitions,
// every other as a data partition.
func (n *Node) openReplica(ref coordinator.PartitionRef) (*replica, error) {
	t, p := ref.Topic, ref.Partition
	r := &replica{topic: t.Name, topicID: t.ID, index: p.Index, gid: p.Group, dir: n.logDir(t.Name, p.Index)}
	if err := claimPartitionDir(r.dir, r.gid); err != nil {
		return nil, err
	}
	var err error
	switch t.Name {
	case groups.OffsetsTopic:
		r.offsets, err = n.openOffsetsPartition(ref)
		if err == nil {
			r.lead = r.offsets.group
		}
	case txns.TransactionTopic:
		r.txns, err = n.openTxnPartition(ref)
		if err == nil {
			r.lead = r.txns.group
		}
	default:
		r.data, err = n.openDataPartition(ref, r.dir)
		if err == nil {
			r.lead = r.data.repl
		}
	}
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", t.Name, p.Index, err)
	}
	return r, nil
}

// openDataPartition opens a data partition's log and starts its
// replication in the topic's replication.mode: a raft group, or an ISR
// replica (which takes its role at the reconcile that follows).
func (n *Node) openDataPartition(ref coordinator.PartitionRef, dir string) (*dataPartition, error) {
	t := ref.Topic
	var repl replication
	var err error
	if t.IsISR() {
		repl, err = n.openISRReplication(ref, dir)
	} else {
		cfg := partition.ReplicaConfig{Dir: dir, Log: n.logConfig(t), Logger: n.log.With("topic", t.Name, "partition", ref.Partition.Index)}
		repl, err = n.openRaftReplication(ref, cfg)
	}
	if err != nil {
		return nil, err
	}
	d := &dataPartition{repl: repl}
	d.setProduceLimits(t)
	return d, nil
}

// electionHold is how long this node's replica of a new group holds its
// election clock (raftgroup.GroupConfig.HoldElectionTicks) so that the
// preferred replica, replicas[0], leads it first even if this node created
// it sooner: two election timeouts, unless this node is the preferred
// replica or the metadata does not know the preferred broker alive (or
// has it in maintenance). A new
// partition whose preferred replica died unnoticed waits that much longer
// for a leader.
func electionHold(view *coordinator.State, replicas []uint64, self uint64, electionTicks int) int {
	if len(replicas) == 0 || replicas[0] == self {
		return 0
	}
	if b, ok := view.Brokers[replicas[0]]; !ok || !b.Alive || b.InMaintenance {
		return 0 // nobody to wait for
	}
	return 2 * electionTicks
}

// applyTopicConfigs brings an open replica up to its topic's configs, as
// an altered topic config takes effect in Kafka: the log's segment and
// retention limits, what produce checks (setProduceLimits) and, in ISR
// mode, the flush policy. The reconcile loop calls it on every metadata
// change.
func (n *Node) applyTopicConfigs(r *replica, t *coordinator.Topic) {
	if r.data == nil {
		return
	}
	r.data.setProduceLimits(t)
	if ir := r.isr(); ir != nil {
		ir.p.SetFlush(flushPolicy(t))
	}
	want := logConfig(t).Limits
	l := r.data.repl.Log()
	if l.Limits() == want {
		return
	}
	if err := l.SetLimits(want); err != nil {
		n.log.Warn("apply topic configs", "topic", r.topic, "partition", r.index, "err", err)
		return
	}
	n.log.Info("topic configs applied to the partition log", "topic", r.topic, "partition", r.index)
}

// setProduceLimits takes what produce checks before proposing from t's
// configs: the largest batch, the codec batches are stored in and whose
// clock timestamps them.
func (r *dataPartition) setProduceLimits(t *coordinator.Topic) {
	r.maxBatchBytes.Store(maxBatchBytes(t))
	codec := int32(-1)
	if c, ok := partition.ParseCodec(t.Config("compression.type")); ok {
		codec = int32(c)
	}
	r.codec.Store(codec)
	r.logAppendTime.Store(t.Config("message.timestamp.type") == "LogAppendTime")
	r.compacted.Store(compacted(t))
}

// stampTime gives a batch about to be proposed the topic's timestamp
// type, as Kafka's broker does. For LogAppendTime it stamps the batch with
// the leader's clock, never earlier than the last stamp, so that append
// times follow offsets; for CreateTime it clears a LogAppendTime flag the
// producer set. It returns the append time, or -1. produceMu held.
func (r *dataPartition) stampTime(batch []byte, info *partition.BatchInfo) int64 {
	if !r.logAppendTime.Load() {
		if info.LogAppendTime() {
			partition.ClearLogAppendTime(batch)
			info.Attributes &^= partition.AttrLogAppendTime
		}
		return -1
	}
	r.stamped = max(time.Now().UnixMilli(), r.stamped)
	partition.StampLogAppendTime(batch, r.stamped)
	info.Attributes |= partition.AttrLogAppendTime
	info.MaxTimestamp = r.stamped
	return r.stamped
}

// maxBatchBytes is the largest batch produce takes for t: its
// max.message.bytes, and no more than a segment holds (Kafka refuses a
// batch over segment.bytes too). The limit is checked before a batch is
// proposed, never at apply, where every replica must take what raft
// committed whatever its configs say at that moment.
func maxBatchBytes(t *coordinator.Topic) int64 {
	return min(t.ConfigInt("max.message.bytes"), t.ConfigInt("segment.bytes"))
}

// logConfig is the topic's log config on this node.
func (n *Node) logConfig(t *coordinator.Topic) partition.Config {
	c := logConfig(t)
	c.UnsafeSkipCRCChecks = n.cfg.UnsafeSkipCRCChecks
	return c
}

// logConfig turns a topic's configs into the partition log's. Values the
// coordinator accepts always give a valid log config: sizes are clamped
// to what a segment can index, and times too long for a time.Duration
// (Java's Long.MAX_VALUE, say) mean "never".
func logConfig(t *coordinator.Topic) partition.Config {
	c := partition.DefaultConfig()
	c.SegmentBytes = min(max(t.ConfigInt("segment.bytes"), partition.BatchHeaderSize), math.MaxInt32)
	c.SegmentAge = msDuration(t.ConfigInt("segment.ms"))
	c.IndexIntervalBytes = int(max(t.ConfigInt("index.interval.bytes"), 1))
	// The replica appends committed batches whatever their size
	// (AppendValidated); produce enforces maxBatchBytes before proposing.
	c.MaxBatchBytes = int(c.SegmentBytes)
	c.RetentionBytes = t.ConfigInt("retention.bytes")
	c.RetentionAge = msDuration(t.ConfigInt("retention.ms"))
	if !deletes(t) { // cleanup.policy=compact: the cleaner alone removes records
		c.RetentionBytes, c.RetentionAge = -1, 0
	}
	return c
}

// msDuration is a config's milliseconds as a duration: 0 (never) when not
// positive or too long to represent.
func msDuration(ms int64) time.Duration {
	if ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// claimPartitionDir makes dir belong to group gid, removing what another
// (deleted) group left there.
func claimPartitionDir(dir string, gid uint64) error {
	marker := filepath.Join(dir, groupMarker)
	b, err := os.ReadFile(marker)
	if err == nil {
		if got, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); perr == nil && got == gid {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove stale partition dir %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("partition dir %s: %w", dir, err)
	}
	return writeIdentityFile(marker, []byte(strconv.FormatUint(gid, 10)+"\n"))
}

func markerGroup(dir string) (uint64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, groupMarker))
	if err != nil {
		return 0, false
	}
	gid, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return gid, err == nil
}

// closeReplica stops the replica's replication and closes its local
// state; purge also removes its data.
func (n *Node) closeReplica(r *replica, purge bool) error {
	err := r.lead.remove(purge)
	if purge {
		if rerr := os.RemoveAll(r.dir); err == nil {
			err = rerr
		}
	}
	return err
}

// closeReplicas closes the local state of every replica, once Close has
// stopped the raft host (and with it every group).
func (n *Node) closeReplicas() error {
	n.mu.Lock()
	rs := n.replicas
	n.replicas = map[uint64]*replica{}
	n.mu.Unlock()
	var first error
	for _, r := range rs {
		if r.data == nil {
			continue
		}
		if err := r.data.repl.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// dataFor returns the local data partition replica of a topic partition,
// if any. internal reports a __consumer_offsets partition hosted here,
// which the data APIs answer as an empty partition: raftq keeps consumer
// group state in a state machine, not in a record log.
func (n *Node) dataFor(topic string, index int32) (r *replica, internal bool) {
	r = n.replicaFor(topic, index)
	if r != nil && r.data == nil {
		return nil, true
	}
	return r, false
}

// replicaFor returns the local replica of a topic partition, if any.
func (n *Node) replicaFor(topic string, index int32) *replica {
	ref, ok := n.partitionRef(topic, index)
	if !ok {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[ref.Partition.Group]
}

func (n *Node) partitionRef(topic string, index int32) (coordinator.PartitionRef, bool) {
	t, ok := n.meta.View().Topics[topic]
	if !ok || index < 0 || int(index) >= len(t.Partitions) {
		return coordinator.PartitionRef{}, false
	}
	return coordinator.PartitionRef{Topic: t, Partition: &t.Partitions[index]}, true
}

func (n *Node) replicaList() []*replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*replica, 0, len(n.replicas))
	for _, r := range n.replicas {
		out = append(out, r)
	}
	return out
}

// size is the bytes of the replica's record log on disk (none for an
// offsets partition).
func (r *replica) size() int64 {
	if r.data == nil {
		return 0
	}
	return r.data.repl.Log().Size()
}
