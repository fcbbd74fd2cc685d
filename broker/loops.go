package broker

import (
	"context"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/coordinator"
)

// registerLoop registers this broker's addresses in the metadata, and
// again whenever the registration there differs (a restart with new
// addresses, or a snapshot that predates it).
func (n *Node) registerLoop(ctx context.Context) {
	_, peerAddr, adminAddr := n.Addrs()
	me := coordinator.Broker{ID: n.cfg.NodeID, KafkaAddr: n.advert, PeerAddr: peerAddr, AdminAddr: adminAddr, Incarnation: n.incarnation}
	for {
		changed := n.meta.Changed()
		if b, ok := n.meta.View().Brokers[me.ID]; !ok || b.KafkaAddr != me.KafkaAddr || b.PeerAddr != me.PeerAddr ||
			b.AdminAddr != me.AdminAddr || b.Incarnation != me.Incarnation {
			res, err := n.proposeMetaRetry(ctx, &coordinator.Command{RegisterBroker: &me})
			switch {
			case err == nil && res.Err == nil:
				n.log.Info("registered broker", "kafka", me.KafkaAddr)
			case err == nil:
				n.log.Error("broker registration refused", "err", res.Err)
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// hintLoop reports partitions this node leads to the metadata group, so
// that every node's Metadata answers name the leader.
func (n *Node) hintLoop(ctx context.Context) {
	every(ctx, 100*time.Millisecond, func() { n.reportLeadership(ctx) })
}

// every calls fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			fn()
		case <-ctx.Done():
			return
		}
	}
}

func (n *Node) reportLeadership(ctx context.Context) {
	var hints []coordinator.LeaderHint
	var rs []*replica
	st := n.meta.View()
	for _, r := range n.replicaList() {
		s := r.lead.Leadership()
		term := uint64(s.Epoch)
		if !s.IsLeader || term <= r.hinted {
			continue
		}
		if ref, ok := st.PartitionByGroup(r.gid); ok && ref.Partition.Leader == n.cfg.NodeID && ref.Partition.LeaderTerm == term {
			r.hinted = term
			continue
		}
		hints = append(hints, coordinator.LeaderHint{Group: r.gid, Leader: n.cfg.NodeID, Term: term})
		rs = append(rs, r)
	}
	if len(hints) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := n.proposeMeta(pctx, &coordinator.Command{LeaderHints: hints}); err != nil {
		return // retried next tick
	}
	for i, r := range rs {
		r.hinted = hints[i].Term
	}
}

// metadataLeaderLoop does the metadata leader's housekeeping: it adds
// nodes beyond the voters as learners of group 0 and marks brokers alive
// or dead by whether this node hears from them.
func (n *Node) metadataLeaderLoop(ctx context.Context) {
	lastHeard := map[uint64]time.Time{}
	every(ctx, 250*time.Millisecond, func() {
		if !n.group.Status().IsLeader() {
			clear(lastHeard)
			return
		}
		n.addLearners(ctx)
		n.updateLiveness(ctx, lastHeard)
	})
}

func (n *Node) addLearners(ctx context.Context) {
	members := n.group.Status().Members()
	for _, id := range n.cfg.nodeIDs() {
		if containsID(members, id) {
			continue
		}
		cc := learnerChange(id)
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if p, err := n.group.ProposeConfChange(pctx, cc); err == nil {
			_, err = p.Wait(pctx)
			n.log.Info("added metadata learner", "id", id, "err", err)
		}
		cancel()
		return // one change at a time
	}
}

// deadAfter is how long the metadata leader must not hear from a broker
// before it marks it dead.
func (n *Node) deadAfter() time.Duration {
	return 3 * time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval
}

func (n *Node) updateLiveness(ctx context.Context, lastHeard map[uint64]time.Time) {
	now := time.Now()
	peers := n.peer.Stats().Peers
	for id, b := range n.meta.View().Brokers {
		connected := id == n.cfg.NodeID || peers[id].Connected
		if connected {
			lastHeard[id] = now
		} else if _, ok := lastHeard[id]; !ok {
			lastHeard[id] = now // grace period from when we became leader
		}
		alive := now.Sub(lastHeard[id]) < n.deadAfter()
		if alive == b.Alive {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := n.proposeMeta(pctx, &coordinator.Command{SetAlive: &coordinator.SetAlive{ID: id, Alive: alive}})
		cancel()
		n.log.Info("broker liveness", "id", id, "alive", alive, "err", err)
	}
}

// leaderBalanceLoop hands leadership of each partition this node leads
// back to the partition's preferred replica (its first, spread evenly by
// placement) when that replica is alive, so that produce load spreads over
// the nodes after failovers, as Kafka's automatic leader rebalance does.
func (n *Node) leaderBalanceLoop(ctx context.Context) {
	if n.cfg.LeaderBalanceInterval > 0 {
		every(ctx, n.cfg.LeaderBalanceInterval, func() { n.balanceLeaders(ctx) })
	}
}

func (n *Node) balanceLeaders(ctx context.Context) {
	st := n.meta.View()
	for _, r := range n.replicaList() {
		ref, ok := st.PartitionByGroup(r.gid)
		if !ok || !r.lead.Leadership().IsLeader {
			continue
		}
		preferred := ref.Partition.Replicas[0]
		if b, alive := st.Brokers[preferred]; preferred == n.cfg.NodeID || !alive || !b.Alive {
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.lead.TransferLeadership(tctx, preferred)
		cancel()
		n.log.Info("leader balance", "topic", r.topic, "partition", r.index, "to", preferred, "err", err)
	}
}

// retentionLoop has each partition leader apply retention: it proposes
// the new log start, which every replica applies.
func (n *Node) retentionLoop(ctx context.Context) {
	every(ctx, n.cfg.RetentionCheckInterval, func() {
		for _, r := range n.replicaList() {
			n.applyRetention(ctx, r)
		}
	})
}

func (n *Node) applyRetention(ctx context.Context, r *replica) {
	if r.data == nil || !r.data.repl.Leadership().IsLeader {
		return
	}
	repl := r.data.repl
	l := repl.Log()
	off := l.RetentionOffset()
	if off <= l.StartOffset() {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := repl.AdvanceStart(pctx, off)
	n.log.Info("retention", "topic", r.topic, "partition", r.index, "log_start", off, "err", err)
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// learnerChange adds id to a group as a learner.
func learnerChange(id uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(id)},
	}}
}
