package chaos

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeEnv records calls on nodes 1..3 (or nodes). fail, when set, decides the error
// of each call by its first word ("kill", "start", "heal", ...); leader 0
// means there is no leader.
type fakeEnv struct {
	mu     sync.Mutex
	calls  []string
	leader int
	roles  *RoleMap
	fail   func(call string) error
	nodes  []int // instead of 1..3
}

var _ Env = (*fakeEnv)(nil)

func (f *fakeEnv) rec(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := fmt.Sprintf(format, args...)
	f.calls = append(f.calls, call)
	if f.fail == nil {
		return nil
	}
	verb, _, _ := strings.Cut(call, " ")
	return f.fail(verb)
}

func (f *fakeEnv) NodeIDs() []int {
	if f.nodes != nil {
		return f.nodes
	}
	return []int{1, 2, 3}
}
func (f *fakeEnv) Kill(_ context.Context, ids ...int) error          { return f.rec("kill %v", ids) }
func (f *fakeEnv) EnsureRunning(_ context.Context, ids ...int) error { return f.rec("start %v", ids) }
func (f *fakeEnv) Pause(_ context.Context, ids ...int) error         { return f.rec("pause %v", ids) }
func (f *fakeEnv) Resume(_ context.Context, ids ...int) error        { return f.rec("resume %v", ids) }
func (f *fakeEnv) Partition(_ context.Context, g Grudge) error       { return f.rec("partition %s", g) }
func (f *fakeEnv) Heal(context.Context) error                        { return f.rec("heal") }
func (f *fakeEnv) LoseUnsyncedNodes(_ context.Context, ids ...int) (map[int]LossReport, error) {
	return map[int]LossReport{ids[0]: {Files: 1, Bytes: 4096}}, f.rec("lose %v", ids)
}
func (f *fakeEnv) Roles(_ context.Context, partition string) (RoleMap, error) {
	if err := f.rec("roles %s", partition); err != nil {
		return RoleMap{}, err
	}
	if f.roles == nil {
		return RoleMap{}, errors.New("fake: no roles")
	}
	return *f.roles, nil
}
func (f *fakeEnv) Leader(context.Context) (int, error) {
	if f.leader == 0 {
		return 0, errors.New("fake: no leader")
	}
	return f.leader, nil
}

// events collects what an executor reports. cancelAfter, when set, is
// called with the number of steps ended so far.
type events struct {
	begun, ended []Event
	cancelAfter  func(ended int)
}

func (e *events) observer() Observer {
	return Observer{
		Begin: func(ev Event) { e.begun = append(e.begun, ev) },
		End: func(ev Event) {
			e.ended = append(e.ended, ev)
			if e.cancelAfter != nil {
				e.cancelAfter(len(e.ended))
			}
		},
	}
}

// check asserts every step was announced before it acted and ended after,
// in the same order, with offsets that never go back.
func (e *events) check(t *testing.T) {
	t.Helper()
	if len(e.begun) != len(e.ended) {
		t.Fatalf("%d steps begun, %d ended", len(e.begun), len(e.ended))
	}
	for i, end := range e.ended {
		b := e.begun[i]
		if b.Fault != end.Fault || b.Phase != end.Phase || !b.End.IsZero() || end.Begin != b.Begin || end.End.Before(end.Begin) {
			t.Errorf("step %d: begun %+v, ended %+v", i, b, end)
		}
		if i > 0 && end.Offset < e.ended[i-1].Offset {
			t.Errorf("step %d offset %s before step %d's %s", i, end.Offset, i-1, e.ended[i-1].Offset)
		}
	}
}

func (e *events) phases() []string {
	var out []string
	for _, ev := range e.ended {
		out = append(out, fmt.Sprintf("%d %s %s %v", ev.Fault, ev.Kind, ev.Phase, ev.Nodes))
	}
	return out
}

func TestExecutor_PlaysStepsInOrderThenHeals(t *testing.T) {
	s := Schedule{Faults: []Fault{
		{ID: 0, Kind: KindKill, Start: 0, Stop: 30 * time.Millisecond, Target: TargetLeader},
		{ID: 1, Kind: KindPartition, Start: 10 * time.Millisecond, Stop: 40 * time.Millisecond, Shape: ShapeIsolateLeader},
		{ID: 2, Kind: KindPause, Start: 20 * time.Millisecond, Stop: 50 * time.Millisecond, Target: TargetOne, Nodes: []int{3}},
		{ID: 3, Kind: KindLoseUnfsynced, Start: 60 * time.Millisecond, Stop: 70 * time.Millisecond},
	}}
	env := &fakeEnv{leader: 2, fail: func(call string) error {
		if call == "kill" {
			return errors.New("boom")
		}
		return nil
	}}
	var ev events
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(context.Background())
	if err := x.Heal(context.Background()); err != nil {
		t.Errorf("Heal = %v; the failed kill was undone by its stop", err)
	}
	want := []string{
		"kill [2]", "partition 1<-[2] 2<-[1 3] 3<-[2]", "pause [3]", "start [2]", "heal", "resume [3]",
		"lose [1 2 3]", "start [1 2 3]", "heal", "resume [1 2 3]", "start [1 2 3]",
	}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls:\n%q\nwant:\n%q", env.calls, want)
	}
	ev.check(t)
	wantSteps := []string{
		"0 kill start [2]", "1 partition start [1 2 3]", "2 pause start [3]", "0 kill stop [2]",
		"1 partition stop [1 2 3]", "2 pause stop [3]", "3 lose-unfsynced start [1 2 3]",
		"3 lose-unfsynced stop [1 2 3]", "-1  final-heal [1 2 3]",
	}
	if got := ev.phases(); !reflect.DeepEqual(got, wantSteps) {
		t.Fatalf("steps:\n%q\nwant:\n%q", got, wantSteps)
	}
	if got := ev.ended[0]; got.Err != "boom" || got.Detail != "kill leader [2]" {
		t.Errorf("failed kill reported as %+v", got)
	}
	if got := ev.ended[6].Detail; got != "power loss of all [1 2 3]: n1 1 files 4096 B" {
		t.Errorf("lose-unfsynced detail %q", got)
	}
	for _, e := range ev.ended[1:] {
		if e.Err != "" {
			t.Errorf("step %+v failed", e)
		}
	}
}

