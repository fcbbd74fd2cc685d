package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/transport/kafka"
)

// routeTxns is where the transaction coordinator's APIs join the mux
// (files txn_*.go). EndTxn stops at v4: v5 is KIP-890 part 2's epoch
// bump at every commit, which coordinator/txns does not model, and no
// transaction.version feature is advertised, so clients keep version 1.
// InitProducerId's route is the idempotent producer's
// (initproducerid.go), which hands a transactional id here.
func (n *Node) routeTxns(route func(key, maxVersion int16, fn kafka.ServeFunc)) {
	route(kmsg.AddPartitionsToTxn.Int16(), 5, n.serveAddPartitionsToTxn)
	route(kmsg.AddOffsetsToTxn.Int16(), 4, n.serveAddOffsetsToTxn)
	route(kmsg.EndTxn.Int16(), 4, n.serveEndTxn)
	route(kmsg.DescribeTransactions.Int16(), 0, n.serveDescribeTransactions)
	route(kmsg.ListTransactions.Int16(), 2, n.serveListTransactions)
}

// txnPartition is this node's replica of one __transaction_state
// partition: its raft group applies to machine, and coord is the
// transaction coordinator of the ids that hash to it while this node
// leads the group (as offsetsPartition is for groups).
type txnPartition struct {
	group   *raftGroup
	machine *txns.Machine
	coord   *txns.Coordinator
	loading atomic.Bool // an Activate is under way (groups loop only)
	ticking atomic.Bool
}

func (c *Config) validateTxns() error {
	switch {
	case c.TransactionPartitions < 1 || c.TransactionPartitions > 1000:
		return fmt.Errorf("broker: transaction partitions %d outside 1..1000", c.TransactionPartitions)
	case c.TransactionMaxTimeout < time.Millisecond || c.TransactionMaxTimeout.Milliseconds() > 1<<31-1:
		return fmt.Errorf("broker: transaction max timeout %s outside 1ms..%dms", c.TransactionMaxTimeout, 1<<31-1)
	case c.TransactionalIDExpiration < time.Millisecond:
		return errors.New("broker: transactional id expiration must be at least 1ms")
	}
	return nil
}

// openTxnPartition builds the state machine and coordinator of a
// transaction partition replica and starts its raft group.
func (n *Node) openTxnPartition(ref coordinator.PartitionRef) (*txnPartition, error) {
	tp := &txnPartition{machine: txns.NewMachine()}
	tc := txns.DefaultConfig()
	tc.Partition, tc.Machine = ref.Partition.Index, tp.machine
	tc.Propose = func(ctx context.Context, data []byte) (any, error) { return tp.group.propose(ctx, data) }
	tc.AllocateProducerIDs = n.allocateTxnProducerIDs
	tc.WriteMarkers = n.sendTxnMarkers // txn_markers_send.go
	tc.MaxTimeout, tc.IDExpiration = n.cfg.TransactionMaxTimeout, n.cfg.TransactionalIDExpiration
	tc.Logger = n.log.With("component", "txns")
	c, err := txns.NewCoordinator(tc)
	if err != nil {
		return nil, err
	}
	tp.coord = c
	// The coordinator proposes only once activated, after the group is set.
	if tp.group, err = n.openRaftGroup(ref, tp.machine); err != nil {
		return nil, err
	}
	return tp, nil
}

// allocateTxnProducerIDs reserves a block of producer ids in the metadata
// group for a transaction partition, from the allocator idempotent
// producers use, so the two never hand out the same id.
func (n *Node) allocateTxnProducerIDs(ctx context.Context) (txns.ProducerIDBlock, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := n.ctl.Propose(ctx, &coordinator.Command{AllocateProducerIDs: &coordinator.AllocateProducerIDs{Node: n.cfg.NodeID, Count: producerIDBlock}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return txns.ProducerIDBlock{}, err
	}
	return txns.ProducerIDBlock{Start: res.ProducerIDStart, Count: producerIDBlock}, nil
}

// requestTxnTopic creates __transaction_state on first use, as
// requestOffsetsTopic creates __consumer_offsets: with
// Config.TransactionPartitions partitions, each a raft group whatever
// the cluster's default replication.mode.
func (n *Node) requestTxnTopic() {
	n.requestInternalTopic(txns.TransactionTopic, n.cfg.TransactionPartitions,
		map[string]string{"replication.mode": coordinator.ModeRaft})
}

// driveTxnCoordinator is driveCoordinator for a transaction partition:
// activated (a Barrier at the new term) when this node leads it, ticked
// while active, deactivated when leadership is lost.
func (n *Node) driveTxnCoordinator(ctx context.Context, r *replica) {
	tp := r.txns
	st := tp.group.Leadership()
	active, term := tp.coord.Active()
	switch {
	case st.IsLeader && (!active || term != uint64(st.Epoch)):
		if active {
			tp.coord.Deactivate()
		}
		if tp.loading.CompareAndSwap(false, true) {
			n.goTracked(func() { n.activateTxnCoordinator(ctx, r, uint64(st.Epoch)) })
		}
	case !st.IsLeader && active:
		tp.coord.Deactivate()
	case active && tp.ticking.CompareAndSwap(false, true):
		n.goTracked(func() {
			defer tp.ticking.Store(false)
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			tp.coord.Tick(tctx)
		})
	}
}

func (n *Node) activateTxnCoordinator(ctx context.Context, r *replica, term uint64) {
	defer r.txns.loading.Store(false)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.txns.coord.Activate(actx, term); err != nil {
		n.log.Info("transaction coordinator not activated", "partition", r.index, "term", term, "err", err)
	}
}

// txnCoordinator returns the coordinator of transactional id if this
// node is it, or the Kafka error that tells the client to look again
// (NOT_COORDINATOR; COORDINATOR_LOAD_IN_PROGRESS until the Barrier of
// this term is applied; COORDINATOR_NOT_AVAILABLE while the topic is
// created).
func (n *Node) txnCoordinator(id string) (*txns.Coordinator, int16) {
	t, ok := n.meta.View().Topics[txns.TransactionTopic]
	if !ok || len(t.Partitions) == 0 {
		n.requestTxnTopic()
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	r := n.replicaFor(txns.TransactionTopic, txns.PartitionFor(id, int32(len(t.Partitions))))
	if r == nil || r.txns == nil {
		return nil, kerr.NotCoordinator.Code
	}
	st := r.txns.group.Leadership()
	if !st.IsLeader {
		return nil, kerr.NotCoordinator.Code
	}
	if active, term := r.txns.coord.Active(); !active || term != uint64(st.Epoch) {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return r.txns.coord, 0
}

// localTxnCoordinators returns the coordinators of the transaction
// partitions this node leads, and whether one of them is still loading.
func (n *Node) localTxnCoordinators() (out []*txns.Coordinator, loading bool) {
	for _, r := range n.replicaList() {
		if r.txns == nil {
			continue
		}
		st := r.txns.group.Leadership()
		if !st.IsLeader {
			continue
		}
		if active, term := r.txns.coord.Active(); active && term == uint64(st.Epoch) {
			out = append(out, r.txns.coord)
		} else {
			loading = true
		}
	}
	return out, loading
}
