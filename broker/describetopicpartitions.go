package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// serveDescribeTopicPartitions answers KIP-966's DescribeTopicPartitions,
// which Kafka's tools use in place of Metadata to describe topics: each
// partition as Metadata shows it, and for ISR partitions the ELR, which
// Metadata does not carry, and as the last known ELR the leader of last
// resort (coordinator.Partition.LastKnownLeader). Topics come in name
// order, all of them when none are named, at most ResponsePartitionLimit
// partitions per answer, and a cursor continues where the last answer
// stopped.
func (n *Node) serveDescribeTopicPartitions(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	st := n.meta.View()
	names := st.TopicNames()
	if len(r.Topics) > 0 {
		names = names[:0:0]
		for _, rt := range r.Topics {
			names = append(names, rt.Topic)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	limit := int(r.ResponsePartitionLimit)
	if limit <= 0 {
		limit = 2000
	}
	for _, name := range names {
		from := int32(0)
		if c := r.Cursor; c != nil {
			if name < c.Topic {
				continue
			}
			if name == c.Topic {
				from = c.Partition
			}
		}
		rt, next := n.describeTopicPartitions(st, name, from, limit)
		resp.Topics = append(resp.Topics, rt)
		limit -= len(rt.Partitions)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
		if limit == 0 {
			// Full: the next topic, if any, starts the next answer.
			if i := slices.Index(names, name); i+1 < len(names) {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: names[i+1]}
			}
			break
		}
	}
	return kafka.Ready(resp)
}

// describeTopicPartitions describes up to limit partitions of topic name
// from index from on; next is the first partition left out, or -1.
func (n *Node) describeTopicPartitions(st *coordinator.State, name string, from int32, limit int) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	rt.Topic = &name
	t, ok := st.Topics[name]
	if !ok {
		rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return rt, -1
	}
	rt.TopicID, rt.IsInternal = t.ID, t.Internal
	md := n.topicMetadata(st, t, 12)
	for i := int(max(from, 0)); i < len(md.Partitions); i++ {
		if len(rt.Partitions) == limit {
			return rt, int32(i)
		}
		rt.Partitions = append(rt.Partitions, describedPartition(md.Partitions[i], &t.Partitions[i]))
	}
	return rt, -1
}

func describedPartition(mp kmsg.MetadataResponseTopicPartition, p *coordinator.Partition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.ErrorCode, dp.Partition, dp.LeaderID, dp.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
	dp.Replicas, dp.ISR, dp.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
	dp.EligibleLeaderReplicas, dp.LastKnownELR = []int32{}, []int32{}
	for _, id := range p.ELR {
		dp.EligibleLeaderReplicas = append(dp.EligibleLeaderReplicas, int32(id))
	}
	if p.LastKnownLeader != 0 {
		dp.LastKnownELR = append(dp.LastKnownELR, int32(p.LastKnownLeader))
	}
	return dp
}
