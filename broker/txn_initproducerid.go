package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/transport/kafka"
)

// serveTxnInitProducerID answers InitProducerId with a transactional id
// through the id's coordinator: a new id at epoch 0, or the epoch bumped,
// fencing the last producer of the id (and aborting its open
// transaction, answered CONCURRENT_TRANSACTIONS until the abort's markers
// are written). v3+ carry KIP-360's producer id and epoch, which a
// producer presents to recover its epoch; v0-v2 have none (-1 -1). An
// empty transactional id is INVALID_REQUEST, as in Kafka.
func (n *Node) serveTxnInitProducerID(c *kafka.Conn, r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) kafka.Pending {
	id := *r.TransactionalID
	if id == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return kafka.Ready(resp)
	}
	coord, code := n.txnCoordinator(id)
	if code != 0 {
		resp.ErrorCode = code
		return kafka.Ready(resp)
	}
	pid, epoch := r.ProducerID, r.ProducerEpoch
	if r.Version < 3 {
		pid, epoch = -1, -1
	}
	return runAsync(func() kmsg.Response {
		p, e, code := coord.InitProducerID(c.Context(), id, r.TransactionTimeoutMillis, pid, epoch)
		resp.ProducerID, resp.ProducerEpoch = p, e
		resp.ErrorCode = txns.ClientCode(code, r.Key(), r.Version)
		return resp
	})
}
