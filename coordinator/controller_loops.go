package coordinator

import (
	"context"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/internal/periodic"
)

// registerLoop registers this broker in the metadata, and again whenever
// the registration there differs: on every start, since me.StartID is new
// with each process (group 0 then fences the broker out of every ISR
// until it has caught up again, KIP-966's rule; raft partitions are left
// as they were), on new addresses, or after a snapshot that predates the
// registration.
func (c *Controller) registerLoop(ctx context.Context, me Broker) {
	m := c.cfg.Metadata
	for {
		changed := m.Changed()
		if b, ok := m.View().Brokers[me.ID]; !ok || b.KafkaAddr != me.KafkaAddr || b.PeerAddr != me.PeerAddr ||
			b.AdminAddr != me.AdminAddr || b.Incarnation != me.Incarnation || b.StartID != me.StartID {
			res, err := c.ProposeRetry(ctx, &Command{RegisterBroker: &me})
			switch {
			case err == nil && res.Err == nil:
				c.log.Info("registered broker", "kafka", me.KafkaAddr)
			case err == nil:
				c.log.Error("broker registration refused", "err", res.Err)
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// reconcileLoop has the node's replicas follow the metadata: on every
// change, and every ReconcileInterval to retry what failed.
func (c *Controller) reconcileLoop(ctx context.Context) {
	m := c.cfg.Metadata
	for {
		changed := m.Changed()
		c.cfg.Reconcile(m.View())
		select {
		case <-changed:
		case <-time.After(c.cfg.ReconcileInterval):
		case <-ctx.Done():
			return
		}
	}
}

// hintLoop reports the raft partitions this node leads to the metadata
// group, so that every node's Metadata answers name the leader. ISR
// partitions need none: group 0 elected their leaders.
func (c *Controller) hintLoop(ctx context.Context) {
	hinted := map[uint64]uint64{} // group -> last term reported (this loop only)
	periodic.Every(ctx, 100*time.Millisecond, func() { c.reportLeadership(ctx, hinted) })
}

func (c *Controller) reportLeadership(ctx context.Context, hinted map[uint64]uint64) {
	var hints []LeaderHint
	st := c.cfg.Metadata.View()
	local := map[uint64]bool{}
	for _, r := range c.cfg.Local() {
		gid := r.Group()
		local[gid] = true
		leader, term := r.LeaderTerm()
		if !leader || term <= hinted[gid] {
			continue
		}
		ref, ok := st.PartitionByGroup(gid)
		if ok && ref.Topic.IsISR() {
			continue // group 0 elected this leader: there is nothing to hint
		}
		if ok && ref.Partition.Leader == c.cfg.NodeID && ref.Partition.LeaderTerm == term {
			hinted[gid] = term
			continue
		}
		hints = append(hints, LeaderHint{Group: gid, Leader: c.cfg.NodeID, Term: term})
	}
	for gid := range hinted {
		if !local[gid] {
			delete(hinted, gid) // a replica closed here; if it comes back, it reports again
		}
	}
	if len(hints) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := c.Propose(pctx, &Command{LeaderHints: hints}); err != nil {
		return // retried next tick
	}
	for _, h := range hints {
		hinted[h.Group] = h.Term
	}
}

// metadataLeaderLoop does the metadata leader's housekeeping: it adds
// nodes beyond the voters as learners of group 0 and marks brokers alive
// or dead by whether this node hears from them.
func (c *Controller) metadataLeaderLoop(ctx context.Context) {
	lastHeard := map[uint64]time.Time{}
	periodic.Every(ctx, 250*time.Millisecond, func() {
		if !c.group.Status().IsLeader() {
			clear(lastHeard)
			return
		}
		c.addLearners(ctx)
		c.updateLiveness(ctx, lastHeard)
		c.syncFeatures(ctx)
	})
}

// syncFeatures proposes this node's EligibleLeaderReplicas flag when the
// cluster's feature differs. The feature lives in group 0's state
// (apply must not read a node flag), so the metadata leader's flag wins;
// nodes started with different flags would flip it at each change of
// metadata leader.
func (c *Controller) syncFeatures(ctx context.Context) {
	want := c.cfg.EligibleLeaderReplicas
	if c.cfg.Metadata.View().EligibleLeaderReplicas == want {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := c.Propose(pctx, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: want}})
	c.log.Info("eligible leader replicas feature", "on", want, "err", err)
}

func (c *Controller) addLearners(ctx context.Context) {
	members := c.group.Status().Members()
	for _, id := range c.cfg.Nodes {
		if slices.Contains(members, id) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if p, err := c.group.ProposeConfChange(pctx, learnerChange(id)); err == nil {
			_, err = p.Wait(pctx)
			c.log.Info("added metadata learner", "id", id, "err", err)
		}
		cancel()
		return // one change at a time
	}
}

// learnerChange adds id to a group as a learner.
func learnerChange(id uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(id)},
	}}
}

func (c *Controller) updateLiveness(ctx context.Context, lastHeard map[uint64]time.Time) {
	now := time.Now()
	for id, b := range c.cfg.Metadata.View().Brokers {
		if id == c.cfg.NodeID || c.cfg.Connected(id) {
			lastHeard[id] = now
		} else if _, ok := lastHeard[id]; !ok {
			lastHeard[id] = c.silentSince(id, now)
		}
		alive := now.Sub(lastHeard[id]) < c.cfg.DeadAfter
		if alive == b.Alive {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := c.Propose(pctx, &Command{SetAlive: &SetAlive{ID: id, Alive: alive}})
		cancel()
		c.log.Info("broker liveness", "id", id, "alive", alive, "err", err)
	}
}

// leaderBalanceLoop hands leadership of each partition this node leads
// back to the partition's preferred replica (its first, spread evenly by
// placement) when that replica is alive and not in controlled shutdown,
// so that produce load spreads over the nodes after failovers, as Kafka's
// automatic leader rebalance does.
// An ISR partition moves only when the preferred replica is in its ISR;
// its TransferLeadership asks group 0 for a preferred election.
func (c *Controller) leaderBalanceLoop(ctx context.Context) {
	periodic.Every(ctx, c.cfg.LeaderBalanceInterval, func() { c.balanceLeaders(ctx) })
}

func (c *Controller) balanceLeaders(ctx context.Context) {
	st := c.cfg.Metadata.View()
	for _, r := range c.cfg.Local() {
		ref, ok := st.PartitionByGroup(r.Group())
		if leader, _ := r.LeaderTerm(); !ok || !leader {
			continue
		}
		preferred := ref.Partition.Replicas[0]
		if b, ok := st.Brokers[preferred]; preferred == c.cfg.NodeID || !ok || !b.Eligible() {
			continue // dead, or in controlled shutdown: it is about to stop
		}
		if ref.Topic.IsISR() && !slices.Contains(ref.Partition.ISR, preferred) {
			continue // group 0 elects only from the ISR; it rejoins by fetching first
		}
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.TransferLeadership(tctx, preferred)
		cancel()
		c.log.Info("leader balance", "group", r.Group(), "to", preferred, "err", err)
	}
}

// silentSince is when broker id, which this new metadata leader is not
// connected to, was last heard from: what the node's transport knows, or
// now (a grace period from the election) if it never heard from it.
func (c *Controller) silentSince(id uint64, now time.Time) time.Time {
	if c.cfg.LastHeard == nil {
		return now
	}
	if t := c.cfg.LastHeard(id); !t.IsZero() && t.Before(now) {
		return t
	}
	return now
}
