package jepsen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

// fakeEnv is a FAKE chaos.Env that records every call and acts on nothing;
// ChaosNemesis is tested on it alone (the real cluster is exercised by
// cmd/raftq's end-to-end jepsen tests).
type fakeEnv struct {
	nodes  []int
	leader int
	calls  []string
}

var _ chaos.Env = (*fakeEnv)(nil)

func (e *fakeEnv) NodeIDs() []int { return slices.Clone(e.nodes) }

func (e *fakeEnv) note(format string, args ...any) error {
	e.calls = append(e.calls, fmt.Sprintf(format, args...))
	return nil
}

func (e *fakeEnv) Kill(_ context.Context, ids ...int) error { return e.note("kill %v", ids) }
func (e *fakeEnv) EnsureRunning(_ context.Context, ids ...int) error {
	return e.note("start %v", ids)
}
func (e *fakeEnv) Pause(_ context.Context, ids ...int) error  { return e.note("pause %v", ids) }
func (e *fakeEnv) Resume(_ context.Context, ids ...int) error { return e.note("resume %v", ids) }
func (e *fakeEnv) Partition(_ context.Context, g chaos.Grudge) error {
	return e.note("partition %s", g)
}
func (e *fakeEnv) Heal(context.Context) error { return e.note("heal") }
func (e *fakeEnv) LoseUnsynced(context.Context) (map[int]chaos.LossReport, error) {
	return map[int]chaos.LossReport{}, e.note("lose-unsynced")
}
func (e *fakeEnv) Leader(context.Context) (int, error) {
	if e.leader == 0 {
		return 0, errors.New("fake: no leader")
	}
	return e.leader, nil
}

func TestScheduleFromChaos_OneStartAndStopPerFault(t *testing.T) {
	sc := chaos.DefaultScheduleConfig()
	sc.Seed, sc.Duration, sc.Interval = 7, time.Minute, 5*time.Second
	sc.Kinds = []chaos.Kind{chaos.KindKill, chaos.KindPartition, chaos.KindLoseUnfsynced}
	sc.Nodes = []int{1, 2, 3, 4, 5}
	s, err := chaos.Plan(sc)
	if err != nil {
		t.Fatal(err)
	}
	js := ScheduleFromChaos(s)
	if err := js.Validate(); err != nil {
		t.Fatalf("converted schedule: %v", err)
	}
	if got, want := len(js), 2*len(s.Faults); got != want || want < 6 {
		t.Fatalf("%d steps for %d faults", got, len(s.Faults))
	}
	starts := map[string][]time.Duration{}
	for _, st := range js {
		if st.F == FStart {
			starts[st.Name] = append(starts[st.Name], st.At)
		}
	}
	for _, f := range s.Faults {
		if !slices.Contains(starts[string(f.Kind)], f.Start) {
			t.Errorf("fault %d (%s at %s) has no start step", f.ID, f.Kind, f.Start)
		}
	}
}

