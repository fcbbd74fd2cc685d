package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/isr"
)

// The node's ISR side: one isr.Manager, made when the node first needs it
// (its first ISR replica, or a peer's first follower fetch), so that a
// node without ISR topics runs none of it. The manager replicates over
// the peer transport's fetch streams and changes ISRs through group 0
// (proposeAlter); the node tells it each partition's metadata on every
// change (reconcile.go, updateISR).

// isrSide holds the manager and the AlterPartition proposals under way.
type isrSide struct {
	mu     sync.Mutex // guards m, closed and backoff; a leaf but for isr.NewManager
	m      *isr.Manager
	closed bool
	// backoff is each group's wait before it hears of a failed proposal
	// again (no metadata leader, a timeout); it grows while they fail.
	backoff map[uint64]time.Duration
	// props counts proposal goroutines; Add only under mu while !closed,
	// so closeISR's Wait never races an Add.
	props sync.WaitGroup
}

// Proposal backoff bounds: the isr leader resends a failed AlterPartition
// at once, so the wait between two attempts lives here.
const (
	alterBackoffMin = 50 * time.Millisecond
	alterBackoffMax = time.Second
	alterTimeout    = 5 * time.Second
)

// isrManager returns the node's manager, making it on first use;
// isr.ErrClosed once the node closes.
func (n *Node) isrManager() (*isr.Manager, error) {
	n.isr.mu.Lock()
	defer n.isr.mu.Unlock()
	switch {
	case n.isr.closed:
		return nil, isr.ErrClosed
	case n.isr.m != nil:
		return n.isr.m, nil
	}
	cfg := isr.DefaultManagerConfig()
	cfg.Self = n.cfg.NodeID
	cfg.ReplicaLagTimeMax, cfg.ReplicaFetchWaitMax = n.cfg.ReplicaLagTimeMax, n.cfg.ReplicaFetchWaitMax
	cfg.Fetch = n.peer.Fetch
	cfg.Propose = n.proposeAlter
	cfg.Eligible = n.isrEligible
	cfg.BrokerEpoch = n.brokerEpoch
	// ISR changes are counted from the metadata (updateISR): the hook
	// sees only those answered to this leader's own proposals, and not
	// when the metadata update reaches the replica first.
	cfg.Hooks = isr.Hooks{FollowerFetch: n.metrics.followerFetched}
	cfg.Logger = n.log.With("component", "isr")
	m, err := isr.NewManager(cfg)
	if err != nil {
		return nil, fmt.Errorf("isr manager: %w", err)
	}
	n.isr.m = m
	return m, nil
}

// serveReplicaFetch answers a follower's fetch (the peer transport's
// FetchHandler), or a damaged raft replica's repair fetch (repair.go).
func (n *Node) serveReplicaFetch(from uint64, req []byte, deadline time.Time) []byte {
	if isRepairRequest(req) {
		return n.serveRepair(req)
	}
	m, err := n.isrManager()
	if err != nil {
		return nil // closing: the fetcher sees a broken answer and retries elsewhere
	}
	return m.HandleFetch(from, req, deadline)
}

// closeISR stops the manager once every ISR replica is closed, then waits
// for the proposals under way (they end with the node's context).
func (n *Node) closeISR() {
	n.isr.mu.Lock()
	n.isr.closed = true
	m := n.isr.m
	n.isr.mu.Unlock()
	if m != nil {
		m.Close()
	}
	n.isr.props.Wait()
}

// proposeAlter sends one AlterPartition item to group 0 (the isr
// leader's Propose) and yields its outcome once: the item's result, or a
// failure of the whole command in the item's Err, after a backoff. Once
// the node is closing, the channel closes without a result instead: the
// isr leader drops a proposal whose channel closed, where a failure would
// have it resend at once, in a loop, until its partition closes.
func (n *Node) proposeAlter(item coordinator.AlterPartitionItem) <-chan coordinator.ItemResult {
	out := make(chan coordinator.ItemResult, 1)
	n.isr.mu.Lock()
	defer n.isr.mu.Unlock()
	if n.isr.closed || n.ctx.Err() != nil {
		close(out)
		return out
	}
	n.isr.props.Add(1)
	go func() {
		defer n.isr.props.Done()
		if res, ok := n.alterPartition(item); ok {
			out <- res
		}
		close(out)
	}()
	return out
}

