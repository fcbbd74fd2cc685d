package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/transport/kafka"
)

// serveAddPartitionsToTxn adds partitions to transactions: v0-v3 one
// transaction (the client's form), v4+ a batch of transactions, each
// possibly verify-only (KIP-890's broker-to-broker form, which partition
// leaders send before a transactional produce: askTxnCoordinator). A
// transaction naming an unknown topic or partition gets
// UNKNOWN_TOPIC_OR_PARTITION for it and OPERATION_NOT_ATTEMPTED for the
// rest, and nothing is proposed, as Kafka answers.
func (n *Node) serveAddPartitionsToTxn(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	reqs := r.Transactions
	if r.Version < 4 {
		t := kmsg.NewAddPartitionsToTxnRequestTransaction()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch = r.TransactionalID, r.ProducerID, r.ProducerEpoch
		for _, rt := range r.Topics {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = rt.Topic, rt.Partitions
			t.Topics = append(t.Topics, tt)
		}
		reqs = []kmsg.AddPartitionsToTxnRequestTransaction{t}
	}
	return runAsync(func() kmsg.Response {
		res := n.addPartitionsToTxns(c.Context(), r.Version, reqs)
		if r.Version >= 4 {
			resp.Transactions = res
			return resp
		}
		for _, rt := range res[0].Topics {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, rp.ErrorCode
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	})
}

// addPartitionsToTxns answers each transaction of an AddPartitionsToTxn
// request, in order: those this node coordinates in one proposal per
// transaction partition, the others with the lookup's error.
func (n *Node) addPartitionsToTxns(ctx context.Context, version int16, reqs []kmsg.AddPartitionsToTxnRequestTransaction) []kmsg.AddPartitionsToTxnResponseTransaction {
	results := make([]txns.TxnResult, len(reqs))
	type batch struct {
		idx  []int
		txns []txns.AddTxn
	}
	batches := map[*txns.Coordinator]*batch{}
	for i, rt := range reqs {
		a := txns.AddTxn{TransactionalID: rt.TransactionalID, ProducerID: rt.ProducerID, ProducerEpoch: rt.ProducerEpoch,
			VerifyOnly: rt.VerifyOnly, Partitions: txns.Partitions{}}
		for _, t := range rt.Topics {
			a.Partitions[t.Topic] = append(a.Partitions[t.Topic], t.Partitions...)
		}
		if rt.TransactionalID == "" {
			results[i] = uniformTxnResult(a, kerr.InvalidRequest.Code)
			continue
		}
		if res, ok := n.unknownTxnPartitions(a); !ok {
			results[i] = res
			continue
		}
		coord, code := n.txnCoordinator(rt.TransactionalID)
		if code != 0 {
			results[i] = uniformTxnResult(a, code)
			continue
		}
		b := batches[coord]
		if b == nil {
			b = &batch{}
			batches[coord] = b
		}
		b.idx, b.txns = append(b.idx, i), append(b.txns, a)
	}
	for coord, b := range batches {
		for j, res := range coord.AddPartitions(ctx, b.txns) {
			results[b.idx[j]] = res
		}
	}
	out := make([]kmsg.AddPartitionsToTxnResponseTransaction, len(reqs))
	for i, rt := range reqs {
		out[i] = txnResponse(rt, results[i], version)
	}
	return out
}

// unknownTxnPartitions reports false, with the answer, when a names a
// topic or partition that does not exist.
func (n *Node) unknownTxnPartitions(a txns.AddTxn) (txns.TxnResult, bool) {
	res := uniformTxnResult(a, kerr.OperationNotAttempted.Code)
	ok := true
	for topic, ps := range a.Partitions {
		for _, p := range ps {
			if _, known := n.partitionRef(topic, p); !known {
				res.Partitions[topic][p], ok = kerr.UnknownTopicOrPartition.Code, false
			}
		}
	}
	return res, ok
}

// uniformTxnResult answers every partition of a with code.
func uniformTxnResult(a txns.AddTxn, code int16) txns.TxnResult {
	res := txns.TxnResult{TransactionalID: a.TransactionalID, Code: code, Partitions: map[string]map[int32]int16{}}
	for topic, ps := range a.Partitions {
		res.Partitions[topic] = map[int32]int16{}
		for _, p := range ps {
			res.Partitions[topic][p] = code
		}
	}
	return res
}

// txnResponse is a transaction's answer in the request's topic and
// partition order, each code as the request version knows it.
func txnResponse(rt kmsg.AddPartitionsToTxnRequestTransaction, res txns.TxnResult, version int16) kmsg.AddPartitionsToTxnResponseTransaction {
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = rt.TransactionalID
	for _, t := range rt.Topics {
		ot := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			code, ok := res.Partitions[t.Topic][p]
			if !ok {
				code = res.Code
			}
			op := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			op.Partition, op.ErrorCode = p, txns.ClientCode(code, kmsg.AddPartitionsToTxn.Int16(), version)
			ot.Partitions = append(ot.Partitions, op)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}

// serveAddOffsetsToTxn adds a consumer group to a transaction, so that
// its transactional offsets commit or abort with it.
func (n *Node) serveAddOffsetsToTxn(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	coord, code := n.txnCoordinatorOf(r.TransactionalID)
	if code != 0 {
		resp.ErrorCode = code
		return kafka.Ready(resp)
	}
	return runAsync(func() kmsg.Response {
		code := coord.AddOffsets(c.Context(), r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group)
		resp.ErrorCode = txns.ClientCode(code, r.Key(), r.Version)
		return resp
	})
}

// serveEndTxn commits or aborts a transaction: answered once
// PrepareCommit or PrepareAbort is replicated; the coordinator then
// writes the markers until done (txn_markers_send.go). Served up to v4: v5 is
// KIP-890 part 2, which the state machine does not model.
func (n *Node) serveEndTxn(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	coord, code := n.txnCoordinatorOf(r.TransactionalID)
	if code != 0 {
		resp.ErrorCode = code
		return kafka.Ready(resp)
	}
	return runAsync(func() kmsg.Response {
		code := coord.EndTxn(c.Context(), r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
		resp.ErrorCode = txns.ClientCode(code, r.Key(), r.Version)
		return resp
	})
}

// txnCoordinatorOf is txnCoordinator, with INVALID_REQUEST for an empty
// transactional id.
func (n *Node) txnCoordinatorOf(id string) (*txns.Coordinator, int16) {
	if id == "" {
		return nil, kerr.InvalidRequest.Code
	}
	return n.txnCoordinator(id)
}
