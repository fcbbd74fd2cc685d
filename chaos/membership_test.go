package chaos

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// fiveNodeState is topic t's four partitions on five nodes, each led by
// its first replica.
func fiveNodeState() MemberState {
	st := MemberState{Nodes: []int{1, 2, 3, 4, 5}}
	for i, r := range [][]int{{1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 1}} {
		st.Partitions = append(st.Partitions, PartitionReplicas{TopicPartition: TopicPartition{"t", int32(i)}, Replicas: r, Leader: r[0]})
	}
	return st
}

func memberCfg(rf, least int, resize float64) MembershipConfig {
	c := DefaultMembershipConfig()
	c.ReplicationFactor, c.MinReplicas, c.ResizeP = rf, least, resize
	return c
}

func chooseFor(t *testing.T, a MemberAction, seed uint64, st MemberState, cfg MembershipConfig) (memberPlan, error) {
	t.Helper()
	return chooseMembership(a, rand.New(rand.NewPCG(seed, 1)), st, cfg)
}

func TestChooseMembership_SameSeedSameChoice(t *testing.T) {
	st, cfg := fiveNodeState(), memberCfg(3, 1, 0.5)
	shuffledSt := st
	shuffledSt.Nodes = []int{5, 3, 1, 4, 2}
	shuffledSt.Partitions = slices.Clone(st.Partitions)
	slices.Reverse(shuffledSt.Partitions)
	differ := 0
	for _, a := range MemberActions {
		for seed := range uint64(50) {
			p1, err1 := chooseFor(t, a, seed, st, cfg)
			p2, err2 := chooseFor(t, a, seed, st, cfg)
			p3, err3 := chooseFor(t, a, seed, shuffledSt, cfg)
			if err1 != nil || !reflect.DeepEqual(p1, p2) || !reflect.DeepEqual(p1, p3) || err2 != nil || err3 != nil {
				t.Fatalf("%s seed %d: %+v (%v), again %+v (%v), listed in another order %+v (%v)", a, seed, p1, err1, p2, err2, p3, err3)
			}
			if p0, _ := chooseFor(t, a, seed+1000, st, cfg); !reflect.DeepEqual(p0, p1) {
				differ++
			}
		}
	}
	if differ < 100 {
		t.Errorf("only %d of 200 choices changed with the seed", differ)
	}
}

// TestChooseMembership_NeverAnInvalidTarget draws many choices of every
// action on clusters where few targets exist and checks each against
// the rules the cluster enforces, independently of checkTarget.
func TestChooseMembership_NeverAnInvalidTarget(t *testing.T) {
	three := MemberState{Nodes: []int{1, 2, 3}, Partitions: []PartitionReplicas{
		{TopicPartition: TopicPartition{"t", 0}, Replicas: []int{1, 2, 3}, Leader: 2},
		{TopicPartition: TopicPartition{"t", 1}, Replicas: []int{3, 1, 2}},
	}}
	someMoving := fiveNodeState()
	someMoving.Partitions[0].Moving, someMoving.Partitions[2].Moving = true, true
	for name, tc := range map[string]struct {
		st  MemberState
		cfg MembershipConfig
	}{
		"raft rf3 of 5":         {fiveNodeState(), memberCfg(3, 1, 0.3)},
		"raft always resized":   {fiveNodeState(), memberCfg(3, 1, 1)},
		"isr min 2 resized":     {fiveNodeState(), memberCfg(3, 2, 1)},
		"isr min 3":             {fiveNodeState(), memberCfg(3, 3, 0.5)},
		"rf3 of 3":              {three, memberCfg(3, 1, 0)},
		"isr rf3 of 3, min 2":   {three, memberCfg(3, 2, 0.5)},
		"two partitions moving": {someMoving, memberCfg(3, 1, 0.3)},
	} {
		sizes := map[int]int{}
		for _, a := range moveActions() {
			for seed := range uint64(300) {
				p, err := chooseFor(t, a, seed, tc.st, tc.cfg)
				if err != nil {
					t.Fatalf("%s: %s seed %d: %v", name, a, seed, err)
				}
				if len(p.moves) == 0 || (a != ActionMove && len(p.moves) != 1) || len(p.moves) > 2 {
					t.Fatalf("%s: %s seed %d: %d moves", name, a, seed, len(p.moves))
				}
				for _, mv := range p.moves {
					checkChosen(t, name, a, tc.st, tc.cfg, mv)
					sizes[len(mv.To)]++
				}
				if a == ActionKillMidMove && p.victim == victimAdding && len(minusInts(p.moves[0].To, p.moves[0].From)) == 0 {
					t.Fatalf("%s: seed %d: kill an adding replica of %s, which adds none", name, seed, p.moves[0])
				}
				if (a == ActionCancel && p.delay >= maxCancelDelay) || (a == ActionKillMidMove && p.delay >= maxKillDelay) || p.delay < 0 {
					t.Fatalf("%s: %s seed %d: delay %s", name, a, seed, p.delay)
				}
			}
		}
		if tc.cfg.ResizeP > 0 && len(sizes) < 2 {
			t.Errorf("%s: targets of sizes %v only, although resized with p=%g", name, sizes, tc.cfg.ResizeP)
		}
	}
}