func TestExecutor_HealStopsActiveFaultsMostRecentFirst(t *testing.T) {
	s := Schedule{Faults: []Fault{
		{ID: 0, Kind: KindKill, Start: 0, Stop: time.Hour, Target: TargetOne, Nodes: []int{3}},
		{ID: 1, Kind: KindPause, Start: 0, Stop: time.Hour, Target: TargetAll, Nodes: []int{1, 2, 3}},
		{ID: 2, Kind: KindPartition, Start: 2 * time.Hour, Stop: 3 * time.Hour, Shape: ShapeIsolateOne, Grudge: Isolate(1, []int{1, 2, 3})},
	}}
	env := &fakeEnv{fail: func(call string) error {
		if call == "pause" {
			return errors.New("half applied")
		}
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := events{cancelAfter: func(n int) {
		if n == 2 { // both starts done: end the schedule there
			cancel()
		}
	}}
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(ctx)
	if err := x.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"kill [3]", "pause [1 2 3]", "resume [1 2 3]", "start [3]", "heal", "resume [1 2 3]", "start [1 2 3]"}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls %q, want %q: the failed pause must be undone too, before the kill", env.calls, want)
	}
	ev.check(t)
	if got := ev.ended[1]; got.Phase != PhaseStart || got.Err != "half applied" {
		t.Errorf("pause start reported as %+v", got)
	}
}

func TestExecutor_HealRetriesAFailedStop(t *testing.T) {
	s := Schedule{Faults: []Fault{
		{ID: 0, Kind: KindPartition, Start: 0, Stop: time.Millisecond, Shape: ShapeIsolateOne, Grudge: Isolate(1, []int{1, 2, 3})},
	}}
	heals := 0
	env := &fakeEnv{fail: func(call string) error {
		if call == "heal" {
			if heals++; heals == 1 {
				return errors.New("iptables busy")
			}
		}
		return nil
	}}
	var ev events
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(context.Background())
	if err := x.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev.check(t)
	want := []string{"0 partition start [1 2 3]", "0 partition stop [1 2 3]", "0 partition stop [1 2 3]", "-1  final-heal [1 2 3]"}
	if got := ev.phases(); !reflect.DeepEqual(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if ev.ended[1].Err != "iptables busy" || ev.ended[2].Err != "" {
		t.Errorf("stops reported as %+v and %+v", ev.ended[1], ev.ended[2])
	}
}

func TestExecutor_StartWithoutLeaderIsReportedAndHealed(t *testing.T) {
	s := Schedule{Faults: []Fault{
		{ID: 0, Kind: KindKill, Start: 0, Stop: time.Hour, Target: TargetLeader},
		{ID: 1, Kind: Kind("disk-rot"), Start: 0, Stop: time.Hour},
	}}
	env := &fakeEnv{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := events{cancelAfter: func(n int) {
		if n == 2 {
			cancel()
		}
	}}
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(ctx)
	if got := ev.ended[0]; got.Err == "" || got.Nodes != nil || got.Detail != "kill leader: no target" {
		t.Errorf("kill of no leader reported as %+v", got)
	}
	if got := ev.ended[1]; !strings.Contains(got.Err, ErrUnsupported.Error()) {
		t.Errorf("an unknown kind reported as %+v, want %v", got, ErrUnsupported)
	}
	err := x.Heal(ctx)
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Heal = %v, want the unknown kind's stop's %v", err, ErrUnsupported)
	}
	want := []string{"start []", "heal", "resume [1 2 3]", "start [1 2 3]"}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls %q, want %q", env.calls, want)
	}
}