// alterPartition proposes item; ok is false when the node closed first.
func (n *Node) alterPartition(item coordinator.AlterPartitionItem) (res coordinator.ItemResult, ok bool) {
	if item.LostData || item.LogEnd != nil {
		if id, ok := n.brokerWithout(func(b *coordinator.Broker) bool { return b.ResignLostData }); ok {
			return coordinator.ItemResult{Group: item.Group, Err: fmt.Errorf("%w: broker %d runs a version that would apply a resignation for lost data, or a log end report, differently", kerr.UnsupportedVersion, id)}, true
		}
	}
	ctx, cancel := context.WithTimeout(n.ctx, alterTimeout)
	defer cancel()
	cmd := &coordinator.Command{AlterPartition: &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{item}}}
	r, err := n.ctl.Propose(ctx, cmd)
	switch {
	case err == nil && r.Err == nil && len(r.Items) == 1:
		n.alterSucceeded(item.Group)
		return r.Items[0], true
	case err == nil && r.Err != nil:
		return coordinator.ItemResult{Group: item.Group, Err: r.Err}, true
	case err == nil:
		err = fmt.Errorf("%d results for one item", len(r.Items))
	}
	n.alterFailedWait(item.Group)
	if n.ctx.Err() != nil {
		return res, false
	}
	return coordinator.ItemResult{Group: item.Group, Err: fmt.Errorf("alter partition of group %d: %w", item.Group, err)}, true
}

// brokerWithout returns a registered broker that lacks a capability.
func (n *Node) brokerWithout(has func(*coordinator.Broker) bool) (uint64, bool) {
	st := n.meta.View()
	for _, id := range st.BrokerIDs() {
		if !has(st.Brokers[id]) {
			return id, true
		}
	}
	return 0, false
}

func (n *Node) alterSucceeded(group uint64) {
	n.isr.mu.Lock()
	delete(n.isr.backoff, group)
	n.isr.mu.Unlock()
}

// alterFailedWait waits out the group's backoff, and doubles it.
func (n *Node) alterFailedWait(group uint64) {
	n.isr.mu.Lock()
	if n.isr.backoff == nil {
		n.isr.backoff = map[uint64]time.Duration{}
	}
	d := max(n.isr.backoff[group], alterBackoffMin)
	n.isr.backoff[group] = min(2*d, alterBackoffMax)
	n.isr.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-n.ctx.Done():
	}
}

// isrEligible reports whether broker id, seen at brokerEpoch, may join an
// ISR: registered at that epoch, alive (not fenced) and not in controlled
// shutdown in the metadata (group 0 would refuse it).
func (n *Node) isrEligible(id, brokerEpoch uint64) bool {
	b, ok := n.meta.View().Brokers[id]
	return ok && b.Eligible() && b.Epoch == brokerEpoch
}

// brokerEpoch is this node's broker epoch in the metadata, 0 while it is
// not registered.
func (n *Node) brokerEpoch() uint64 { return brokerEpochIn(n.meta.View(), n.cfg.NodeID) }

func brokerEpochIn(s *coordinator.State, id uint64) uint64 {
	if b, ok := s.Brokers[id]; ok {
		return b.Epoch
	}
	return 0
}

// reportedIn says whether p holds a log end report of broker id.
func reportedIn(p coordinator.Partition, id uint64) bool {
	return slices.ContainsFunc(p.LogEnds, func(e coordinator.ReplicaLogEnd) bool { return e.Broker == id })
}

// openISRReplication opens this node's replica of an ISR partition; it
// takes a role at its first updateISR.
func (n *Node) openISRReplication(ref coordinator.PartitionRef, dir string) (*isrReplication, error) {
	m, err := n.isrManager()
	if err != nil {
		return nil, err
	}
	t, p := ref.Topic, ref.Partition
	gid := p.Group
	ip, err := m.Open(isr.PartitionConfig{Group: gid, TopicID: t.ID, Index: p.Index, Dir: dir, Log: n.logConfig(t),
		Flush: flushPolicy(t), Logger: n.log.With("topic", t.Name, "partition", p.Index)})
	if err != nil {
		return nil, err
	}
	return &isrReplication{p: ip, gid: gid,
		preferred:      func() (uint64, bool) { return n.preferredReplica(gid) },
		electPreferred: func(ctx context.Context) error { return n.electPreferred(ctx, gid) },
		electedAfter:   func(epoch int32) bool { return n.electedAfter(gid, epoch) },
	}, nil
}

