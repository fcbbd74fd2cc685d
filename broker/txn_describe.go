package broker

import (
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/transport/kafka"
)

// serveDescribeTransactions describes each transactional id this node
// coordinates, from the replicated state its coordinator applied; for
// another id the lookup's error (NOT_COORDINATOR and the like), so the
// admin client asks the right node.
func (n *Node) serveDescribeTransactions(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		ds := kmsg.NewDescribeTransactionsResponseTransactionState()
		ds.TransactionalID, ds.ProducerID, ds.ProducerEpoch, ds.StartTimestamp = id, -1, -1, -1
		if !n.allowed(c, r.Key(), kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, id) { // authorize.go
			ds.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, ds)
			continue
		}
		coord, code := n.txnCoordinatorOf(id)
		var t *txns.Txn
		if code == 0 {
			t, code = coord.Machine().Describe(id)
		}
		ds.ErrorCode = code
		if t != nil {
			ds.State, ds.TimeoutMillis, ds.StartTimestamp = string(t.State), t.TimeoutMs, t.StartMs
			ds.ProducerID, ds.ProducerEpoch = t.ProducerID, t.ProducerEpoch
			for _, topic := range t.Partitions.Topics() {
				dt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				dt.Topic, dt.Partitions = topic, t.Partitions[topic]
				ds.Topics = append(ds.Topics, dt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, ds)
	}
	return kafka.Ready(resp)
}

// serveListTransactions lists the transactions of every transaction
// partition this node coordinates, filtered by state, producer id, (v1+)
// how long they have been open and (v2+) an RE2 pattern of their ids. A
// partition this node leads that is still loading makes the answer
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers.
func (n *Node) serveListTransactions(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txns.ListFilter{ProducerIDs: r.ProducerIDFilters}
	for _, s := range r.StateFilters {
		if st := txns.State(s); slices.Contains(txns.States, st) {
			f.States = append(f.States, st)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	if len(r.StateFilters) > 0 && len(f.States) == 0 {
		return kafka.Ready(resp) // only unknown states: nothing matches
	}
	if r.Version >= 1 && r.DurationFilterMillis >= 0 {
		f.MinDurationMs = &r.DurationFilterMillis
	}
	if r.Version >= 2 && r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*r.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return kafka.Ready(resp)
		}
		f.IDPattern = re
	}
	coords, loading := n.localTxnCoordinators()
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return kafka.Ready(resp)
	}
	for _, c := range coords {
		f.NowMs = time.Now().UnixMilli()
		for _, t := range c.Machine().List(f) {
			lt := kmsg.NewListTransactionsResponseTransactionState()
			lt.TransactionalID, lt.ProducerID, lt.TransactionState = t.ID, t.ProducerID, string(t.State)
			resp.TransactionStates = append(resp.TransactionStates, lt)
		}
	}
	return kafka.Ready(resp)
}
