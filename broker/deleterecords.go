package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
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
	rep := n.replicaFor(topic, rp.Partition)
	if rep == nil {
		sp.ErrorCode = n.noReplicaCode(topic, rp.Partition, 0)
		return sp
	}
	if !rep.group.Status().IsLeader() {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return sp
	}
	l := rep.sm.Log()
	off := rp.Offset
	if off == -1 {
		off = l.HighWatermark()
	}
	if off < 0 || off > l.HighWatermark() {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return sp
	}
	if code := n.advanceStart(ctx, rep, off); code != 0 {
		sp.ErrorCode = code
		return sp
	}
	sp.LowWatermark = l.StartOffset()
	return sp
}

// advanceStart proposes a new log start offset and waits for its apply.
func (n *Node) advanceStart(ctx context.Context, rep *replica, off int64) int16 {
	p, err := rep.group.Propose(ctx, partition.AdvanceStartEntry(off))
	if err != nil {
		return proposeErrCode(err)
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return proposeErrCode(err)
	}
	if e, ok := res.Value.(error); ok && e != nil {
		return errCode(e)
	}
	return 0
}
