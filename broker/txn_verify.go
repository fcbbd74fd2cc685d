package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/txns"
)

// verifyTimeout bounds one verification, local or remote.
const verifyTimeout = 5 * time.Second

// askTxnCoordinator is KIP-890's check before a transactional produce (Kafka's
// AddPartitionsToTxnManager): is topic-partition in the ongoing
// transaction of transactionalID at producerID and epoch? It asks the
// id's coordinator: this node's through the log (a verify-only
// AddPartitions proposal, so a deposed leader cannot answer from stale
// state), or another node's with AddPartitionsToTxn v4+ verify-only over
// the Kafka protocol. It returns the coordinator's code for the
// partition: NONE when it is in the transaction, TRANSACTION_ABORTABLE
// when it is not, the producer's errors (PRODUCER_FENCED,
// INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS) as the
// coordinator answers them; and NOT_ENOUGH_REPLICAS, retriable for every
// producer, when no coordinator could answer (none known, loading,
// moved, unreachable), as Kafka maps those.
func (n *Node) askTxnCoordinator(ctx context.Context, transactionalID string, producerID int64, epoch int16, topic string, partition int32) int16 {
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	a := txns.AddTxn{TransactionalID: transactionalID, ProducerID: producerID, ProducerEpoch: epoch, VerifyOnly: true,
		Partitions: txns.Partitions{topic: {partition}}}
	code := kerr.NotCoordinator.Code
	if transactionalID != "" {
		var coord *txns.Coordinator
		if coord, code = n.txnCoordinator(transactionalID); code == 0 {
			code = partitionCode(coord.AddPartitions(ctx, []txns.AddTxn{a}), topic, partition)
		} else if code == kerr.NotCoordinator.Code {
			code = n.verifyTxnRemote(ctx, a, topic, partition)
		}
	}
	return verifyCode(code)
}

// verifyCode maps a coordinator's unavailability to NOT_ENOUGH_REPLICAS.
func verifyCode(code int16) int16 {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.RequestTimedOut.Code, kerr.UnknownServerError.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}

func partitionCode(res []txns.TxnResult, topic string, partition int32) int16 {
	if len(res) != 1 {
		return kerr.UnknownServerError.Code
	}
	if code, ok := res[0].Partitions[topic][partition]; ok {
		return code
	}
	return res[0].Code
}

// verifyTxnRemote sends the verification to the node that leads the
// id's transaction partition.
func (n *Node) verifyTxnRemote(ctx context.Context, a txns.AddTxn, topic string, partition int32) int16 {
	st := n.meta.View()
	t := st.Topics[txns.TransactionTopic]
	if t == nil || len(t.Partitions) == 0 {
		return kerr.CoordinatorNotAvailable.Code
	}
	leader, _ := n.leaderOf(&t.Partitions[txns.PartitionFor(a.TransactionalID, int32(len(t.Partitions)))])
	b := st.Brokers[leader]
	if b == nil || !b.Alive || leader == n.cfg.NodeID {
		return kerr.CoordinatorNotAvailable.Code
	}
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = a.TransactionalID, a.ProducerID, a.ProducerEpoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = topic, []int32{partition}
	rt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{tt}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{rt}
	kresp, err := n.brokerRequest(ctx, n.interBrokerAddr(b), req)
	if err != nil {
		n.log.Debug("transaction verification not answered", "transactional_id", a.TransactionalID, "coordinator", leader, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.Version < 4 {
		return kerr.CoordinatorNotAvailable.Code // the coordinator cannot verify
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, txn := range resp.Transactions {
		for _, rt := range txn.Topics {
			for _, rp := range rt.Partitions {
				if txn.TransactionalID == a.TransactionalID && rt.Topic == topic && rp.Partition == partition {
					return rp.ErrorCode
				}
			}
		}
	}
	return kerr.UnknownServerError.Code
}
