package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/internal/periodic"
	"github.com/raftq/raftq/transport/kafka"
)

// offsetsPartition is this node's replica of one __consumer_offsets
// partition: its raft group applies to machine, and coord runs the group
// protocol while this node leads it.
type offsetsPartition struct {
	group   *raftGroup
	machine *groups.Machine
	coord   *groups.Coordinator
	loading atomic.Bool // an Activate is under way (groups loop only)
	ticking atomic.Bool
}

func (c *Config) validateGroups() error {
	switch {
	case c.OffsetsPartitions < 1 || c.OffsetsPartitions > 1000:
		return fmt.Errorf("broker: offsets partitions %d outside 1..1000", c.OffsetsPartitions)
	case c.OffsetsRetention <= 0:
		return errors.New("broker: offsets retention must be positive")
	case c.GroupMinSessionTimeout <= 0 || c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout:
		return fmt.Errorf("broker: group session timeouts %s..%s", c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout)
	case c.GroupInitialRebalanceDelay < 0 || c.GroupMaxMetadataBytes < 1:
		return errors.New("broker: group initial rebalance delay must be >= 0 and max metadata bytes > 0")
	}
	return nil
}

// openOffsetsPartition builds the state machine and coordinator of an
// offsets partition replica and starts its raft group.
func (n *Node) openOffsetsPartition(ref coordinator.PartitionRef) (*offsetsPartition, error) {
	op := &offsetsPartition{machine: groups.NewMachine()}
	gc := groups.DefaultConfig()
	gc.Partition, gc.Machine = ref.Partition.Index, op.machine
	gc.Propose = func(ctx context.Context, data []byte) (any, error) { return op.group.propose(ctx, data) }
	gc.MinSessionTimeout, gc.MaxSessionTimeout = n.cfg.GroupMinSessionTimeout, n.cfg.GroupMaxSessionTimeout
	gc.InitialRebalanceDelay, gc.MaxMetadataBytes = n.cfg.GroupInitialRebalanceDelay, n.cfg.GroupMaxMetadataBytes
	gc.OffsetsRetention = n.cfg.OffsetsRetention
	gc.ExpireInterval = min(gc.ExpireInterval, max(n.cfg.OffsetsRetention/10, time.Second))
	gc.Logger = n.log.With("component", "groups")
	c, err := groups.NewCoordinator(gc)
	if err != nil {
		return nil, err
	}
	op.coord = c
	// The coordinator proposes only once activated, after the group is set.
	if op.group, err = n.openRaftGroup(ref, op.machine); err != nil {
		return nil, err
	}
	return op, nil
}

// groupsLoop runs each local offsets and transaction partition's
// coordinator: activated when this node leads the partition, ticked
// while active, deactivated when leadership is lost.
func (n *Node) groupsLoop(ctx context.Context) {
	defer n.deactivateCoordinators()
	periodic.Every(ctx, 100*time.Millisecond, func() {
		for _, r := range n.replicaList() {
			if r.offsets != nil {
				n.driveCoordinator(ctx, r)
			}
			if r.txns != nil {
				n.driveTxnCoordinator(ctx, r) // txn_coordinator.go
			}
		}
	})
}

func (n *Node) deactivateCoordinators() {
	for _, r := range n.replicaList() {
		if r.offsets != nil {
			r.offsets.coord.Deactivate()
		}
		if r.txns != nil {
			r.txns.coord.Deactivate()
		}
	}
	n.closeBrokerClients() // txn_client.go
}

// requestOffsetsTopic creates __consumer_offsets on first use, as Kafka
// does (the request that needed it gets COORDINATOR_NOT_AVAILABLE and
// the client retries).
func (n *Node) requestOffsetsTopic() {
	n.requestInternalTopic(groups.OffsetsTopic, n.cfg.OffsetsPartitions, nil)
}

