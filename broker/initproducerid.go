package broker

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// producerIDBlock is how many producer ids a node takes from the metadata
// group at a time.
const producerIDBlock = 1000

// producerIDs hands out ids from blocks reserved in the metadata group, so
// no two nodes ever give out the same id.
type producerIDs struct {
	mu         sync.Mutex
	next, stop int64
}

// serveInitProducerID gives an idempotent producer a new id at epoch 0;
// a transactional id is answered by its transaction coordinator
// (txn_initproducerid.go).
func (n *Node) serveInitProducerID(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		return n.serveTxnInitProducerID(c, r, resp)
	}
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), 10*time.Second)
		defer cancel()
		id, err := n.nextProducerID(ctx)
		if err != nil {
			resp.ErrorCode = errCode(metaKafkaError(err))
		} else {
			resp.ProducerID, resp.ProducerEpoch = id, 0
		}
		f.Complete(resp, nil)
	}()
	return f
}

func (n *Node) nextProducerID(ctx context.Context) (int64, error) {
	n.pids.mu.Lock()
	defer n.pids.mu.Unlock()
	if n.pids.next >= n.pids.stop {
		res, err := n.ctl.Propose(ctx, &coordinator.Command{AllocateProducerIDs: &coordinator.AllocateProducerIDs{Node: n.cfg.NodeID, Count: producerIDBlock}})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return -1, err
		}
		n.pids.next, n.pids.stop = res.ProducerIDStart, res.ProducerIDStart+producerIDBlock
	}
	id := n.pids.next
	n.pids.next++
	return id, nil
}
