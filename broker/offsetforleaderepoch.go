package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveOffsetForLeaderEpoch answers from the partition's epoch starts,
// which are raft term boundaries: a consumer that saw epoch E learns where
// E ended, and so whether the log it read was truncated since.
func (n *Node) serveOffsetForLeaderEpoch(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for j := range rt.Partitions {
			st.Partitions = append(st.Partitions, n.epochEnd(rt.Topic, &rt.Partitions[j]))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kafka.Ready(resp)
}

func (n *Node) epochEnd(topic string, rp *kmsg.OffsetForLeaderEpochRequestTopicPartition) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
	repl, code := n.leaderReplica(topic, rp.Partition, rp.CurrentLeaderEpoch)
	if code != 0 {
		sp.ErrorCode = code
		return sp
	}
	if repl != nil { // else __consumer_offsets: an empty log knows no epoch
		sp.LeaderEpoch, sp.EndOffset = repl.EndOffsetFor(rp.LeaderEpoch)
	}
	return sp
}
