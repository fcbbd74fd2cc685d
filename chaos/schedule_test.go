package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
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
	bad := planCfg(1, KindMembership)
	if _, err := Plan(bad); !errors.Is(err, ErrUnsupported) {
		t.Errorf("membership: %v, want ErrUnsupported", err)
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

// fakeEnv records calls; its fields override behaviour.
type fakeEnv struct {
	mu     sync.Mutex
	calls  []string
	leader int
	kill   func(ids []int) error
}

func (f *fakeEnv) rec(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeEnv) NodeIDs() []int { return []int{1, 2, 3} }
func (f *fakeEnv) Kill(ctx context.Context, ids ...int) error {
	f.rec("kill %v", ids)
	if f.kill != nil {
		return f.kill(ids)
	}
	return nil
}
func (f *fakeEnv) EnsureRunning(ctx context.Context, ids ...int) error {
	f.rec("start %v", ids)
	return nil
}
func (f *fakeEnv) Pause(ctx context.Context, ids ...int) error  { f.rec("pause %v", ids); return nil }
func (f *fakeEnv) Resume(ctx context.Context, ids ...int) error { f.rec("resume %v", ids); return nil }
func (f *fakeEnv) Partition(ctx context.Context, g Grudge) error {
	f.rec("partition %s", g)
	return nil
}
func (f *fakeEnv) Heal(ctx context.Context) error { f.rec("heal"); return nil }
func (f *fakeEnv) LoseUnsynced(ctx context.Context) (map[int]LossReport, error) {
	f.rec("lose")
	return map[int]LossReport{1: {Files: 1, Bytes: 4096}}, nil
}
func (f *fakeEnv) Leader(ctx context.Context) (int, error) { return f.leader, nil }

func TestRun_ExecutesStepsInOrderThenHeals(t *testing.T) {
	s := Schedule{Faults: []Fault{
		{ID: 0, Kind: KindKill, Start: 0, Stop: 30 * time.Millisecond, Target: TargetLeader},
		{ID: 1, Kind: KindPartition, Start: 10 * time.Millisecond, Stop: 40 * time.Millisecond, Shape: ShapeIsolateLeader},
		{ID: 2, Kind: KindPause, Start: 20 * time.Millisecond, Stop: 50 * time.Millisecond, Target: TargetOne, Nodes: []int{3}},
		{ID: 3, Kind: KindLoseUnfsynced, Start: 60 * time.Millisecond, Stop: 70 * time.Millisecond},
	}}
	env := &fakeEnv{leader: 2, kill: func(ids []int) error { return errors.New("boom") }}
	var events []Event
	err := Run(context.Background(), env, s, func(e Event) { events = append(events, e) })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Run error = %v, want the kill failure", err)
	}
	want := []string{
		"kill [2]", "partition 1<-[2] 2<-[1 3] 3<-[2]", "pause [3]", "start [2]", "heal", "resume [3]",
		"lose", "start [1 2 3]", "heal", "resume [1 2 3]", "start [1 2 3]",
	}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls:\n%q\nwant:\n%q", env.calls, want)
	}
	if len(events) != 9 || events[8].Phase != PhaseHeal || events[0].Err != "boom" {
		t.Fatalf("events: %+v", events)
	}
	for i := 1; i < len(events); i++ {
		if events[i].Offset < events[i-1].Offset || events[i].End.Before(events[i].Begin) {
			t.Errorf("event %d out of order: %+v", i, events[i])
		}
	}
}

func TestRun_CancelledStillHeals(t *testing.T) {
	s := Schedule{Faults: []Fault{{ID: 0, Kind: KindPause, Start: time.Hour, Stop: 2 * time.Hour, Target: TargetAll, Nodes: []int{1, 2, 3}}}}
	env := &fakeEnv{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Run(ctx, env, s, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if want := []string{"heal", "resume [1 2 3]", "start [1 2 3]"}; !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls %q, want only the final heal %q", env.calls, want)
	}
}

// TestRun_AgainstRealCluster runs a short seeded schedule of every kind
// on real processes in a namespace and checks the cluster is whole after.
func TestRun_AgainstRealCluster(t *testing.T) {
	cfg := echoConfig(t, 3)
	cfg.Namespace, cfg.LazyFS = true, true
	c := newCluster(t, cfg)
	sc := DefaultScheduleConfig()
	sc.Seed, sc.Duration, sc.Interval = 11, 3*time.Second, 300*time.Millisecond
	sc.Kinds = []Kind{KindKill, KindPause, KindPartition, KindLoseUnfsynced}
	sc.Nodes = c.NodeIDs()
	s := mustPlan(t, sc)
	var events []Event
	if err := Run(context.Background(), c, s, func(e Event) { events = append(events, e) }); err != nil {
		t.Fatal(err)
	}
	if got, want := len(events), 2*len(s.Faults)+1; got != want {
		t.Fatalf("%d events for %d faults", got, len(s.Faults))
	}
	kinds := map[Kind]bool{}
	for _, e := range events {
		kinds[e.Kind] = true
	}
	for _, k := range sc.Kinds {
		if !kinds[k] {
			t.Errorf("no %s fault ran in this seed's schedule", k)
		}
	}
	for _, id := range c.NodeIDs() {
		if !c.Running(id) || c.Paused(id) {
			t.Errorf("node %d not running after the final heal", id)
		}
	}
	checkGrudge(t, c, Grudge{})
	if cr := c.Crashes(); len(cr) != 0 {
		t.Errorf("crashes: %+v", cr)
	}
}
