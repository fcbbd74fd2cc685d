package coordinator

import (
	"context"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/internal/periodic"
	"github.com/raftq/raftq/raftgroup"
)

// RaftReplica is a LocalReplica replicated by its own raft group (raft
// mode), whose membership a reassignment changes. Raft returns nil for
// a replica of another mode.
type RaftReplica interface {
	LocalReplica
	Raft() *raftgroup.Group
}

// moveInterval is how often the move loop plans the next step of every
// move this node's replicas lead; a step itself waits for its commit.
const moveInterval = 200 * time.Millisecond

// moveCaughtUpLag is how recently a learner must have held the leader's
// whole log to be promoted (Kafka's replica.lag.time.max.ms, shorter:
// the joint change waits on it to commit).
const moveCaughtUpLag = time.Second

// moveLoop carries out the moves of the raft partitions this node leads,
// one step per partition and round (PlanMove).
func (c *Controller) moveLoop(ctx context.Context) {
	periodic.Every(ctx, moveInterval, func() { c.driveMoves(ctx) })
}

func (c *Controller) driveMoves(ctx context.Context) {
	moving := movingRaftPartitions(c.cfg.Metadata.View())
	if len(moving) == 0 {
		return
	}
	for _, lr := range c.cfg.Local() {
		ref, ok := moving[lr.Group()]
		rr, raft := lr.(RaftReplica)
		if !ok || !raft || rr.Raft() == nil {
			continue
		}
		g := rr.Raft()
		step := PlanMove(moveStateOf(g, c.cfg.NodeID, ref.Partition.Target))
		if step.Action == MoveNone || step.Action == MoveWait {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.takeStep(sctx, g, rr, ref, step)
		cancel()
		c.log.Info("reassignment step", "topic", ref.Topic.Name, "partition", ref.Partition.Index,
			"target", ref.Partition.Target, "step", step.String(), "err", err)
	}
}

// movingRaftPartitions indexes the moving raft partitions by group.
func movingRaftPartitions(s *State) map[uint64]PartitionRef {
	out := map[uint64]PartitionRef{}
	for _, t := range s.Topics {
		if t.IsISR() {
			continue
		}
		for i := range t.Partitions {
			if p := &t.Partitions[i]; p.Moving() {
				out[p.Group] = PartitionRef{t, p}
			}
		}
	}
	return out
}

// moveStateOf reads what PlanMove needs from group g on this node.
func moveStateOf(g *raftgroup.Group, self uint64, target []uint64) MoveState {
	st := g.Status()
	return MoveState{
		Self:   self,
		Leader: st.IsLeader() && st.LeadTransferee == 0,
		Config: GroupConfig{Voters: st.Voters, Outgoing: st.VotersOutgoing,
			Learners: append(append([]uint64(nil), st.Learners...), st.LearnersNext...)},
		Target: target,
		CaughtUp: func(id uint64) bool {
			p, last, ok := g.MemberProgress(id)
			return ok && p.Lag(time.Now(), last) < moveCaughtUpLag
		},
	}
}

func (c *Controller) takeStep(ctx context.Context, g *raftgroup.Group, r LocalReplica, ref PartitionRef, s MoveStep) error {
	switch s.Action {
	case MoveTransfer:
		return r.TransferLeadership(ctx, s.Node)
	case MoveComplete:
		res, err := c.Propose(ctx, &Command{CompleteReassignment: &CompleteReassignment{Group: ref.Partition.Group, Target: ref.Partition.Target}})
		if err != nil {
			return err
		}
		return res.Err
	}
	p, err := g.ProposeConfChange(ctx, confChangeOf(s))
	if err != nil {
		return err
	}
	_, err = p.Wait(ctx)
	return err
}

// confChangeOf is the raft membership change of a step: a joint change
// is explicit, so that the leader leaves it only after any transfer of
// leadership the joint configuration needs (PlanMove, step 4).
func confChangeOf(s MoveStep) *raftpb.ConfChangeV2 {
	single := func(t raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeSingle {
		return &raftpb.ConfChangeSingle{Type: t.Enum(), NodeId: proto.Uint64(id)}
	}
	cc := &raftpb.ConfChangeV2{}
	switch s.Action {
	case MoveAddLearner:
		cc.Changes = append(cc.Changes, single(raftpb.ConfChangeAddLearnerNode, s.Node))
	case MoveRemove:
		cc.Changes = append(cc.Changes, single(raftpb.ConfChangeRemoveNode, s.Node))
	case MoveEnterJoint:
		cc.Transition = raftpb.ConfChangeTransitionJointExplicit.Enum()
		for _, id := range s.Promote {
			cc.Changes = append(cc.Changes, single(raftpb.ConfChangeAddNode, id))
		}
		for _, id := range s.Remove {
			cc.Changes = append(cc.Changes, single(raftpb.ConfChangeRemoveNode, id))
		}
	case MoveLeaveJoint: // the empty change leaves a joint configuration
	}
	return cc
}
