package coordinator

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/internal/periodic"
	"github.com/raftq/raftq/raftgroup"
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
			b.AdminAddr != me.AdminAddr || b.Incarnation != me.Incarnation || b.StartID != me.StartID ||
			!maps.Equal(b.Listeners, me.Listeners) {
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
//
// It starts only once group 0 has applied every entry its log held when
// it opened: a replay publishes every state on the way, and a state from
// before a partition moved onto this node would have reconcile remove
// that replica's data (and then reopen it empty, a voter without the log
// it acknowledged). Entries past the saved commit index count too: the
// node may have applied them before it stopped (raft fsyncs a commit
// index only with entries or a vote), so they wait for group 0 to
// commit them again.
func (c *Controller) reconcileLoop(ctx context.Context) {
	if _, err := c.group.WaitStatus(ctx, func(s raftgroup.Status) bool { return s.Applied >= c.replayTo }); err != nil {
		return
	}
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
// nodes beyond the voters, and admitted ones, as learners of group 0,
// changes its voters (controller_voters.go) and marks brokers alive or
// dead by whether this node hears from them.
func (c *Controller) metadataLeaderLoop(ctx context.Context) {
	lastHeard := map[uint64]time.Time{}
	deadSince := map[uint64]time.Time{} // controller_voters.go
	defaultsRefused := false
	periodic.Every(ctx, 250*time.Millisecond, func() {
		if !c.group.Status().IsLeader() {
			clear(lastHeard)
			clear(deadSince)
			return
		}
		c.addLearners(ctx)
		c.changeVoters(ctx, deadSince)
		c.updateLiveness(ctx, lastHeard)
		c.syncFeatures(ctx)
		c.syncTopicDefaults(ctx, &defaultsRefused)
		c.moveOffDecommissioned(ctx)
		c.pruneRemoved(ctx)
		if c.cfg.PartitionBalancer {
			c.balancePartitions(ctx)
		}
	})
}

// syncTopicDefaults proposes this node's topic defaults when the
// cluster's differ, as syncFeatures does its flag: the metadata leader's
// broker configs win, so nodes started with different ones would switch
// the defaults at each change of metadata leader. Once apply refused them
// (a node of another version), *refused stops the retries: a refusal is a
// function of the command, and this node's defaults do not change.
func (c *Controller) syncTopicDefaults(ctx context.Context, refused *bool) {
	want := c.cfg.TopicDefaults
	if *refused || c.cfg.Metadata.View().TopicDefaults.Equal(want) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := c.Propose(pctx, &Command{SetTopicDefaults: &SetTopicDefaults{Defaults: want, ConfigVersion: CurrentConfigVersion}})
	switch {
	case err != nil:
		return // retried next tick
	case res.Err != nil:
		*refused = true
		c.log.Error("topic defaults refused", "err", res.Err)
	default:
		c.log.Info("topic defaults set from this node's broker configs", "defaults", len(want))
	}
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
	for _, id := range c.wantedMembers() {
		if slices.Contains(members, id) || c.cfg.HasPeer != nil && !c.cfg.HasPeer(id) {
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
		_, seen := lastHeard[id]
		lastHeard[id] = c.heardAt(id, now, lastHeard[id], seen)
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
// placement) when that replica is alive and neither in controlled
// shutdown nor in maintenance (Broker.TakesLeadership), so that produce
// load spreads over the nodes after failovers, as Kafka's automatic
// leader rebalance does.
// An ISR partition moves only when the preferred replica is in its ISR;
// its TransferLeadership asks group 0 for a preferred election.
func (c *Controller) leaderBalanceLoop(ctx context.Context) {
	periodic.Every(ctx, c.cfg.LeaderBalanceInterval, func() { c.balanceLeaders(ctx) })
}

func (c *Controller) balanceLeaders(ctx context.Context) {
	st := c.cfg.Metadata.View()
	for _, r := range c.cfg.Local() {
		ref, ok := st.PartitionByGroup(r.Group())
		if leader, _ := r.LeaderTerm(); !ok || !leader || ref.Partition.Moving() {
			continue // a move hands leadership on itself
		}
		preferred := ref.Partition.Replicas[0]
		if b, ok := st.Brokers[preferred]; preferred == c.cfg.NodeID || !ok || !b.TakesLeadership() {
			continue // dead, in controlled shutdown (about to stop) or in maintenance
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

// heardAt is when this node last heard from broker id: now for itself;
// else the transport's last frame from it, connected or not (an open
// connection is not enough: a paused process keeps its connections open
// and sends nothing, and a live peer sends a frame at least every
// keepalive); without one, now while connected, else prev, or now when
// this metadata leader sees id for the first time (a grace period).
func (c *Controller) heardAt(id uint64, now, prev time.Time, seen bool) time.Time {
	if id == c.cfg.NodeID {
		return now
	}
	if c.cfg.LastHeard != nil {
		if t := c.cfg.LastHeard(id); !t.IsZero() && !t.After(now) {
			return t
		}
	}
	if c.cfg.Connected(id) || !seen {
		return now
	}
	return prev
}
