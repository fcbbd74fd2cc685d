package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func planCfg(seed uint64, kinds ...Kind) ScheduleConfig {
	cfg := DefaultScheduleConfig()
	cfg.Seed = seed
	cfg.Duration = 10 * time.Minute
	cfg.Kinds = kinds
	cfg.Nodes = []int{1, 2, 3, 4, 5}
	return cfg
}

func mustPlan(t testing.TB, cfg ScheduleConfig) Schedule {
	t.Helper()
	s, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlan_SameSeedSameSchedule(t *testing.T) {
	all := []Kind{KindKill, KindPause, KindPartition, KindLoseUnfsynced}
	a, b := mustPlan(t, planCfg(7, all...)), mustPlan(t, planCfg(7, all...))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans from seed 7 differ")
	}
	if c := mustPlan(t, planCfg(8, all...)); reflect.DeepEqual(a.Faults, c.Faults) {
		t.Fatal("seeds 7 and 8 gave the same faults")
	}
	// Each kind has its own stream: adding a kind keeps the others.
	killOnly := mustPlan(t, planCfg(7, KindKill))
	var kills []Fault
	for _, f := range a.Faults {
		if f.Kind == KindKill {
			f.ID = 0
			kills = append(kills, f)
		}
	}
	for i := range killOnly.Faults {
		killOnly.Faults[i].ID = 0
	}
	if !reflect.DeepEqual(kills, killOnly.Faults) {
		t.Fatal("adding kinds changed the kill timeline")
	}
}

