package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveDeleteRecords moves log start offsets forward. The leader proposes
// the move, so every replica applies the same one.
func (n *Node) serveDeleteRecords(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DeleteRecordsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(r.TimeoutMillis))
		defer cancel()
		resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				st.Partitions = append(st.Partitions, n.deleteRecords(ctx, rt.Topic, rp))
			}
			resp.Topics = append(resp.Topics, st)
		}
		f.Complete(resp, nil)
	}()
	return f
}

func (n *Node) deleteRecords(ctx context.Context, topic string, rp kmsg.DeleteRecordsRequestTopicPartition) kmsg.DeleteRecordsResponseTopicPartition {
	sp := kmsg.NewDeleteRecordsResponseTopicPartition()
	sp.Partition, sp.LowWatermark = rp.Partition, -1
	repl, code := n.leaderReplica(topic, rp.Partition, -1)
	if code != 0 {
		sp.ErrorCode = code
		return sp
	}
	if repl == nil {
		sp.ErrorCode = kerr.PolicyViolation.Code // __consumer_offsets: as Kafka, no deleting records of an internal topic
		return sp
	}
	l := repl.Log()
	off := rp.Offset
	if off == -1 {
		off = l.HighWatermark()
	}
	if off < 0 || off > l.HighWatermark() {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return sp
	}
	if err := repl.AdvanceStart(ctx, off); err != nil {
		sp.ErrorCode = replicationErrCode(err)
		return sp
	}
	sp.LowWatermark = l.StartOffset()
	return sp
}
