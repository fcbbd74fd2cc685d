package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/transport/kafka"
)

// serveTxnOffsetCommit (key 28, v0-v3) leaves a transaction's offsets
// pending at the group's coordinator once its offsets partition has
// committed them; the transaction's marker (txn_markers.go) later commits
// or drops them. Partitions of unknown topics and oversized metadata are
// refused here, each on its own; the rest share the coordinator's
// verdict: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, KIP-447's
// ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID (v3), and
// INVALID_PRODUCER_EPOCH for an epoch older than the offsets partition
// has seen from the producer. As Kafka 3.x, the transaction coordinator is not asked
// whether AddOffsetsToTxn added the group (KIP-890 part 2 would).
func (n *Node) serveTxnOffsetCommit(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	coord, code := n.groupCoordinator(r.Group)
	if code != 0 || r.Group == "" {
		if r.Group == "" {
			code = kerr.InvalidGroupID.Code
		}
		fillTxnCommit(r, resp, func(int, int) int16 { return code })
		return kafka.Ready(resp)
	}
	return runAsync(func() kmsg.Response {
		pre, tr := n.txnCommitRequest(r)
		verdict := coord.TxnCommit(tr)
		fillTxnCommit(r, resp, func(i, j int) int16 {
			if c := pre[i][j]; c != 0 {
				return c
			}
			return verdict
		})
		return resp
	})
}

// txnCommitRequest sorts the partitions as commitRequest does: pre holds
// the code of each one refused here (0: passed on).
func (n *Node) txnCommitRequest(r *kmsg.TxnOffsetCommitRequest) ([][]int16, groups.TxnCommitRequest) {
	tr := groups.TxnCommitRequest{TransactionalID: r.TransactionalID, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch,
		Group: r.Group, Generation: r.Generation, MemberID: r.MemberID}
	if r.Version < 3 {
		tr.Generation, tr.MemberID = -1, "" // KIP-447's checks are v3's
	}
	if r.InstanceID != nil && r.Version >= 3 {
		tr.InstanceID = *r.InstanceID
	}
	st := n.meta.View()
	pre := make([][]int16, len(r.Topics))
	for i, t := range r.Topics {
		pre[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			var o groups.CommitOffset
			if o, pre[i][j] = commitOffset(st, t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata); pre[i][j] == 0 {
				tr.Offsets = append(tr.Offsets, o)
			}
		}
	}
	return pre, tr
}

func fillTxnCommit(r *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse, code func(i, j int) int16) {
	for i, t := range r.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = t.Topic
		for j, p := range t.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code(i, j)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}