// electedAfter reports whether group 0, in this node's metadata, has
// elected this node to lead group gid at a leader epoch above epoch.
func (n *Node) electedAfter(gid uint64, epoch int32) bool {
	ref, ok := n.meta.View().PartitionByGroup(gid)
	return ok && ref.Partition.Leader == n.cfg.NodeID && int64(ref.Partition.LeaderTerm) > int64(epoch)
}

func (n *Node) preferredReplica(gid uint64) (uint64, bool) {
	ref, ok := n.meta.View().PartitionByGroup(gid)
	if !ok || len(ref.Partition.Replicas) == 0 {
		return 0, false
	}
	return ref.Partition.Replicas[0], true
}

// electPreferred asks group 0 to make the preferred replica lead group
// gid. An election that is not needed (it leads already) succeeds.
func (n *Node) electPreferred(ctx context.Context, gid uint64) error {
	cmd := &coordinator.Command{ElectLeaders: &coordinator.ElectLeaders{Groups: []uint64{gid}, Preferred: true}}
	res, err := n.ctl.Propose(ctx, cmd)
	switch {
	case err != nil:
		return fmt.Errorf("elect preferred leader of group %d: %w", gid, metaKafkaError(err))
	case res.Err != nil:
		return res.Err
	case len(res.Items) == 1 && res.Items[0].Err != nil && !errors.Is(res.Items[0].Err, kerr.ElectionNotNeeded):
		return res.Items[0].Err
	}
	return nil
}

// updateISR passes group 0's state of an ISR partition to its replica
// here (a no-op for a raft replica). Until this process's registration
// is in s, it passes nothing and the replica keeps no role: s is what the
// node replayed from before its restart, which may still name it leader
// (group 0 had not yet noticed it was gone) of a log it has since lost
// part of. Its registration fences it and elects from the survivors;
// serving fetches before that would have them truncate to its log.
// Kafka's broker likewise acts on metadata only once caught up past its
// own registration.
func (n *Node) updateISR(r *replica, s *coordinator.State, ref coordinator.PartitionRef) {
	ir := r.isr()
	if ir == nil || !n.ctl.RegisteredIn(s) {
		return
	}
	st := isrState(s, ref, n.cfg.NodeID)
	ir.p.Update(st)
	if changed, expand := ir.isrChange(st, n.cfg.NodeID); changed {
		n.metrics.isrChanged(r.gid, expand)
	}
}

// isr returns the replica's ISR replication, nil for any other kind.
func (r *replica) isr() *isrReplication {
	if r.data == nil {
		return nil
	}
	ir, _ := r.data.repl.(*isrReplication)
	return ir
}

// isrState is the metadata's view of an ISR partition as the isr package
// takes it, with self's broker epoch in the same state.
func isrState(s *coordinator.State, ref coordinator.PartitionRef, self uint64) isr.State {
	p := ref.Partition
	return isr.State{Leader: p.Leader, LeaderEpoch: epochOf(p.LeaderTerm), PartitionEpoch: p.PartitionEpoch,
		Replicas: p.Replicas, ISR: p.ISR, ELR: p.ELR, Recovering: p.Recovering, LastKnownLeader: p.LastKnownLeader,
		MinISR:      int(min(max(ref.Topic.ConfigInt("min.insync.replicas"), 1), math.MaxInt32)),
		BrokerEpoch: brokerEpochIn(s, self), Reported: reportedIn(*p, self)}
}

// flushPolicy is a topic's flush.messages and flush.ms. Their default,
// Long.MAX_VALUE, and any value not positive mean never (the zero
// policy), as does a flush.ms too long for a time.Duration.
func flushPolicy(t *coordinator.Topic) isr.FlushPolicy {
	var f isr.FlushPolicy
	if m := t.ConfigInt("flush.messages"); m > 0 && m < math.MaxInt64 {
		f.Messages = m
	}
	if ms := t.ConfigInt("flush.ms"); ms == 0 {
		f.Interval = time.Nanosecond // Kafka's 0: flush at every check
	} else {
		f.Interval = msDuration(ms)
	}
	return f
}