func checkChosen(t *testing.T, name string, a MemberAction, st MemberState, cfg MembershipConfig, mv Reassignment) {
	t.Helper()
	to := mv.To
	var from PartitionReplicas
	for _, p := range st.Partitions {
		if p.TopicPartition == mv.TopicPartition {
			from = p
		}
	}
	bad := ""
	switch {
	case len(to) == 0:
		bad = "empty"
	case len(to) < cfg.MinReplicas:
		bad = "below the minimum"
	case len(to) > len(st.Nodes):
		bad = "more replicas than nodes"
	case from.Replicas == nil:
		bad = "a partition the state does not have"
	case from.Moving:
		bad = "a partition that is moving"
	case !slices.Equal(mv.From, from.Replicas):
		bad = "a wrong From"
	case a == ActionReorder && (!sameSet(to, mv.From) || to[0] == mv.From[0]):
		bad = "a reorder that is none"
	case a != ActionReorder && sameSet(to, mv.From):
		bad = "a move to the same replicas"
	}
	seen := map[int]bool{}
	for _, id := range to {
		if seen[id] {
			bad = "a duplicate"
		}
		seen[id] = true
		if !slices.Contains(st.Nodes, id) {
			bad = "an unknown node"
		}
	}
	if bad != "" {
		t.Fatalf("%s: %s chose %s: %s", name, a, mv, bad)
	}
}

func TestChooseMembership_NothingToMove(t *testing.T) {
	moving := fiveNodeState()
	for i := range moving.Partitions {
		moving.Partitions[i].Moving = true
	}
	one := MemberState{Nodes: []int{1}, Partitions: []PartitionReplicas{{TopicPartition: TopicPartition{"t", 0}, Replicas: []int{1}}}}
	for _, a := range moveActions() {
		if _, err := chooseFor(t, a, 1, moving, memberCfg(3, 1, 0.2)); !errors.Is(err, ErrNothingToMove) {
			t.Errorf("%s with every partition moving: %v", a, err)
		}
		if _, err := chooseFor(t, a, 1, one, memberCfg(1, 1, 1)); !errors.Is(err, ErrNothingToMove) {
			t.Errorf("%s on one node: %v", a, err)
		}
	}
	if _, err := chooseFor(t, "frobnicate", 1, moving, memberCfg(3, 1, 0)); err == nil {
		t.Error("an unknown action chose something")
	}
}