func TestPlan_FaultsAreStaggeredWithinTheRun(t *testing.T) {
	cfg := planCfg(42, KindKill, KindPause, KindPartition, KindLoseUnfsynced)
	s := mustPlan(t, cfg)
	last := map[Kind]time.Duration{}
	seen := map[Kind]int{}
	for i, f := range s.Faults {
		if f.ID != i {
			t.Fatalf("fault %d has id %d", i, f.ID)
		}
		if f.Start < last[f.Kind] {
			t.Errorf("%s fault %d starts at %v before the previous one stopped (%v)", f.Kind, i, f.Start, last[f.Kind])
		}
		if f.Stop <= f.Start || f.Stop > cfg.Duration {
			t.Errorf("fault %d runs %v..%v, outside (start, %v]", i, f.Start, f.Stop, cfg.Duration)
		}
		last[f.Kind] = f.Stop
		seen[f.Kind]++
	}
	for _, k := range cfg.Kinds {
		// 10 minutes at a 10 s interval: about 30 faults per kind.
		if seen[k] < 10 {
			t.Errorf("only %d %s faults in 10 minutes", seen[k], k)
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("planned schedule: %v", err)
	}
	steps := s.Steps()
	if len(steps) != 2*len(s.Faults) || !slices.IsSortedFunc(steps, func(a, b Step) int { return int(a.At - b.At) }) {
		t.Fatal("steps not one start and one stop per fault in time order")
	}
}

func TestPlan_TargetsAndShapes(t *testing.T) {
	cfg := planCfg(3, KindKill, KindPartition)
	cfg.Targets = append(cfg.Targets, TargetLeader)
	for _, f := range mustPlan(t, cfg).Faults {
		switch f.Kind {
		case KindKill:
			want := map[Target]int{TargetOne: 1, TargetMinority: 2, TargetMajority: 3, TargetAll: 5, TargetLeader: 0}[f.Target]
			if len(f.Nodes) != want {
				t.Errorf("kill %s chose %v", f.Target, f.Nodes)
			}
		case KindPartition:
			if len(f.Grudge) == 0 {
				t.Errorf("partition %s has no grudge", f.Shape)
			}
		}
	}
	small := planCfg(3, KindPartition)
	small.Nodes = []int{1, 2, 3}
	for _, f := range mustPlan(t, small).Faults {
		if f.Shape == ShapeMajoritiesRing {
			t.Fatal("a majorities ring was planned for 3 nodes")
		}
	}
}

func TestPlan_Rejects(t *testing.T) {
	bad := planCfg(1, Kind("disk-rot"))
	if _, err := Plan(bad); err == nil || !strings.Contains(err.Error(), "unknown nemesis") {
		t.Errorf("an unknown nemesis: %v", err)
	}
	bad = planCfg(1, KindMembership)
	bad.Membership.Actions = []MemberAction{"frobnicate"}
	if _, err := Plan(bad); err == nil || !strings.Contains(err.Error(), "unknown membership action") {
		t.Errorf("unknown membership action: %v", err)
	}
	bad.Membership = DefaultMembershipConfig()
	bad.Membership.ReplicationFactor = len(bad.Nodes) + 1
	if _, err := Plan(bad); err == nil {
		t.Error("a replication factor above the cluster's size was accepted")
	}
	bad = planCfg(1, "flood")
	if _, err := Plan(bad); err == nil {
		t.Error("unknown kind accepted")
	}
	bad = planCfg(1, KindKill)
	bad.Nodes = nil
	if _, err := Plan(bad); err == nil {
		t.Error("no nodes accepted")
	}
}

func TestGrudges(t *testing.T) {
	all := []int{1, 2, 3, 4, 5}
	rng := rand.New(rand.NewPCG(9, 9))
	g := MajorityMinority(all, rng)
	cut := 0
	for _, to := range all {
		cut += len(g[to])
	}
	if cut != 2*3*2 { // each of 3 majority nodes drops 2, each of 2 minority nodes drops 3
		t.Errorf("majority-minority drops %d directed pairs, want 12: %s", cut, g)
	}
	ring, err := MajoritiesRing(all, rng)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, n := range all {
		if len(ring[n]) != 2 { // sees itself and 2 neighbours: a majority of 3
			t.Errorf("ring: node %d drops %v", n, ring[n])
		}
		for _, m := range ring[n] {
			if !ring.Drops(n, m) {
				t.Errorf("ring is not symmetric: %d drops %d but not back", n, m)
			}
		}
		seen = append(seen, fmt.Sprint(ring[n]))
	}
	slices.Sort(seen)
	if len(slices.Compact(seen)) != 5 {
		t.Errorf("two nodes see the same majority: %s", ring)
	}
	b, err := Bridge(all, rng)
	if err != nil {
		t.Fatal(err)
	}
	bridges := 0
	for _, n := range all {
		if len(b[n]) == 0 {
			bridges++
		}
	}
	if bridges != 1 {
		t.Errorf("bridge %s has %d nodes that see everyone, want 1", b, bridges)
	}
	if _, err := MajoritiesRing([]int{1, 2, 3}, rng); !errors.Is(err, ErrTooFewNodes) {
		t.Errorf("ring of 3: %v", err)
	}
}

func TestSchedule_ValidateRejectsWhatPlanNeverMakes(t *testing.T) {
	kill := func(id int, start, stop time.Duration) Fault {
		return Fault{ID: id, Kind: KindKill, Start: start, Stop: stop, Target: TargetOne, Nodes: []int{1}}
	}
	pause := Fault{ID: 1, Kind: KindPause, Start: 2, Stop: 5, Target: TargetOne, Nodes: []int{2}}
	good := Schedule{Faults: []Fault{kill(0, 1, 3), pause, kill(2, 3, 4)}}
	if err := good.Validate(); err != nil {
		t.Fatalf("good schedule: %v", err)
	}
	bad := map[string][]Fault{
		"wrong id":        {kill(1, 1, 2)},
		"out of order":    {kill(0, 5, 6), kill(1, 1, 2)},
		"stops at start":  {kill(0, 1, 1)},
		"stops before":    {kill(0, 2, 1)},
		"same kind twice": {kill(0, 1, 3), kill(1, 2, 4)},
		"negative start":  {kill(0, -1, 1)},
	}
	for name, faults := range bad {
		if err := (Schedule{Faults: faults}).Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestScheduleConfig_ValidateRejectsUnknownTargetsAndShapes(t *testing.T) {
	base := DefaultScheduleConfig()
	base.Duration, base.Nodes = time.Minute, []int{1, 2, 3}
	base.Kinds = []Kind{KindKill, KindPartition}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := base
	bad.Targets = []Target{TargetOne, "nobody"}
	if err := bad.Validate(); err == nil {
		t.Error("unknown target accepted")
	}
	bad = base
	bad.Shapes = []Shape{"triangle"}
	if err := bad.Validate(); err == nil {
		t.Error("unknown shape accepted")
	}
}

func TestPlan_PowerLossTargets(t *testing.T) {
	sc := DefaultScheduleConfig()
	sc.Seed, sc.Duration, sc.Interval = 3, 10*time.Minute, 5*time.Second
	sc.Kinds, sc.Nodes = []Kind{KindLoseUnfsynced}, []int{1, 2, 3, 4, 5}
	all := mustPlan(t, sc)
	sc.PowerTargets = nil
	if none := mustPlan(t, sc); !reflect.DeepEqual(none.Faults, all.Faults) {
		t.Error("no power targets and [all] planned different schedules")
	}
	for _, f := range all.Faults {
		if f.Target != TargetAll || !reflect.DeepEqual(f.Nodes, []int{1, 2, 3, 4, 5}) {
			t.Fatalf("default power loss %s, want all nodes", f)
		}
	}
	sc.PowerTargets = []Target{TargetOne, TargetMinority, TargetLeader}
	s := mustPlan(t, sc)
	seen := map[Target]int{}
	for _, f := range s.Faults {
		seen[f.Target]++
		want := map[Target]int{TargetOne: 1, TargetMinority: 2, TargetLeader: 0}[f.Target]
		if len(f.Nodes) != want {
			t.Errorf("%s: %d nodes, want %d", f, len(f.Nodes), want)
		}
	}
	for _, tg := range sc.PowerTargets {
		if seen[tg] == 0 {
			t.Errorf("no power loss of %s in %d faults", tg, len(s.Faults))
		}
	}
	sc.PowerTargets = []Target{"half"}
	if _, err := Plan(sc); err == nil {
		t.Error("an unknown power target was accepted")
	}
}
