package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

// funcEnv is a function-field fake of a chaos.Env on nodes 1..3: it
// records every call, and a set field decides what the call does.
type funcEnv struct {
	mu            sync.Mutex
	calls         []string
	kill, start   func(ids []int) error
	pause, resume func(ids []int) error
	partition     func(chaos.Grudge) error
	heal          func() error
	leader        int // 0: no leader
}

var _ chaos.Env = (*funcEnv)(nil)

func (e *funcEnv) note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, fmt.Sprintf(format, args...))
}

func (e *funcEnv) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

func call(f func([]int) error, ids []int) error {
	if f == nil {
		return nil
	}
	return f(ids)
}

func (e *funcEnv) NodeIDs() []int { return []int{1, 2, 3} }
func (e *funcEnv) Kill(_ context.Context, ids ...int) error {
	e.note("kill %v", ids)
	return call(e.kill, ids)
}
func (e *funcEnv) EnsureRunning(_ context.Context, ids ...int) error {
	e.note("start %v", ids)
	return call(e.start, ids)
}
func (e *funcEnv) Pause(_ context.Context, ids ...int) error {
	e.note("pause %v", ids)
	return call(e.pause, ids)
}
func (e *funcEnv) Resume(_ context.Context, ids ...int) error {
	e.note("resume %v", ids)
	return call(e.resume, ids)
}
func (e *funcEnv) Partition(_ context.Context, g chaos.Grudge) error {
	e.note("partition %s", g)
	if e.partition == nil {
		return nil
	}
	return e.partition(g)
}
func (e *funcEnv) Heal(context.Context) error {
	e.note("heal")
	if e.heal == nil {
		return nil
	}
	return e.heal()
}
func (e *funcEnv) LoseUnsyncedNodes(_ context.Context, ids ...int) (map[int]chaos.LossReport, error) {
	e.note("lose-unsynced %v", ids)
	return nil, nil
}
func (e *funcEnv) Roles(_ context.Context, partition string) (chaos.RoleMap, error) {
	e.note("roles %s", partition)
	return chaos.RoleMap{}, errors.New("fake: no roles")
}
func (e *funcEnv) Leader(context.Context) (int, error) {
	if e.leader == 0 {
		return 0, errors.New("fake: no leader")
	}
	return e.leader, nil
}

// kfakeEnv stands kfake faults in for node faults: a paused node rejects
// fetches with NOT_LEADER_FOR_PARTITION, a killed one appends produce
// requests but answers REQUEST_TIMED_OUT. Resume and start remove them;
// they are no-ops when nothing is on.
func kfakeEnv(c *kfake.Cluster) *funcEnv {
	var mu sync.Mutex
	handles := map[string]*kfake.FaultHandle{}
	on := func(name string, f kfake.Fault) func([]int) error {
		return func([]int) error {
			mu.Lock()
			defer mu.Unlock()
			handles[name] = c.Fault(f)
			return nil
		}
	}
	off := func(name string) func([]int) error {
		return func([]int) error {
			mu.Lock()
			defer mu.Unlock()
			if h := handles[name]; h != nil {
				h.Remove()
				delete(handles, name)
			}
			return nil
		}
	}
	return &funcEnv{
		pause:  on("pause", kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1}),
		resume: off("pause"),
		kill:   on("kill", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: -1}),
		start:  off("kill"),
	}
}

func TestRun_AgainstFakeWithNemesisWritesReport(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(3))
	cfg := DefaultConfig()
	cfg.Workload = fakeWorkload(c)
	cfg.Workload.Duration = 3 * time.Second
	cfg.ReportDir = filepath.Join(t.TempDir(), "report")
	env := kfakeEnv(c)
	cfg.Faults = env
	cfg.Schedule = chaos.Schedule{Faults: []chaos.Fault{
		{ID: 0, Kind: chaos.KindPause, Start: 500 * time.Millisecond, Stop: 1200 * time.Millisecond, Target: chaos.TargetOne, Nodes: []int{1}},
		// stops after the workload: the final heal must stop it
		{ID: 1, Kind: chaos.KindKill, Start: 1500 * time.Millisecond, Stop: time.Hour, Target: chaos.TargetOne, Nodes: []int{1}},
	}}
	var faults []chaos.Event
	cfg.OnFault = func(ev chaos.Event) { faults = append(faults, ev) }
	recovered := false
	cfg.Recover = func(context.Context) error {
		recovered = true
		return nil
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, res)
	if !recovered {
		t.Error("Recover was not called")
	}
	want := []string{"pause [1]", "resume [1]", "kill [1]", "start [1]", "heal", "resume [1 2 3]", "start [1 2 3]"}
	if got := env.Calls(); !slices.Equal(got, want) {
		t.Errorf("nemesis calls %v, want %v", got, want)
	}
	if len(faults) != 5 || faults[4].Phase != chaos.PhaseHeal {
		t.Errorf("OnFault got %+v, want 4 steps and the final heal", faults)
	}
	h := readHistoryFile(t, cfg.ReportDir)
	if got := len(nemesisIntervals(h)); got != 2 {
		t.Errorf("%d nemesis intervals in history.jsonl, want 2", got)
	}
	for _, op := range h {
		if op.Process == NemesisProcess && op.Type == Invoke && op.F == FStart && op.Nemesis == "pause" {
			if at := time.Duration(op.Time); at < 500*time.Millisecond {
				t.Errorf("pause started at %s of the history, before its planned 500ms", at)
			}
		}
	}
	if !slices.Equal(res.Stats.Nemeses, []string{"pause", "kill"}) {
		t.Errorf("nemeses %v", res.Stats.Nemeses)
	}
	for _, name := range []string{ResultsFile, IndexFile, LatencyPlot, ThroughputPlot, UnseenPlot} {
		if _, err := os.Stat(filepath.Join(cfg.ReportDir, name)); err != nil {
			t.Error(err)
		}
	}
}