// requestInternalTopic creates an internal topic of coordinator state.
// Its replication factor is min(3, cluster size), and it waits until
// that many brokers are alive. Any node may ask: the proposal is
// forwarded to the metadata leader, and a second creation fails
// harmlessly with TOPIC_ALREADY_EXISTS.
func (n *Node) requestInternalTopic(name string, partitions int32, configs map[string]string) {
	st := n.meta.View()
	if _, ok := st.Topics[name]; ok {
		return
	}
	alive := 0
	for _, b := range st.Brokers {
		if b.Alive {
			alive++
		}
	}
	rf := min(3, max(len(n.cfg.InitialCluster), len(st.Brokers))) // a joined node has no initial cluster
	if alive < rf {
		return
	}
	cmd := &coordinator.CreateTopic{Name: name, ID: newTopicID(), Partitions: partitions, Configs: configs,
		ReplicationFactor: int16(rf), Internal: true, AllowISR: true, ConfigVersion: coordinator.CurrentConfigVersion}
	go func() {
		ctx, cancel := context.WithTimeout(n.ctx, 3*time.Second)
		defer cancel()
		res, err := n.ctl.Propose(ctx, &coordinator.Command{CreateTopic: cmd})
		if err == nil && res.Err == nil {
			n.log.Info("created an internal topic", "topic", name, "partitions", cmd.Partitions, "replication_factor", rf)
		}
	}()
}

func (n *Node) driveCoordinator(ctx context.Context, r *replica) {
	op := r.offsets
	st := op.group.Leadership()
	active, term := op.coord.Active()
	switch {
	case st.IsLeader && (!active || term != uint64(st.Epoch)):
		if active {
			op.coord.Deactivate()
		}
		if op.loading.CompareAndSwap(false, true) {
			n.goTracked(func() { n.activateCoordinator(ctx, r, uint64(st.Epoch)) })
		}
	case !st.IsLeader && active:
		op.coord.Deactivate()
	case active && op.ticking.CompareAndSwap(false, true):
		n.goTracked(func() {
			defer op.ticking.Store(false)
			op.coord.Tick()
		})
	}
}

func (n *Node) activateCoordinator(ctx context.Context, r *replica, term uint64) {
	defer r.offsets.loading.Store(false)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.offsets.coord.Activate(actx, term); err != nil {
		n.log.Info("group coordinator not activated", "partition", r.index, "term", term, "err", err)
	}
}

// groupCoordinator returns the coordinator of group if this node is it,
// or the Kafka error that tells the client to look again.
func (n *Node) groupCoordinator(group string) (*groups.Coordinator, int16) {
	t, ok := n.meta.View().Topics[groups.OffsetsTopic]
	if !ok || len(t.Partitions) == 0 {
		n.requestOffsetsTopic()
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	r := n.replicaFor(groups.OffsetsTopic, groups.PartitionFor(group, int32(len(t.Partitions))))
	if r == nil || r.offsets == nil {
		return nil, kerr.NotCoordinator.Code
	}
	st := r.offsets.group.Leadership()
	if !st.IsLeader {
		return nil, kerr.NotCoordinator.Code
	}
	if active, term := r.offsets.coord.Active(); !active || term != uint64(st.Epoch) {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return r.offsets.coord, 0
}

// localCoordinators returns the active coordinators on this node.
func (n *Node) localCoordinators() []*groups.Coordinator {
	var out []*groups.Coordinator
	for _, r := range n.replicaList() {
		if r.offsets == nil || !r.offsets.group.Leadership().IsLeader {
			continue
		}
		if active, _ := r.offsets.coord.Active(); active {
			out = append(out, r.offsets.coord)
		}
	}
	return out
}

// clientOf describes a request's connection for DescribeGroups.
func clientOf(c *kafka.Conn) groups.Client {
	host := ""
	if a := c.RemoteAddr(); a != nil {
		host = "/" + a.String()
		if h, _, err := net.SplitHostPort(a.String()); err == nil {
			host = "/" + h
		}
	}
	return groups.Client{ID: c.ClientID(), Host: host}
}

// runAsync runs fn on its own goroutine and answers with what it returns:
// group operations wait on raft, and Serve must return at once.
func runAsync(fn func() kmsg.Response) kafka.Pending {
	f := kafka.NewFuture()
	go func() { f.Complete(fn(), nil) }()
	return f
}
