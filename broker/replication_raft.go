package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// The raft mode: every partition is its own raft group. A data
// partition's group applies to a partition.Replica, which assigns offsets
// at apply; an offsets partition's group applies to the consumer groups'
// machine. The leader epoch is the raft term (epochOf), and raftgroup's
// errors become the broker's (classify), here and nowhere else.

var (
	_ replication = (*raftReplication)(nil)
	_ leaderView  = (*raftGroup)(nil)
)

// raftGroup is a replica's raft group on this node's host.
type raftGroup struct {
	host *raftgroup.Host
	g    *raftgroup.Group
}

// epochOf is the Kafka leader epoch of a raft term.
func epochOf(term uint64) int32 { return int32(min(term, math.MaxInt32)) }

func leadershipOf(st raftgroup.Status) leadership {
	return leadership{Leader: st.Leader, Epoch: epochOf(st.Term), IsLeader: st.IsLeader(),
		Settling: st.Leader == 0 || st.LeadTransferee != 0}
}

func (r *raftGroup) Leadership() leadership { return leadershipOf(r.g.Status()) }

func (r *raftGroup) WaitSettled(ctx context.Context) leadership {
	st, _ := r.g.WaitStatus(ctx, func(s raftgroup.Status) bool {
		return s.Leader != 0 && s.LeadTransferee == 0
	})
	return leadershipOf(st)
}

func (r *raftGroup) TransferLeadership(ctx context.Context, to uint64) error {
	return classify(r.g.TransferLeadership(ctx, to))
}

// successor is the candidate voter that holds the most of this leader's
// log (raftgroup.Group.Successor).
func (r *raftGroup) successor(candidates []uint64) uint64 { return r.g.Successor(candidates) }

func (r *raftGroup) describe() GroupStatus {
	gs := groupStatus(r.g.Status())
	gs.Mode = coordinator.ModeRaft
	return gs
}

// Raft is the replica's raft group, for the membership changes of a
// reassignment (coordinator.RaftReplica).
func (r *raftGroup) Raft() *raftgroup.Group { return r.g }

// Raft returns the replica's raft group (coordinator.RaftReplica), nil
// for an ISR replica.
func (r *replica) Raft() *raftgroup.Group {
	if g, ok := r.lead.(interface{ Raft() *raftgroup.Group }); ok {
		return g.Raft()
	}
	return nil
}

func (r *raftGroup) remove(purge bool) error { return r.host.RemoveGroup(r.g.ID(), purge) }

// propose proposes data and waits for its apply, returning what the state
// machine returned.
func (r *raftGroup) propose(ctx context.Context, data ...[]byte) (any, error) {
	p, err := r.g.Propose(ctx, data...)
	if err != nil {
		return nil, classify(err)
	}
	res, err := p.Wait(ctx)
	return res.Value, classify(err)
}

func groupStatus(s raftgroup.Status) GroupStatus {
	return GroupStatus{Group: s.Group, Role: s.Role.String(), Term: s.Term, Leader: s.Leader,
		Commit: s.Commit, Applied: s.Applied, Voters: s.Voters, Learner: s.Learners, VotersOutgoing: s.VotersOutgoing}
}

// classify wraps a raftgroup failure in the broker's error for it.
func classify(err error) error {
	var kind error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftgroup.ErrLeadershipLost): // before ErrNotLeader, which it joins
		kind = errLeadershipLost
	case errors.Is(err, raftgroup.ErrNotLeader):
		kind = errNotLeader
	case errors.Is(err, raftgroup.ErrProposalLost):
		kind = errAppendLost
	case errors.Is(err, raftgroup.ErrProposalDropped):
		kind = errAppendRefused
	case errors.Is(err, raftgroup.ErrOutcomeUnknown):
		kind = errOutcomeUnknown
	case errors.Is(err, raftgroup.ErrStopped):
		kind = errReplicaStopped
	default:
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// openRaftGroup creates the raft group of a partition replica, applying
// to machine.
func (n *Node) openRaftGroup(ref coordinator.PartitionRef, machine raftgroup.StateMachine) (*raftGroup, error) {
	p := ref.Partition
	gc := raftgroup.GroupConfig{ID: p.Group, Peers: p.Replicas, StateMachine: machine, FailOnStepDown: true,
		HoldElectionTicks: electionHold(n.meta.View(), p.Replicas, n.cfg.NodeID, n.cfg.ElectionTicks)}
	if p.Moved {
		// A reassignment changed the group since Replicas founded it:
		// an empty replica waits for its leader to add it.
		gc.Peers, gc.Join = nil, true
	}
	g, err := n.host.CreateGroup(gc)
	if err != nil {
		return nil, err
	}
	if st := g.Status(); !p.Moved && p.Replicas[0] == n.cfg.NodeID && st.Term <= 1 && st.Leader == 0 && !n.inMaintenance() {
		// A brand-new group (raft bootstraps it at term 1): let the
		// preferred leader stand first, so that leaders spread as
		// placement intended and no leader balance moves them later;
		// not a node in maintenance, which would hand it over at once.
		n.goTracked(func() { n.standFirst(n.ctx, g) })
	}
	return &raftGroup{host: n.host, g: g}, nil
}