func TestRun_FailedStopIsRecordedAndHealRetries(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(1))
	cfg := DefaultConfig()
	cfg.Workload = fakeWorkload(c)
	cfg.Workload.Duration = time.Second
	cfg.ReportDir = t.TempDir()
	heals := 0
	cfg.Faults = &funcEnv{heal: func() error { // called from one goroutine at a time
		if heals++; heals == 1 {
			return errors.New("iptables busy")
		}
		return nil
	}}
	cfg.Schedule = chaos.Schedule{Faults: []chaos.Fault{{ID: 0, Kind: chaos.KindPartition,
		Start: 100 * time.Millisecond, Stop: 300 * time.Millisecond, Shape: chaos.ShapeIsolateOne, Grudge: chaos.Isolate(1, []int{1, 2, 3})}}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, res)
	if heals != 3 {
		t.Fatalf("heal called %d times, want the failed stop, its retry and the final heal", heals)
	}
	h := readHistoryFile(t, cfg.ReportDir)
	if got := countNemesisOps(h, FStop, Info); got != 1 {
		t.Errorf("%d info stops, want the failed one", got)
	}
	if got := countNemesisOps(h, FStop, OK); got != 1 {
		t.Errorf("%d ok stops, want the heal's retry", got)
	}
}

func readHistoryFile(t *testing.T, dir string) History {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ReadHistory(f)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func countNemesisOps(h History, f F, t Type) int {
	n := 0
	for _, op := range h {
		if op.Process == NemesisProcess && op.F == f && op.Type == t {
			n++
		}
	}
	return n
}
func TestRun_RejectsBadConfig(t *testing.T) {
	kill := func(id int, start, stop time.Duration) chaos.Fault {
		return chaos.Fault{ID: id, Kind: chaos.KindKill, Start: start, Stop: stop, Target: chaos.TargetOne, Nodes: []int{1}}
	}
	cfg := DefaultConfig()
	cfg.Schedule = chaos.Schedule{Faults: []chaos.Fault{kill(0, time.Second, 2*time.Second)}}
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("schedule without nemesis: %v", err)
	}
	cfg.Faults = &funcEnv{}
	cfg.Schedule.Faults = append(cfg.Schedule.Faults, kill(1, 1500*time.Millisecond, 3*time.Second))
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "before the previous kill stops") {
		t.Fatalf("overlapping kills: %v", err)
	}
}

func TestNemesisObserver_RecordsFaultStepsButNotTheFinalHeal(t *testing.T) {
	rec := NewRecorder(nil)
	env := &funcEnv{pause: func([]int) error { return errors.New("half applied") }}
	s := chaos.Schedule{Faults: []chaos.Fault{
		{ID: 0, Kind: chaos.KindKill, Start: 0, Stop: time.Hour, Target: chaos.TargetOne, Nodes: []int{3}},
		{ID: 1, Kind: chaos.KindPause, Start: 0, Stop: time.Hour, Target: chaos.TargetAll, Nodes: []int{1, 2, 3}},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []chaos.Event
	obs := nemesisObserver(rec, func(ev chaos.Event) {
		if seen = append(seen, ev); len(seen) == 2 {
			cancel() // both starts done
		}
	})
	x := chaos.NewExecutor(env, s, rec.Began(), obs)
	x.Play(ctx)
	if err := x.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{"kill [3]", "pause [1 2 3]", "resume [1 2 3]", "start [3]", "heal", "resume [1 2 3]", "start [1 2 3]"}; !slices.Equal(env.Calls(), want) {
		t.Fatalf("calls %v, want %v", env.Calls(), want)
	}
	h := rec.History()
	var got []string
	for _, op := range h {
		got = append(got, fmt.Sprintf("%s %s %s", op.Type, op.F, op.Nemesis))
	}
	want := []string{
		"invoke start kill", "ok start kill", "invoke start pause", "info start pause",
		"invoke stop pause", "ok stop pause", "invoke stop kill", "ok stop kill",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	if h[3].Error != "half applied" {
		t.Errorf("failed start recorded as %+v", h[3])
	}
	if _, err := pairOps(h); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 5 || seen[4].Phase != chaos.PhaseHeal {
		t.Errorf("onFault got %+v, want 4 steps and the final heal", seen)
	}
}

func TestRun_MembershipNeedsAnAdmin(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Faults = &funcEnv{}
	cfg.Schedule = chaos.Schedule{Faults: []chaos.Fault{{ID: 0, Kind: chaos.KindMembership, Start: time.Second, Stop: 2 * time.Second, Action: chaos.ActionMove}}}
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "admin") {
		t.Fatalf("membership on a plain env: %v", err)
	}
}

func TestNemesisObserver_CompletionCarriesNodesAndDetail(t *testing.T) {
	rec := NewRecorder(nil)
	obs := nemesisObserver(rec, nil)
	ev := chaos.Event{Fault: 0, Kind: chaos.KindMembership, Phase: chaos.PhaseStart}
	obs.Begin(ev)
	ev.Nodes, ev.Detail = []int{4}, "kill 4 (leader) mid-move of t/1 [4,2,3]->[1,2,5]"
	obs.End(ev)
	h := rec.History()
	if len(h) != 2 || h[0].Detail != "" || h[0].Nodes != nil || h[1].Detail != ev.Detail || !slices.Equal(h[1].Nodes, []int{4}) {
		t.Errorf("history %+v", h)
	}
}
