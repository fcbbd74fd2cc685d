package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/transport/kafka"
)

// serveFindCoordinator names the coordinator of each group: the leader of
// the __consumer_offsets partition the group hashes to (Kafka's hash, so
// tools that compute it agree). This node's own raft status wins over the
// metadata's leadership hint, which may trail an election.
func (n *Node) serveFindCoordinator(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if r.Version < 4 {
		c := n.findCoordinator(r.CoordinatorKey, r.CoordinatorType)
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		return kafka.Ready(resp)
	}
	for _, key := range r.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, n.findCoordinator(key, r.CoordinatorType))
	}
	return kafka.Ready(resp)
}

func (n *Node) findCoordinator(key string, keyType int8) kmsg.FindCoordinatorResponseCoordinator {
	out := kmsg.NewFindCoordinatorResponseCoordinator()
	out.Key, out.NodeID = key, -1
	fail := func(e *kerr.Error, msg string) kmsg.FindCoordinatorResponseCoordinator {
		out.ErrorCode, out.ErrorMessage = e.Code, &msg
		return out
	}
	switch keyType {
	case 0:
	case 1:
		// Until transactions exist: an error that franz-go, librdkafka
		// and the Java client treat as fatal for a transactional
		// coordinator lookup, so a transactional producer fails at once
		// instead of retrying until its timeout.
		return fail(kerr.TransactionalIDAuthorizationFailed, errNoTransactions)
	default:
		return fail(kerr.InvalidRequest, "raftq coordinates consumer groups only (key type 0)")
	}
	st := n.meta.View()
	t, ok := st.Topics[groups.OffsetsTopic]
	if !ok || len(t.Partitions) == 0 {
		n.requestOffsetsTopic()
		return fail(kerr.CoordinatorNotAvailable, "the consumer offsets topic is being created")
	}
	idx := groups.PartitionFor(key, int32(len(t.Partitions)))
	leader := uint64(0)
	if r := n.replicaFor(groups.OffsetsTopic, idx); r != nil {
		leader = r.lead.Leadership().Leader
	}
	if leader == 0 {
		leader = t.Partitions[idx].Leader
	}
	b := st.Brokers[leader]
	if b == nil || !b.Alive {
		return fail(kerr.CoordinatorNotAvailable, "the group's offsets partition has no live leader")
	}
	out.NodeID = int32(leader)
	out.Host, out.Port = splitHostPort(b.KafkaAddr)
	return out
}
