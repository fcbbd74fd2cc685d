package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveDescribeProducers reports, from each partition's leader, the
// producers its replica remembers: epoch, last sequence and timestamp,
// and the first offset of the transaction each has open there (-1 for
// none). The coordinator epoch of a producer's last marker is not kept
// (partition.ProducerState), so it is -1, as Kafka answers for a producer
// that never saw one.
func (n *Node) serveDescribeProducers(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			st.Partitions = append(st.Partitions, n.describeProducers(rt.Topic, p))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kafka.Ready(resp)
}

func (n *Node) describeProducers(topic string, index int32) kmsg.DescribeProducersResponseTopicPartition {
	sp := kmsg.NewDescribeProducersResponseTopicPartition()
	sp.Partition = index
	repl, code := n.leaderReplica(topic, index, -1)
	if code != 0 || repl == nil { // repl nil: __consumer_offsets, no producers
		sp.ErrorCode = code
		return sp
	}
	open := map[int64]int64{}
	for _, t := range repl.Log().OngoingTransactions() {
		open[t.ProducerID] = t.FirstOffset
	}
	for _, p := range repl.Producers() {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch = p.ProducerID, int32(p.Epoch)
		ap.LastSequence, ap.LastTimestamp, ap.CoordinatorEpoch = p.LastSequence, p.LastTimestamp, -1
		ap.CurrentTxnStartOffset = -1
		if first, ok := open[p.ProducerID]; ok {
			ap.CurrentTxnStartOffset = first
		}
		sp.ActiveProducers = append(sp.ActiveProducers, ap)
	}
	return sp
}
