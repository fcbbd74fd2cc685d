package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The membership nemesis changes which nodes hold a partition while the
// workload runs, through the cluster's admin API (Kafka's
// AlterPartitionReassignments and ListPartitionReassignments), which an
// Env offers by implementing MembershipEnv. Each membership fault
// performs one action of the action table (memberTable), drawn by Plan;
// what the action does (which partitions, which replicas, which node to
// kill) is chosen when the fault starts, from the cluster as it then is
// and the fault's seed, so that it never names a partition that is
// moving or a target the cluster must refuse.

// MemberAction is one row of the membership nemesis' action table.
type MemberAction string

// The actions. Decommission and recommission of a node, and Kafka's
// ElectLeaders, are to join them as rows of memberTable.
const (
	// ActionMove reassigns one or two partitions to other replicas (now
	// and then another number of them); the stop waits for the moves to
	// end, and cancels those that do not end in time.
	ActionMove MemberAction = "move"
	// ActionReorder gives a partition the same replicas in another order:
	// the preferred leader changes at once and the cluster's leader
	// balance transfers leadership to it. The stop waits for the new
	// leader.
	ActionReorder MemberAction = "reorder"
	// ActionCancel moves a partition and cancels the move a moment later,
	// while it is under way; the stop waits for the way back.
	ActionCancel MemberAction = "cancel"
	// ActionKillMidMove moves a partition and, while the move is under
	// way, kills (SIGKILL) its leader or one of the replicas being added;
	// the stop restarts that node, then waits for the move as move's stop
	// does.
	ActionKillMidMove MemberAction = "kill-mid-move"
	// ActionDecommission decommissions a node (the cluster moves its
	// replicas and its metadata vote to the others) and recommissions it
	// at the fault's stop, emptied or not (then its moves are cancelled).
	ActionDecommission MemberAction = "decommission"
)

// MemberActions lists every action.
var MemberActions = []MemberAction{ActionMove, ActionReorder, ActionCancel, ActionKillMidMove, ActionDecommission}

// TopicPartition names a partition of a topic.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// PartitionReplicas is one partition as the cluster's controller sees
// it.
type PartitionReplicas struct {
	TopicPartition
	// Replicas are its replicas, the preferred leader first; while it
	// moves, every node that holds a copy.
	Replicas []int
	// Leader is the node that leads it, 0 when none does or none is
	// known.
	Leader int
	// Moving says a reassignment of it is under way; Adding are the
	// replicas that move adds.
	Moving bool
	Adding []int
}

// Reassignment is one item of a reassignment request: move TP from
// From (for people; the cluster knows) to To, the preferred leader
// first, or cancel its move when To is nil.
type Reassignment struct {
	TopicPartition
	From []int
	To   []int
}

// String reads "jepsen/3 [1,2,3]->[4,5,2]", or "cancel jepsen/3".
func (r Reassignment) String() string {
	if r.To == nil {
		return "cancel " + r.TopicPartition.String()
	}
	return fmt.Sprintf("%s %s->%s", r.TopicPartition, ids(r.From), ids(r.To))
}

