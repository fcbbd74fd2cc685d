package coordinator

import (
	"fmt"
	"slices"
)

// A raft partition moves by a sequence of membership changes of its raft
// group, each committed before the next is planned. PlanMove computes the
// next one from the group's configuration (in its raft log, so durable)
// and the move's target (in group 0), and nothing else: a leader that
// crashed, was replaced or saw the target change (a cancel) plans from
// wherever the group stands, so no step needs remembering. The order:
//
//  1. every target replica that is not a member joins as a learner (one
//     at a time), and catches up (a snapshot first, for a long log);
//  2. the leader, if the target leaves it out and another target replica
//     already votes, hands its leadership to that replica first;
//  3. one joint-consensus change (raft's C_old,new) makes the caught-up
//     learners voters and removes the voters outside the target;
//  4. in the joint configuration a leader outside the target hands its
//     leadership to a target voter, which then leaves the joint
//     configuration (C_new);
//  5. learners outside the target (left by a cancel) are removed;
//  6. the group runs on the target alone: the move is complete.
//
// A learner is promoted only once it is caught up, so that the new
// quorum holds the log, and no change starts while the joint one lasts.

// MoveAction is a kind of step PlanMove plans.
type MoveAction int

// The steps of a move.
const (
	MoveNone       MoveAction = iota // not this node's to act on: it does not lead
	MoveWait                         // learners are catching up
	MoveAddLearner                   // add Node as a learner
	MoveTransfer                     // hand leadership to Node
	MoveEnterJoint                   // promote Promote, remove Remove, jointly
	MoveLeaveJoint                   // leave the joint configuration
	MoveRemove                       // remove Node (a learner outside the target)
	MoveComplete                     // propose CompleteReassignment
)

func (a MoveAction) String() string {
	return [...]string{"none", "wait", "add-learner", "transfer", "enter-joint", "leave-joint", "remove", "complete"}[a]
}

// GroupConfig is a raft group's configuration as its leader sees it.
type GroupConfig struct {
	Voters   []uint64
	Outgoing []uint64 // the old voters, in a joint configuration
	Learners []uint64
}

// Joint reports whether the configuration is a joint one.
func (c GroupConfig) Joint() bool { return len(c.Outgoing) > 0 }

// MoveStep is one step of a move.
type MoveStep struct {
	Action  MoveAction
	Node    uint64
	Promote []uint64
	Remove  []uint64
}

func (s MoveStep) String() string {
	switch s.Action {
	case MoveAddLearner, MoveTransfer, MoveRemove:
		return fmt.Sprintf("%s %d", s.Action, s.Node)
	case MoveEnterJoint:
		return fmt.Sprintf("%s promote %v remove %v", s.Action, s.Promote, s.Remove)
	}
	return s.Action.String()
}

// MoveState is what PlanMove reads: the group's configuration, this
// node's id and whether it leads, the move's target, and which members
// hold (nearly) the leader's whole log.
type MoveState struct {
	Self     uint64
	Leader   bool
	Config   GroupConfig
	Target   []uint64
	CaughtUp func(id uint64) bool
}

// PlanMove returns the next step of a move (see the order above).
func PlanMove(s MoveState) MoveStep {
	if !s.Leader {
		return MoveStep{Action: MoveNone}
	}
	c := s.Config
	if c.Joint() {
		if !slices.Contains(c.Voters, s.Self) {
			return s.transferTo(c.Voters)
		}
		return MoveStep{Action: MoveLeaveJoint}
	}
	if add := minus(minus(s.Target, c.Voters), c.Learners); len(add) > 0 {
		return MoveStep{Action: MoveAddLearner, Node: add[0]}
	}
	promote := keep(s.Target, c.Learners)
	remove := minus(c.Voters, s.Target)
	if len(promote) > 0 || len(remove) > 0 {
		for _, id := range promote {
			if !s.CaughtUp(id) {
				return MoveStep{Action: MoveWait}
			}
		}
		if slices.Contains(remove, s.Self) {
			if targetVoters := keep(s.Target, c.Voters); len(targetVoters) > 0 {
				return s.transferTo(targetVoters)
			}
		}
		return MoveStep{Action: MoveEnterJoint, Promote: promote, Remove: remove}
	}
	if extra := minus(c.Learners, s.Target); len(extra) > 0 {
		return MoveStep{Action: MoveRemove, Node: extra[0]}
	}
	return MoveStep{Action: MoveComplete}
}

// transferTo hands leadership to the first caught-up candidate, or waits
// for one: raft moves leadership only to a voter holding the whole log.
func (s MoveState) transferTo(candidates []uint64) MoveStep {
	for _, id := range candidates {
		if id != s.Self && s.CaughtUp(id) {
			return MoveStep{Action: MoveTransfer, Node: id}
		}
	}
	return MoveStep{Action: MoveWait}
}
