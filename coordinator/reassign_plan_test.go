package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// moveModel is a raft group's configuration as PlanMove's steps change
// it, with raft's rules for who may lead: a model for driving a move to
// its end from any step, with leaders replaced and targets changed on the
// way. It checks each step against what raft and safety require.
type moveModel struct {
	t        *testing.T
	cfg      GroupConfig
	leader   uint64
	round    int
	joinedAt map[uint64]int // when each learner was added; caught up two rounds later
}

func newMoveModel(t *testing.T, voters []uint64) *moveModel {
	return &moveModel{t: t, cfg: GroupConfig{Voters: slices.Clone(voters)}, leader: voters[0], joinedAt: map[uint64]int{}}
}

func (m *moveModel) caughtUp(id uint64) bool {
	if slices.Contains(m.cfg.Voters, id) || slices.Contains(m.cfg.Outgoing, id) {
		return true
	}
	at, ok := m.joinedAt[id]
	return ok && m.round >= at+2
}

func (m *moveModel) plan(target []uint64) MoveStep {
	return PlanMove(MoveState{Self: m.leader, Leader: true, Config: m.cfg, Target: target, CaughtUp: m.caughtUp})
}

// voting is every replica with a vote: a leader may come from any.
func (m *moveModel) voting() []uint64 { return union(m.cfg.Voters, m.cfg.Outgoing) }

// apply carries out s as raft would, failing the test on a step raft
// would refuse or that could lose committed data.
func (m *moveModel) apply(s MoveStep) {
	m.t.Helper()
	c := &m.cfg
	switch s.Action {
	case MoveAddLearner:
		if slices.Contains(m.voting(), s.Node) || slices.Contains(c.Learners, s.Node) || c.Joint() {
			m.t.Fatalf("add learner %d to %+v", s.Node, *c)
		}
		c.Learners = append(c.Learners, s.Node)
		m.joinedAt[s.Node] = m.round
	case MoveTransfer:
		if !slices.Contains(c.Voters, s.Node) || !m.caughtUp(s.Node) || s.Node == m.leader {
			m.t.Fatalf("transfer to %d in %+v", s.Node, *c)
		}
		m.leader = s.Node
	case MoveEnterJoint:
		if c.Joint() {
			m.t.Fatalf("enter joint from joint %+v", *c)
		}
		for _, id := range s.Promote {
			if !slices.Contains(c.Learners, id) || !m.caughtUp(id) {
				m.t.Fatalf("promote %d, not a caught-up learner of %+v", id, *c)
			}
		}
		next := minus(append(slices.Clone(c.Voters), s.Promote...), s.Remove)
		if len(next) == 0 {
			m.t.Fatalf("enter joint %v leaves no voter in %+v", s, *c)
		}
		c.Outgoing, c.Voters, c.Learners = c.Voters, next, minus(c.Learners, s.Promote)
	case MoveLeaveJoint:
		if !c.Joint() || !slices.Contains(c.Voters, m.leader) {
			m.t.Fatalf("leader %d leaves joint %+v", m.leader, *c)
		}
		c.Outgoing = nil
	case MoveRemove:
		if !slices.Contains(c.Learners, s.Node) {
			m.t.Fatalf("remove %d, no learner of %+v", s.Node, *c)
		}
		c.Learners = minus(c.Learners, []uint64{s.Node})
	}
}

// drive plans and applies steps until the move completes, replacing the
// leader with a random voter before a step with probability pFail and
// switching to target2 at round switchAt (-1: never). It returns the
// target it completed and the round it did.
func (m *moveModel) drive(rng *rand.Rand, target, target2 []uint64, switchAt int, pFail float64) ([]uint64, int) {
	m.t.Helper()
	for m.round = 0; m.round < 200; m.round++ {
		if m.round == switchAt {
			target = target2
		}
		if rng.Float64() < pFail {
			v := m.voting()
			m.leader = v[rng.IntN(len(v))] // a crash and an election: the planner keeps no state
		}
		s := m.plan(target)
		switch s.Action {
		case MoveNone:
			m.t.Fatal("the leader planned nothing")
		case MoveWait:
			continue
		case MoveComplete:
			if !sameSet(m.cfg.Voters, target) || m.cfg.Joint() || len(m.cfg.Learners) > 0 {
				m.t.Fatalf("complete at %+v for target %v", m.cfg, target)
			}
			return target, m.round
		}
		m.apply(s)
	}
	m.t.Fatalf("no completion after 200 rounds: %+v, target %v", m.cfg, target)
	return nil, 0
}