// ids formats node ids as "[1,2,3]".
func ids(s []int) string {
	parts := make([]string, len(s))
	for i, id := range s {
		parts[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// MembershipEnv is an Env that can also change which nodes hold the
// partitions the workload uses: what the membership nemesis needs.
type MembershipEnv interface {
	Env
	// Running reports whether node id's process is alive.
	Running(id int) bool
	// Assignment lists the partitions the nemesis may move, with their
	// replicas and leaders, as the cluster sees them now.
	Assignment(ctx context.Context) ([]PartitionReplicas, error)
	// Reassign starts the moves and cancels of items in one request:
	// errs has one entry per item, nil for one the cluster accepted; err
	// is the request's, and then no item is known to have been taken or
	// refused.
	Reassign(ctx context.Context, items []Reassignment) (errs []error, err error)
	// Decommission starts (on) or cancels (off: recommission) the
	// decommissioning of node id.
	Decommission(ctx context.Context, id int, on bool) error
}

// MembershipConfig tunes the membership nemesis.
type MembershipConfig struct {
	// Actions are the actions Plan draws from, uniformly.
	Actions []MemberAction
	// ReplicationFactor is the test topic's: the number of replicas a
	// move's target has, unless ResizeP decides otherwise.
	ReplicationFactor int
	// MinReplicas is the fewest replicas a target may have: 1 for raft,
	// min.insync.replicas for ISR (fewer could never take an acks=all
	// write, and the cluster refuses them).
	MinReplicas int
	// ResizeP is the chance that a move's target has another number of
	// replicas, drawn uniformly from MinReplicas to the cluster's size.
	ResizeP float64
	// Settle bounds how long a membership fault's stop waits for its
	// moves to end before it cancels them; the stop never waits past the
	// schedule's next step, so that it does not delay another fault.
	Settle time.Duration
}

// DefaultMembershipConfig returns every action, replication factor 3,
// a target of another size one move in five, and a 20 s settle.
func DefaultMembershipConfig() MembershipConfig {
	return MembershipConfig{Actions: slices.Clone(MemberActions), ReplicationFactor: 3, MinReplicas: 1,
		ResizeP: 0.2, Settle: 20 * time.Second}
}

// Validate checks the config for a cluster of nodes nodes.
func (c MembershipConfig) Validate(nodes int) error {
	switch {
	case len(c.Actions) == 0:
		return errors.New("chaos: membership needs actions")
	case c.MinReplicas < 1 || c.ReplicationFactor < c.MinReplicas:
		return fmt.Errorf("chaos: membership with replication factor %d and at least %d replicas", c.ReplicationFactor, c.MinReplicas)
	case c.ReplicationFactor > nodes:
		return fmt.Errorf("chaos: membership with replication factor %d on %d nodes", c.ReplicationFactor, nodes)
	case c.ResizeP < 0 || c.ResizeP > 1:
		return fmt.Errorf("chaos: membership resize probability %g", c.ResizeP)
	case c.Settle <= 0:
		return errors.New("chaos: membership needs a positive settle time")
	}
	for _, a := range c.Actions {
		if _, ok := memberTable[a]; !ok {
			return fmt.Errorf("chaos: unknown membership action %q (want one of %v)", a, MemberActions)
		}
	}
	return nil
}

// checkTarget reports why to is not a target the cluster must accept:
// empty, too few replicas, a node listed twice, or a node not in nodes.
func (c MembershipConfig) checkTarget(to, nodes []int) error {
	if len(to) == 0 || len(to) < c.MinReplicas {
		return fmt.Errorf("chaos: target %s has fewer than %d replicas", ids(to), max(1, c.MinReplicas))
	}
	for i, id := range to {
		if slices.Contains(to[:i], id) {
			return fmt.Errorf("chaos: target %s lists %d twice", ids(to), id)
		}
		if !slices.Contains(nodes, id) {
			return fmt.Errorf("%w: target %s names %d", ErrUnknownNode, ids(to), id)
		}
	}
	return nil
}

// MemberState is the cluster as a membership action chooses from it.
type MemberState struct {
	Nodes      []int // every node a replica may go to
	Partitions []PartitionReplicas
}

// ErrNothingToMove is returned when every partition is moving, or no
// other replica set exists.
var ErrNothingToMove = errors.New("chaos: no partition to move")

// Victims of kill-mid-move.
const (
	victimLeader = "leader"
	victimAdding = "adding"
)

// memberPlan is what an action chose.
type memberPlan struct {
	moves  []Reassignment
	victim string        // kill-mid-move: victimLeader or victimAdding
	delay  time.Duration // cancel, kill-mid-move: from the move's start
	node   int           // decommission: the node
}

// Bounds of the delays an action draws: small, because a raft move of
// the workload's partitions takes under a second (a step per 200 ms
// round of the leader's move loop: add learners, maybe transfer, enter
// and leave the joint configuration, complete).
const (
	maxCancelDelay = 600 * time.Millisecond
	maxKillDelay   = 700 * time.Millisecond
)

// memberAction is a row of the action table: how the action chooses
// what to do from the cluster's state (a pure function of its random
// source and the state), how its fault starts and how it stops. Start
// returns the detail of the step and the nodes it killed; stop its
// detail.
type memberAction struct {
	choose func(rng *rand.Rand, st MemberState, cfg MembershipConfig) (memberPlan, error)
	start  func(ctx context.Context, m *memberRun) (string, error)
	stop   func(ctx context.Context, m *memberRun) (string, error)
}

var memberTable = map[MemberAction]memberAction{
	ActionMove:         {choose: chooseMoves, start: startMoves, stop: settleMoves},
	ActionReorder:      {choose: chooseReorder, start: startReorder, stop: awaitLeader},
	ActionCancel:       {choose: chooseCancel, start: startThenCancel, stop: settleMoves},
	ActionKillMidMove:  {choose: chooseKillMidMove, start: startThenKill, stop: restartThenSettle},
	ActionDecommission: {choose: chooseDecommission, start: startDecommission, stop: recommission},
}

// chooseDecommission picks a node to decommission, when the others can
// hold every replica of the replication factor and a majority of five.
func chooseDecommission(rng *rand.Rand, st MemberState, cfg MembershipConfig) (memberPlan, error) {
	if len(st.Nodes)-1 < max(cfg.ReplicationFactor, len(st.Nodes)/2+1) {
		return memberPlan{}, ErrNothingToMove
	}
	return memberPlan{node: st.Nodes[rng.IntN(len(st.Nodes))]}, nil
}

// chooseMembership is the choice of action a: deterministic for a given
// random source and state, and every target it returns passes
// checkTarget.
func chooseMembership(a MemberAction, rng *rand.Rand, st MemberState, cfg MembershipConfig) (memberPlan, error) {
	row, ok := memberTable[a]
	if !ok {
		return memberPlan{}, fmt.Errorf("chaos: unknown membership action %q", a)
	}
	st = st.normal()
	p, err := row.choose(rng, st, cfg)
	if err != nil {
		return memberPlan{}, err
	}
	for _, mv := range p.moves {
		if err := cfg.checkTarget(mv.To, st.Nodes); err != nil {
			panic(fmt.Sprintf("chaos: %s chose %s: %v", a, mv, err)) // a broken invariant of the choosers
		}
	}
	return p, nil
}

// normal sorts nodes and partitions, so that the choice does not depend
// on the order an Env listed them in.
func (st MemberState) normal() MemberState {
	out := MemberState{Nodes: sorted(st.Nodes), Partitions: slices.Clone(st.Partitions)}
	slices.SortFunc(out.Partitions, func(a, b PartitionReplicas) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// still lists, shuffled, the partitions that are not moving.
func (st MemberState) still(rng *rand.Rand) []PartitionReplicas {
	var out []PartitionReplicas
	for _, p := range st.Partitions {
		if !p.Moving && len(p.Replicas) > 0 {
			out = append(out, p)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// chooseMoves picks one or two partitions that are not moving and a
// new replica set for each.
func chooseMoves(rng *rand.Rand, st MemberState, cfg MembershipConfig) (memberPlan, error) {
	want := 1 + rng.IntN(2)
	var p memberPlan
	for _, part := range st.still(rng) {
		if len(p.moves) == want {
			break
		}
		if to, ok := moveTarget(rng, part.Replicas, st.Nodes, cfg); ok {
			p.moves = append(p.moves, Reassignment{TopicPartition: part.TopicPartition, From: part.Replicas, To: to})
		}
	}
	if len(p.moves) == 0 {
		return p, ErrNothingToMove
	}
	return p, nil
}

// chooseCancel picks one move and when to cancel it.
func chooseCancel(rng *rand.Rand, st MemberState, cfg MembershipConfig) (memberPlan, error) {
	p, err := chooseOneMove(rng, st, cfg)
	p.delay = time.Duration(rng.Int64N(int64(maxCancelDelay)))
	return p, err
}

// chooseKillMidMove picks one move, when to kill, and whom: the
// partition's leader or, when the move adds any, an adding replica.
func chooseKillMidMove(rng *rand.Rand, st MemberState, cfg MembershipConfig) (memberPlan, error) {
	p, err := chooseOneMove(rng, st, cfg)
	p.delay = time.Duration(rng.Int64N(int64(maxKillDelay)))
	p.victim = victimLeader
	if err == nil && rng.IntN(2) == 0 && len(minusInts(p.moves[0].To, p.moves[0].From)) > 0 {
		p.victim = victimAdding
	}
	return p, err
}

func chooseOneMove(rng *rand.Rand, st MemberState, cfg MembershipConfig) (memberPlan, error) {
	for _, part := range st.still(rng) {
		if to, ok := moveTarget(rng, part.Replicas, st.Nodes, cfg); ok {
			return memberPlan{moves: []Reassignment{{TopicPartition: part.TopicPartition, From: part.Replicas, To: to}}}, nil
		}
	}
	return memberPlan{}, ErrNothingToMove
}

// moveTarget draws a replica set other than cur, in random order (its
// first is the preferred leader): of cfg.ReplicationFactor nodes, or
// with probability cfg.ResizeP of another size from cfg.MinReplicas to
// len(nodes). It fails only when no other set of any allowed size
// exists.
func moveTarget(rng *rand.Rand, cur, nodes []int, cfg MembershipConfig) ([]int, bool) {
	lo, hi := max(1, cfg.MinReplicas), len(nodes)
	if lo > hi {
		return nil, false
	}
	rf := min(max(cfg.ReplicationFactor, lo), hi)
	if others := hi - lo; others > 0 && rng.Float64() < cfg.ResizeP {
		n := lo + rng.IntN(others) // one of the sizes other than rf
		if n >= rf {
			n++
		}
		rf = n
	}
	sizes := []int{rf}
	for n := hi; n >= lo; n-- { // fallbacks, when every set of size rf is cur's
		if n != rf {
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		to := shuffled(nodes, rng)[:n]
		if !sameSet(to, cur) {
			return to, true
		}
		if out := minusInts(nodes, cur); len(out) > 0 { // to is cur reordered: swap one out
			to[rng.IntN(n)] = out[rng.IntN(len(out))]
			return to, true
		}
	}
	return nil, false
}

// chooseReorder picks a partition that is not moving and has two
// replicas or more, and puts another replica first: preferably not the
// node that leads it, so that leadership has to move.
func chooseReorder(rng *rand.Rand, st MemberState, _ MembershipConfig) (memberPlan, error) {
	for _, part := range st.still(rng) {
		r := part.Replicas
		if len(r) < 2 {
			continue
		}
		cands := slices.DeleteFunc(slices.Clone(r[1:]), func(id int) bool { return id == part.Leader })
		if len(cands) == 0 {
			cands = slices.Clone(r[1:])
		}
		first := cands[rng.IntN(len(cands))]
		rest := shuffled(slices.DeleteFunc(slices.Clone(r), func(id int) bool { return id == first }), rng)
		to := append([]int{first}, rest...)
		return memberPlan{moves: []Reassignment{{TopicPartition: part.TopicPartition, From: r, To: to}}}, nil
	}
	return memberPlan{}, ErrNothingToMove
}

// minusInts returns the ids of a not in b, in a's order.
func minusInts(a, b []int) []int {
	var out []int
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same ids.
func sameSet(a, b []int) bool {
	return len(a) == len(b) && len(minusInts(a, b)) == 0
}