// standFirst campaigns every tick until the new group has a leader, for
// at most one election timeout (the earliest the other replicas stand).
// A vote request can reach a peer before that peer has created the group,
// and be dropped; and raft will not campaign before the bootstrap
// configuration entries are applied.
func (n *Node) standFirst(ctx context.Context, g *raftgroup.Group) {
	tick := time.NewTicker(n.cfg.TickInterval)
	defer tick.Stop()
	for range n.cfg.ElectionTicks {
		st := g.Status()
		if st.Leader != 0 || st.Stopped {
			return
		}
		if st.Applied >= st.Commit && g.Campaign() != nil {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// raftReplication is a data partition replicated by its raft group.
type raftReplication struct {
	raftGroup
	sm *partition.Replica

	projMu sync.Mutex // guards proj but proj.inflight; a leaf
	proj   projection
}

// openRaftReplication opens the partition state machine in cfg and starts
// its raft group.
func (n *Node) openRaftReplication(ref coordinator.PartitionRef, cfg partition.ReplicaConfig) (*raftReplication, error) {
	sm, err := partition.OpenReplica(cfg)
	if gap := (*partition.GapError)(nil); errors.As(err, &gap) {
		// Damage raft cannot replay: refill it from a peer (repair.go).
		if ferr := n.fillFromPeers(ref, cfg, gap); ferr != nil {
			return nil, fmt.Errorf("%w; %w", err, ferr)
		}
		sm, err = partition.OpenReplica(cfg)
	}
	if err != nil {
		return nil, err
	}
	g, err := n.openRaftGroup(ref, sm)
	if err != nil {
		_ = sm.Close()
		return nil, err
	}
	return &raftReplication{raftGroup: *g, sm: sm}, nil
}

// AwaitLeading: a raft replica learns it leads from its own election.
func (r *raftReplication) AwaitLeading(context.Context) leadership { return r.Leadership() }

func (r *raftReplication) Log() *partition.Log                     { return r.sm.Log() }
func (r *raftReplication) Epochs() []partition.EpochStart          { return r.sm.Epochs() }
func (r *raftReplication) Producers() []partition.ProducerInfo     { return r.sm.Producers() }
func (r *raftReplication) EndOffsetFor(epoch int32) (int32, int64) { return r.sm.EndOffsetFor(epoch) }
func (r *raftReplication) Close() error                            { return r.sm.Close() }

// CaughtUp: the leader has applied its own no-op of the term, and so
// everything committed before it.
func (r *raftReplication) CaughtUp(epoch int32) bool {
	eps := r.sm.Epochs()
	return len(eps) > 0 && eps[len(eps)-1].Epoch == epoch
}

func (r *raftReplication) remove(purge bool) error {
	err := r.raftGroup.remove(purge)
	return errors.Join(err, r.sm.Close())
}

// Append proposes the batch. Its offset is known once appended when the
// projection is exact (projection.go); otherwise only the apply gives it.
// A raft majority commits or nothing does, so acks=all needs no check
// before the append.
func (r *raftReplication) Append(ctx context.Context, batch []byte, info partition.BatchInfo, _ bool) (pendingAppend, error) {
	st := r.g.Status()
	if !st.IsLeader() {
		return nil, fmt.Errorf("%w (leader %d, term %d)", errNotLeader, st.Leader, st.Term)
	}
	r.projMu.Lock()
	defer r.projMu.Unlock()
	base, exact := r.proj.project(st.Term, st.Applied == st.LastIndex, r.sm.Log().EndOffset, int64(info.NumRecords), info.Idempotent())
	p, err := r.g.Propose(ctx, partition.ProduceParts(batch)...)
	if err != nil {
		r.proj.invalidate()
		return nil, classify(err)
	}
	r.track(p)
	if !exact {
		base = -1
	}
	return &raftAppend{p: p, base: base}, nil
}

// track counts p in flight until it finishes; a proposal that fails, or
// whose batch apply refuses, drops the projection. Every proposal
// finishes (with ErrStopped at the latest, when the group closes), so
// the goroutine ends.
func (r *raftReplication) track(p *raftgroup.Proposal) {
	r.proj.inflight.Add(1)
	go func() {
		res, err := p.Wait(context.Background())
		if pr, ok := res.Value.(*partition.ProduceResult); err != nil || !ok || pr.Err != nil {
			r.projMu.Lock()
			r.proj.invalidate()
			r.projMu.Unlock()
		}
		r.proj.inflight.Add(-1)
	}()
}

func (r *raftReplication) AdvanceStart(ctx context.Context, offset int64) error {
	v, err := r.propose(ctx, partition.AdvanceStartEntry(offset))
	if err != nil {
		return err
	}
	if e, ok := v.(error); ok {
		return e
	}
	return nil
}

// raftAppend is a proposed batch.
type raftAppend struct {
	p    *raftgroup.Proposal
	base int64
}

func (a *raftAppend) Appended(ctx context.Context) (int64, error) {
	if _, _, err := a.p.WaitAppended(ctx); err != nil {
		return -1, classify(err)
	}
	return a.base, nil
}

func (a *raftAppend) Committed(ctx context.Context) (partition.ProduceResult, error) {
	res, err := a.p.Wait(ctx)
	if err != nil {
		return partition.ProduceResult{}, classify(err)
	}
	pr, ok := res.Value.(*partition.ProduceResult)
	if !ok {
		return partition.ProduceResult{}, fmt.Errorf("broker: batch applied at %d with %T", res.Index, res.Value)
	}
	return *pr, nil
}

// lagging reports the voters whose log, by the leader's raft progress,
// has not held everything the leader's held for longer than lag
// (laggingVoters, insync_raft.go). The leader itself is never lagging,
// as a Kafka leader is always in its ISR: raft counts its own copy only
// once durable, and a slow fsync of its own is no under-replication.
func (r *raftGroup) lagging(now time.Time, lag time.Duration) (map[uint64]bool, bool) {
	voters, last, ok := r.g.Progress()
	if !ok {
		return nil, false
	}
	self := r.g.Status().Node
	var out map[uint64]bool
	for _, v := range voters {
		if v.ID != self && v.Lag(now, last) > lag {
			if out == nil {
				out = map[uint64]bool{}
			}
			out[v.ID] = true
		}
	}
	return out, true
}