func TestChaosNemesis_PerformsPlannedFaultsInOrder(t *testing.T) {
	env := &fakeEnv{nodes: []int{1, 2, 3}, leader: 2}
	s := chaos.Schedule{Faults: []chaos.Fault{
		{ID: 0, Kind: chaos.KindKill, Target: chaos.TargetMinority, Nodes: []int{3}},
		{ID: 1, Kind: chaos.KindPartition, Shape: chaos.ShapeIsolateOne, Grudge: chaos.Isolate(1, env.nodes)},
		{ID: 2, Kind: chaos.KindKill, Target: chaos.TargetLeader},
		{ID: 3, Kind: chaos.KindPause, Target: chaos.TargetAll, Nodes: []int{1, 2, 3}},
		{ID: 4, Kind: chaos.KindLoseUnfsynced, Target: chaos.TargetAll, Nodes: []int{1, 2, 3}},
	}}
	n := NewChaosNemesis(env, s, nil)
	ctx := context.Background()
	steps := []struct {
		start bool
		kind  chaos.Kind
	}{
		{true, chaos.KindKill}, {true, chaos.KindPartition}, {false, chaos.KindKill},
		{false, chaos.KindPartition}, {true, chaos.KindKill}, {false, chaos.KindKill},
		{true, chaos.KindPause}, {false, chaos.KindPause},
		{true, chaos.KindLoseUnfsynced}, {false, chaos.KindLoseUnfsynced},
	}
	for _, st := range steps {
		var err error
		if st.start {
			err = n.Start(ctx, string(st.kind))
		} else {
			err = n.Stop(ctx, string(st.kind))
		}
		if err != nil {
			t.Fatalf("%v %s: %v", st.start, st.kind, err)
		}
	}
	want := []string{
		"kill [3]", "partition 1<-[2 3] 2<-[1] 3<-[1]", "start [3]", "heal",
		"kill [2]", "start [2]", "pause [1 2 3]", "resume [1 2 3]", "lose-unsynced", "start [1 2 3]",
	}
	if !slices.Equal(env.calls, want) {
		t.Fatalf("calls\n%q\nwant\n%q", env.calls, want)
	}
	evs := n.Events()
	if len(evs) != len(steps) {
		t.Fatalf("%d events for %d steps", len(evs), len(steps))
	}
	if ev := evs[4]; ev.Fault != 2 || ev.Phase != chaos.PhaseStart || !slices.Equal(ev.Nodes, []int{2}) || ev.Err != "" {
		t.Errorf("kill-leader event %+v, want fault 2 on node 2", ev)
	}
}

func TestChaosNemesis_StopWithNothingRunningUndoesTheKindEverywhere(t *testing.T) {
	env := &fakeEnv{nodes: []int{1, 2, 3}}
	n := NewChaosNemesis(env, chaos.Schedule{}, nil)
	ctx := context.Background()
	for _, k := range []chaos.Kind{chaos.KindKill, chaos.KindPause, chaos.KindPartition, chaos.KindLoseUnfsynced} {
		if err := n.Stop(ctx, string(k)); err != nil {
			t.Fatalf("stop %s: %v", k, err)
		}
	}
	want := []string{"start [1 2 3]", "resume [1 2 3]", "heal", "start [1 2 3]"}
	if !slices.Equal(env.calls, want) {
		t.Fatalf("calls %q, want %q", env.calls, want)
	}
}

func TestChaosNemesis_FailedStartIsReportedAndHealed(t *testing.T) {
	env := &fakeEnv{nodes: []int{1, 2, 3}} // no leader
	s := chaos.Schedule{Faults: []chaos.Fault{{ID: 0, Kind: chaos.KindKill, Target: chaos.TargetLeader}}}
	n := NewChaosNemesis(env, s, nil)
	ctx := context.Background()
	if err := n.Start(ctx, "kill"); err == nil {
		t.Fatal("kill of the leader with no leader succeeded")
	}
	if err := n.Start(ctx, "kill"); !errors.Is(err, errNoFaultPlanned) {
		t.Fatalf("second start: %v, want errNoFaultPlanned", err)
	}
	if err := n.Stop(ctx, "kill"); err != nil {
		t.Fatal(err)
	}
	if evs := n.Events(); len(evs) != 2 || evs[0].Err == "" || evs[1].Err != "" {
		t.Fatalf("events %+v: want a failed start and a stop", evs)
	}
}

func TestRaftqConfig_Validate(t *testing.T) {
	good := DefaultRaftqConfig()
	good.Binary = "/bin/true"
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with a binary: %v", err)
	}
	for name, mod := range map[string]func(*RaftqConfig){
		"no binary":     func(c *RaftqConfig) { c.Binary = "" },
		"no nodes":      func(c *RaftqConfig) { c.Nodes = 0 },
		"bad fsync":     func(c *RaftqConfig) { c.Fsync = "sometimes" },
		"no report dir": func(c *RaftqConfig) { c.Run.ReportDir = "" },
		"no timeout":    func(c *RaftqConfig) { c.ReadyTimeout = 0 },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