var moveCases = []struct{ from, to []uint64 }{
	{[]uint64{1, 2, 3}, []uint64{4, 5, 6}}, // every replica, the leader too
	{[]uint64{1, 2, 3}, []uint64{2, 3, 4}}, // the leader, with target voters left
	{[]uint64{1, 2, 3}, []uint64{1, 2, 4}}, // a follower
	{[]uint64{1, 2, 3}, []uint64{4}},       // down to one new replica
	{[]uint64{1, 2, 3}, []uint64{1}},       // down to the leader
	{[]uint64{1, 2, 3}, []uint64{3}},       // down to a follower
	{[]uint64{1}, []uint64{2, 3, 4}},       // up from one
	{[]uint64{1, 2, 3}, []uint64{1, 2, 3, 4, 5}},
	{[]uint64{1, 2, 3, 4, 5}, []uint64{1, 2, 3}},
}

// Each case moves to its end, with leaders failing at every step.
func TestPlanMove_ReachesTarget(t *testing.T) {
	for _, tc := range moveCases {
		for seed := range uint64(50) {
			t.Run(fmt.Sprintf("%v-%v/%d", tc.from, tc.to, seed), func(t *testing.T) {
				m := newMoveModel(t, tc.from)
				m.drive(rand.New(rand.NewPCG(seed, 1)), tc.to, nil, -1, float64(seed%5)/5)
			})
		}
	}
}

// A cancel at any round before the move completes leads back to the
// original replicas (after it, group 0 refuses the cancel).
func TestPlanMove_CancelAtEachStep(t *testing.T) {
	for _, tc := range moveCases {
		for at := range 12 {
			for seed := range uint64(10) {
				t.Run(fmt.Sprintf("%v-%v/at%d/%d", tc.from, tc.to, at, seed), func(t *testing.T) {
					m := newMoveModel(t, tc.from)
					got, done := m.drive(rand.New(rand.NewPCG(seed, 2)), tc.to, tc.from, at, 0.3)
					if done >= at && !slices.Equal(got, tc.from) {
						t.Fatalf("completed %v at round %d, after a cancel at round %d", got, done, at)
					}
				})
			}
		}
	}
}

// The plan of each step, from a move of {1,2,3} to {2,3,4} led by 1.
func TestPlanMove_Steps(t *testing.T) {
	up := func(ids ...uint64) func(uint64) bool {
		return func(id uint64) bool { return slices.Contains(ids, id) }
	}
	target := []uint64{2, 3, 4}
	cases := []struct {
		name string
		s    MoveState
		want string
	}{
		{"follower", MoveState{Self: 2, Config: GroupConfig{Voters: []uint64{1, 2, 3}}, Target: target}, "none"},
		{"add", MoveState{Self: 1, Leader: true, Config: GroupConfig{Voters: []uint64{1, 2, 3}}, Target: target, CaughtUp: up()}, "add-learner 4"},
		{"catching up", MoveState{Self: 1, Leader: true, Config: GroupConfig{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, Target: target, CaughtUp: up(1, 2, 3)}, "wait"},
		{"leader leaves first", MoveState{Self: 1, Leader: true, Config: GroupConfig{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, Target: target, CaughtUp: up(1, 2, 3, 4)}, "transfer 2"},
		{"joint", MoveState{Self: 2, Leader: true, Config: GroupConfig{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, Target: target, CaughtUp: up(1, 2, 3, 4)}, "enter-joint promote [4] remove [1]"},
		{"leave", MoveState{Self: 2, Leader: true, Config: GroupConfig{Voters: []uint64{2, 3, 4}, Outgoing: []uint64{1, 2, 3}}, Target: target, CaughtUp: up(1, 2, 3, 4)}, "leave-joint"},
		{"joint, removed leader", MoveState{Self: 1, Leader: true, Config: GroupConfig{Voters: []uint64{2, 3, 4}, Outgoing: []uint64{1, 2, 3}}, Target: target, CaughtUp: up(1, 2, 3, 4)}, "transfer 2"},
		{"stray learner", MoveState{Self: 2, Leader: true, Config: GroupConfig{Voters: []uint64{2, 3, 4}, Learners: []uint64{5}}, Target: target, CaughtUp: up(2, 3, 4)}, "remove 5"},
		{"done", MoveState{Self: 2, Leader: true, Config: GroupConfig{Voters: []uint64{4, 3, 2}}, Target: target, CaughtUp: up(2, 3, 4)}, "complete"},
	}
	for _, tc := range cases {
		if got := PlanMove(tc.s).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