func TestExecutor_CanceledRunStillHealsAndReportsWhatItCouldNot(t *testing.T) {
	s := Schedule{Faults: []Fault{{ID: 0, Kind: KindPause, Start: time.Hour, Stop: 2 * time.Hour, Target: TargetAll, Nodes: []int{1, 2, 3}}}}
	env := &fakeEnv{fail: func(call string) error {
		if call == "start" {
			return errors.New("not ready")
		}
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ev events
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(ctx)
	err := x.Heal(ctx)
	if err == nil || !strings.Contains(err.Error(), "final heal") || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("Heal = %v, want the failed start", err)
	}
	if want := []string{"heal", "resume [1 2 3]", "start [1 2 3]"}; !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls %q, want only the final heal %q", env.calls, want)
	}
	if len(ev.ended) != 1 || ev.ended[0].Phase != PhaseHeal || ev.ended[0].Err != "not ready" {
		t.Fatalf("events %+v", ev.ended)
	}
}

// TestExecutor_AgainstRealCluster plays a short seeded schedule of every
// kind on real processes in a namespace and checks the cluster is whole
// after the heal.
func TestExecutor_AgainstRealCluster(t *testing.T) {
	cfg := echoConfig(t, 3)
	cfg.Namespace, cfg.LazyFS = true, true
	c := newCluster(t, cfg)
	sc := DefaultScheduleConfig()
	sc.Seed, sc.Duration, sc.Interval = 11, 3*time.Second, 300*time.Millisecond
	sc.Kinds = []Kind{KindKill, KindPause, KindPartition, KindLoseUnfsynced}
	sc.Nodes = c.NodeIDs()
	s := mustPlan(t, sc)
	var ev events
	x := NewExecutor(c, s, time.Now(), ev.observer())
	x.Play(context.Background())
	if err := x.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev.check(t)
	if got, want := len(ev.ended), 2*len(s.Faults)+1; got != want {
		t.Fatalf("%d events for %d faults", got, len(s.Faults))
	}
	kinds := map[Kind]bool{}
	for _, e := range ev.ended {
		kinds[e.Kind] = true
		if e.Err != "" {
			t.Errorf("step failed: %+v", e)
		}
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

// A power loss hits its targets only, a leader target resolved when it
// starts, and its stop restarts just the nodes it hit.
func TestExecutor_PowerLossHitsItsTargetsOnly(t *testing.T) {
	s := Schedule{Faults: []Fault{
		{ID: 0, Kind: KindLoseUnfsynced, Start: 0, Stop: 10 * time.Millisecond, Target: TargetLeader},
		{ID: 1, Kind: KindLoseUnfsynced, Start: 20 * time.Millisecond, Stop: 30 * time.Millisecond, Target: TargetMinority, Nodes: []int{3}},
		{ID: 2, Kind: KindLoseUnfsynced, Start: 40 * time.Millisecond, Stop: 50 * time.Millisecond, Target: TargetAll, Nodes: []int{1, 2, 3}},
	}}
	env := &fakeEnv{leader: 2}
	var ev events
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(context.Background())
	want := []string{"lose [2]", "start [2]", "lose [3]", "start [3]", "lose [1 2 3]", "start [1 2 3]"}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls:\n%q\nwant:\n%q", env.calls, want)
	}
	if got, want := ev.ended[0].Detail, "power loss of leader [2]: n2 1 files 4096 B"; got != want {
		t.Errorf("detail %q, want %q", got, want)
	}
	if got, want := ev.ended[1].Detail, "restart [2]"; got != want {
		t.Errorf("stop detail %q, want %q", got, want)
	}
	env.leader = 0
	x = NewExecutor(env, Schedule{Faults: s.Faults[:1]}, time.Now(), ev.observer())
	x.Play(context.Background())
	if e := ev.ended[len(ev.ended)-2]; e.Err == "" || len(e.Nodes) != 0 {
		t.Errorf("power loss of a leader when there is none: %+v", e)
	}
}

// slowStart is a fakeEnv whose EnsureRunning waits for release, or for
// its context to end.
type slowStart struct {
	*fakeEnv
	started, release chan struct{}
}

func (s slowStart) EnsureRunning(ctx context.Context, ids ...int) error {
	close(s.started)
	select {
	case <-s.release:
		return s.fakeEnv.EnsureRunning(ctx, ids...)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A stop (a heal) under way when the run's context ends finishes, rather
// than failing with the cancellation and leaving Heal to redo it.
func TestExecutor_StopUnderWayWhenThePlayEndsFinishes(t *testing.T) {
	s := Schedule{Faults: []Fault{{ID: 0, Kind: KindKill, Start: 0, Stop: 10 * time.Millisecond, Target: TargetOne, Nodes: []int{3}}}}
	env := slowStart{fakeEnv: &fakeEnv{leader: 1}, started: make(chan struct{}), release: make(chan struct{})}
	var ev events
	x := NewExecutor(env, s, time.Now(), ev.observer())
	ctx, cancel := context.WithCancel(context.Background())
	played := make(chan struct{})
	go func() {
		defer close(played)
		x.Play(ctx)
	}()
	<-env.started
	cancel()
	close(env.release)
	<-played
	ev.check(t)
	if got := ev.ended[len(ev.ended)-1]; got.Phase != PhaseStop || got.Err != "" {
		t.Fatalf("the stop under way ended as %+v, want a clean stop", got)
	}
}
