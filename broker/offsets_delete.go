package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/transport/kafka"
)

// serveOffsetDelete deletes committed offsets of a group that is empty or
// does not subscribe to the topics (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
func (n *Node) serveOffsetDelete(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	coord, code := n.groupCoordinator(r.Group)
	if code != 0 {
		resp.ErrorCode = code
		return kafka.Ready(resp)
	}
	return runAsync(func() kmsg.Response {
		st := n.meta.View()
		var tps []groups.TopicPartition
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if topic := st.Topics[t.Topic]; topic != nil && p.Partition >= 0 && int(p.Partition) < len(topic.Partitions) {
					tps = append(tps, groups.TopicPartition{Topic: t.Topic, Partition: p.Partition})
				}
			}
		}
		code, per := coord.DeleteOffsets(r.Group, tps)
		resp.ErrorCode = code
		if code != 0 {
			return resp
		}
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				c, ok := per[groups.TopicPartition{Topic: t.Topic, Partition: p.Partition}]
				if !ok {
					c = kerr.UnknownTopicOrPartition.Code
				}
				rp.ErrorCode = c
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
}
