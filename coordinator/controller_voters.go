package coordinator

import (
	"context"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// promoteWithin is how many entries a learner's log may trail the
// metadata leader's and still be promoted: group 0 takes proposals all
// the time (leadership hints, liveness), so a learner that keeps up is
// seldom exactly at the last index, and one a few entries behind adds no
// wait to commits.
const promoteWithin = 64

// wantedMembers are the nodes that should be members of group 0: the
// initial cluster's and every admitted node, sorted.
func (c *Controller) wantedMembers() []uint64 {
	s := c.cfg.Metadata.View()
	ids := slices.Concat(c.cfg.Nodes, s.AdmittedIDs())
	slices.Sort(ids)
	return slices.DeleteFunc(slices.Compact(ids), func(id uint64) bool { return slices.Contains(s.Removed, id) })
}

// changeVoters moves group 0 towards the voters NextVoters wants, by one
// joint configuration change (promotions and demotions together), and
// only when no earlier change is still in flight. deadSince is when this
// leader first saw each voter dead (the loop's, cleared when the node
// stops leading): a voter counts as dead for long VoterReplaceAfter
// later.
func (c *Controller) changeVoters(ctx context.Context, deadSince map[uint64]time.Time) {
	st := c.group.Status()
	if !st.IsLeader() || len(st.VotersOutgoing) > 0 || len(st.LearnersNext) > 0 {
		return // a joint configuration is being left: one change at a time
	}
	members := c.memberStates(st.Voters, st.Learners, deadSince, time.Now())
	target := c.cfg.MetadataVoters
	if target <= 0 {
		target = DefaultMetadataVoters
	}
	// Ask for learners' progress only when a caught-up learner would
	// change the answer: the question wakes a quiesced group 0.
	hopeful := slices.Clone(members)
	for i := range hopeful {
		hopeful[i].CaughtUp = true
	}
	if slices.Equal(NextVoters(hopeful, target), st.Voters) {
		return
	}
	if !c.markCaughtUp(ctx, members) {
		return
	}
	next := NextVoters(members, target)
	if slices.Equal(next, st.Voters) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := c.group.ProposeConfChange(pctx, voterChange(st.Voters, next))
	if err == nil {
		_, err = p.Wait(pctx)
	}
	c.log.Info("metadata voters change", "from", st.Voters, "to", next, "err", err)
}

// memberStates describes group 0's members for NextVoters: a node is
// alive while its broker is registered and eligible; a voter is dead for
// long once this leader has seen it dead for VoterReplaceAfter.
func (c *Controller) memberStates(voters, learners []uint64, deadSince map[uint64]time.Time, now time.Time) []Member {
	brokers := c.cfg.Metadata.View().Brokers
	alive := func(id uint64) bool {
		b, ok := brokers[id]
		return id == c.cfg.NodeID || ok && b.Eligible()
	}
	removed := c.cfg.Metadata.View().Removed
	leaving := func(id uint64) bool { // a decommission moves its vote too
		b, ok := brokers[id]
		return ok && b.Decommissioned || slices.Contains(removed, id)
	}
	var out []Member
	for _, id := range voters {
		m := Member{ID: id, Voter: true, Leader: id == c.cfg.NodeID, Alive: alive(id), Leaving: leaving(id)}
		if m.Alive {
			delete(deadSince, id)
		} else {
			since, ok := deadSince[id]
			if !ok {
				since, deadSince[id] = now, now
			}
			m.DeadLong = c.cfg.VoterReplaceAfter > 0 && now.Sub(since) >= c.cfg.VoterReplaceAfter
		}
		out = append(out, m)
	}
	for id := range deadSince {
		if !slices.Contains(voters, id) {
			delete(deadSince, id) // no longer a voter
		}
	}
	for _, id := range learners {
		out = append(out, Member{ID: id, Alive: alive(id), Leaving: leaving(id)})
	}
	return out
}

// markCaughtUp sets CaughtUp on the learners whose log is within
// promoteWithin of the leader's; false if the leader's view is not to be
// had (no longer leading, stopping).
func (c *Controller) markCaughtUp(ctx context.Context, members []Member) bool {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	progress, last, ok, err := c.group.Members(qctx)
	if err != nil || !ok {
		return false
	}
	for i := range members {
		for _, p := range progress {
			if p.ID == members[i].ID && p.Match+promoteWithin >= last {
				members[i].CaughtUp = true
			}
		}
	}
	return true
}

// voterChange is the joint configuration change from voters from to to:
// new voters are promoted (AddNode), old ones demoted to learners, so a
// replaced voter that comes back follows the log and may vote again
// later. JointImplicit enters a joint configuration even for a single
// change and leaves it automatically once it is committed.
func voterChange(from, to []uint64) *raftpb.ConfChangeV2 {
	cc := &raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransition_ConfChangeTransitionJointImplicit.Enum()}
	for _, id := range to {
		if !slices.Contains(from, id) {
			cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(id)})
		}
	}
	for _, id := range from {
		if !slices.Contains(to, id) {
			cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(id)})
		}
	}
	return cc
}
