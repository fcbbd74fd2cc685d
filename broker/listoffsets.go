package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// maxTimestamp is ListOffsets' "offset of the largest timestamp" (v7+).
const maxTimestamp int64 = -3

// serveListOffsets answers earliest, latest and by-timestamp lookups from
// the partition leader, up to its high watermark (READ_COMMITTED: its last
// stable offset).
func (n *Node) serveListOffsets(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for j := range rt.Partitions {
			st.Partitions = append(st.Partitions, n.listOffset(r, rt.Topic, &rt.Partitions[j]))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kafka.Ready(resp)
}

func (n *Node) listOffset(r *kmsg.ListOffsetsRequest, topic string, rp *kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
	sp := kmsg.NewListOffsetsResponseTopicPartition()
	sp.Partition, sp.Timestamp, sp.Offset, sp.LeaderEpoch = rp.Partition, -1, -1, -1
	repl, code := n.leaderReplica(topic, rp.Partition, rp.CurrentLeaderEpoch)
	if code != 0 {
		sp.ErrorCode = code
		return sp
	}
	if repl == nil { // __consumer_offsets: an empty log
		sp.Offset, sp.OldStyleOffsets = 0, oldStyle(r, 0)
		return sp
	}
	ts := rp.Timestamp
	if ts == maxTimestamp {
		ts = partition.ListLatest // no separate max-timestamp index; the latest is a fair answer
	}
	// Checked before the high watermark is read: see replication.CaughtUp.
	if ts == partition.ListLatest && !repl.CaughtUp(repl.Leadership().Epoch) {
		// A new leader whose high watermark has not reached its epoch's
		// start may show one below what its predecessor did (Kafka
		// answers the same, KIP-392); clients retry.
		sp.ErrorCode = kerr.OffsetNotAvailable.Code
		return sp
	}
	l := repl.Log()
	isolation := partition.ReadUncommitted
	if r.Version >= 2 {
		isolation = r.IsolationLevel
	}
	// READ_COMMITTED answers the LSO for latest, and looks timestamps
	// up below it, as Kafka does.
	off, at, err := l.ListOffset(ts, l.ReadLimit(isolation))
	if err != nil {
		sp.ErrorCode = partition.ErrorCode(err)
		return sp
	}
	sp.Offset, sp.Timestamp = off, at
	if off >= 0 {
		sp.LeaderEpoch = epochAt(repl.Epochs(), off)
	}
	sp.OldStyleOffsets = oldStyle(r, off)
	return sp
}

// oldStyle is v0's list of offsets.
func oldStyle(r *kmsg.ListOffsetsRequest, off int64) []int64 {
	if r.Version == 0 {
		return []int64{off}
	}
	return nil
}

// epochAt returns the leader epoch in force at offset.
func epochAt(eps []partition.EpochStart, offset int64) int32 {
	e := int32(-1)
	for _, s := range eps {
		if s.StartOffset > offset {
			break
		}
		e = s.Epoch
	}
	return e
}

// leaderReplica returns the replication of a local data partition for a
// request that only its leader answers, or the error code that refuses
// it: unknown partition, no local replica, not the leader, or a client
// epoch that is stale or ahead (currentEpoch -1 skips the check). For a
// __consumer_offsets partition that this node leads it returns nil and
// no error: the caller answers as for an empty log (Node.dataFor).
func (n *Node) leaderReplica(topic string, partition, currentEpoch int32) (replication, int16) {
	rep, internal := n.dataFor(topic, partition)
	var lead leaderView
	var repl replication
	switch {
	case internal:
		lead = n.replicaFor(topic, partition).lead
	case rep == nil:
		return nil, n.noReplicaCode(topic, partition, 0)
	default:
		repl = rep.data.repl
		lead = repl
	}
	st := lead.Leadership()
	if !st.IsLeader {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return repl, epochCheck(currentEpoch, st.Epoch)
}
