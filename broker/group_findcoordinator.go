package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/transport/kafka"
)

// serveFindCoordinator names the coordinator of each group (key type 0)
// or transactional id (key type 1): the leader of the __consumer_offsets
// or __transaction_state partition the key hashes to (Kafka's hash, so
// tools that compute it agree). This node's own raft status wins over the
// metadata's leadership hint, which may trail an election.
func (n *Node) serveFindCoordinator(conn *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if r.Version < 4 {
		c := n.findCoordinator(r.CoordinatorKey, r.CoordinatorType, conn.Listener())
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		return kafka.Ready(resp)
	}
	for _, key := range r.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, n.findCoordinator(key, r.CoordinatorType, conn.Listener()))
	}
	return kafka.Ready(resp)
}

func (n *Node) findCoordinator(key string, keyType int8, listener string) kmsg.FindCoordinatorResponseCoordinator {
	out := kmsg.NewFindCoordinatorResponseCoordinator()
	out.Key, out.NodeID = key, -1
	fail := func(e *kerr.Error, msg string) kmsg.FindCoordinatorResponseCoordinator {
		out.ErrorCode, out.ErrorMessage = e.Code, &msg
		return out
	}
	var topic, what string
	var create func()
	partitionFor := groups.PartitionFor
	switch keyType {
	case 0:
		topic, what, create = groups.OffsetsTopic, "group's offsets", n.requestOffsetsTopic
	case 1:
		if key == "" {
			return fail(kerr.InvalidRequest, "empty transactional id")
		}
		topic, what, create = txns.TransactionTopic, "transactional id's transaction state", n.requestTxnTopic
		partitionFor = txns.PartitionFor
	default:
		return fail(kerr.InvalidRequest, "raftq coordinates consumer groups (key type 0) and transactions (key type 1) only")
	}
	st := n.meta.View()
	t, ok := st.Topics[topic]
	if !ok || len(t.Partitions) == 0 {
		create()
		return fail(kerr.CoordinatorNotAvailable, "the "+topic+" topic is being created")
	}
	idx := partitionFor(key, int32(len(t.Partitions)))
	leader := uint64(0)
	if r := n.replicaFor(topic, idx); r != nil {
		leader = r.lead.Leadership().Leader
	}
	if leader == 0 {
		leader = t.Partitions[idx].Leader
	}
	b := st.Brokers[leader]
	if b == nil || !b.Alive {
		return fail(kerr.CoordinatorNotAvailable, "the "+what+" partition has no live leader")
	}
	out.NodeID = int32(leader)
	out.Host, out.Port = splitHostPort(b.AddrFor(listener))
	return out
}