func TestChooseMembership_Reorder(t *testing.T) {
	st := fiveNodeState()
	st.Partitions = st.Partitions[:1]
	st.Partitions[0].Leader = 2 // not the preferred replica
	for seed := range uint64(100) {
		p, err := chooseFor(t, ActionReorder, seed, st, memberCfg(3, 1, 0))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.moves[0].To[0]; got != 3 {
			t.Fatalf("seed %d: reorder to %v puts %d first, want 3: neither the preferred replica 1 nor the leader 2", seed, p.moves[0].To, got)
		}
	}
}

func TestChooseMembership_KillVictims(t *testing.T) {
	victims := map[string]int{}
	for seed := range uint64(200) {
		p, err := chooseFor(t, ActionKillMidMove, seed, fiveNodeState(), memberCfg(3, 1, 0))
		if err != nil {
			t.Fatal(err)
		}
		victims[p.victim]++
	}
	if victims[victimLeader] == 0 || victims[victimAdding] == 0 {
		t.Errorf("victims %v, want both the leader and adding replicas", victims)
	}
}

func TestPlan_Membership(t *testing.T) {
	cfg := planCfg(4, KindMembership, KindKill)
	s := mustPlan(t, cfg)
	actions, seeds := map[MemberAction]int{}, map[uint64]bool{}
	for _, f := range s.Faults {
		if f.Kind != KindMembership {
			continue
		}
		actions[f.Action]++
		seeds[f.Seed] = true
		if f.String() != "membership "+string(f.Action) {
			t.Errorf("fault reads %q", f)
		}
	}
	for _, a := range MemberActions {
		if actions[a] == 0 {
			t.Errorf("no %s among %v", a, actions)
		}
	}
	if n := actions[ActionMove] + actions[ActionReorder] + actions[ActionCancel] + actions[ActionKillMidMove] + actions[ActionDecommission]; len(seeds) != n {
		t.Errorf("%d seeds for %d membership faults", len(seeds), n)
	}
	kills := func(s Schedule) []Fault {
		return slices.DeleteFunc(slices.Clone(s.Faults), func(f Fault) bool { return f.Kind != KindKill })
	}
	alone := mustPlan(t, planCfg(4, KindKill))
	for i, f := range kills(s) {
		g := kills(alone)[i]
		if f.Start != g.Start || f.Stop != g.Stop || !slices.Equal(f.Nodes, g.Nodes) {
			t.Fatalf("membership changed the kills: %s at %s, alone %s at %s", f, f.Start, g, g.Start)
		}
	}
	cfg.Membership.Actions = []MemberAction{ActionReorder}
	for _, f := range mustPlan(t, cfg).Faults {
		if f.Kind == KindMembership && f.Action != ActionReorder {
			t.Fatalf("fault %s, want reorders only", f)
		}
	}
	if got := (Fault{Kind: KindMembership, Action: ActionMove}).String(); got != "membership move" {
		t.Errorf("String() = %q", got)
	}
}

// moveActions are the actions that move partitions themselves.
func moveActions() []MemberAction {
	return slices.DeleteFunc(slices.Clone(MemberActions), func(a MemberAction) bool { return a == ActionDecommission })
}

// A decommission picks a node of the cluster, only when the others can
// hold the replication factor and a majority.
func TestChooseMembership_Decommission(t *testing.T) {
	picked := map[int]bool{}
	for seed := range uint64(100) {
		p, err := chooseFor(t, ActionDecommission, seed, fiveNodeState(), memberCfg(3, 1, 0))
		if err != nil || !slices.Contains(fiveNodeState().Nodes, p.node) || len(p.moves) > 0 {
			t.Fatalf("seed %d: %+v %v", seed, p, err)
		}
		picked[p.node] = true
	}
	if len(picked) != 5 {
		t.Errorf("decommissions picked only %v of five nodes", picked)
	}
	three := MemberState{Nodes: []int{1, 2, 3}, Partitions: fiveNodeState().Partitions[:1]}
	if _, err := chooseFor(t, ActionDecommission, 1, three, memberCfg(3, 1, 0)); !errors.Is(err, ErrNothingToMove) {
		t.Errorf("decommission one of three nodes at RF 3: %v", err)
	}
}
