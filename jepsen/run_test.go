package jepsen

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// funcNemesis is a function-field fake of a Nemesis.
type funcNemesis struct {
	mu    sync.Mutex
	calls []string
	start func(name string) error
	stop  func(name string) error
}

func (n *funcNemesis) Start(_ context.Context, name string) error {
	n.mu.Lock()
	n.calls = append(n.calls, "start "+name)
	n.mu.Unlock()
	if n.start == nil {
		return nil
	}
	return n.start(name)
}

func (n *funcNemesis) Stop(_ context.Context, name string) error {
	n.mu.Lock()
	n.calls = append(n.calls, "stop "+name)
	n.mu.Unlock()
	if n.stop == nil {
		return nil
	}
	return n.stop(name)
}

// faultNemesis turns kfake faults on and off: "timeouts" makes produce
// requests append but answer REQUEST_TIMED_OUT, "unavailable" rejects
// fetches with NOT_LEADER_FOR_PARTITION.
func faultNemesis(c *kfake.Cluster) *funcNemesis {
	handles := map[string]*kfake.FaultHandle{}
	faults := map[string]kfake.Fault{
		"timeouts":    {Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: -1},
		"unavailable": {Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1},
	}
	return &funcNemesis{
		start: func(name string) error {
			handles[name] = c.Fault(faults[name])
			return nil
		},
		stop: func(name string) error {
			handles[name].Remove()
			return nil
		},
	}
}

func TestRun_AgainstFakeWithNemesisWritesReport(t *testing.T) {
	c := newFake(t, kfake.NumBrokers(3))
	cfg := DefaultConfig()
	cfg.Workload = fakeWorkload(c)
	cfg.Workload.Duration = 3 * time.Second
	cfg.ReportDir = filepath.Join(t.TempDir(), "report")
	nem := faultNemesis(c)
	cfg.Nemesis = nem
	cfg.Schedule = Schedule{
		{At: 500 * time.Millisecond, F: FStart, Name: "unavailable"},
		{At: 1200 * time.Millisecond, F: FStop, Name: "unavailable"},
		{At: 1500 * time.Millisecond, F: FStart, Name: "timeouts"},
		// never stopped by the schedule: the final heal must stop it
	}
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
	want := []string{"start unavailable", "stop unavailable", "start timeouts", "stop timeouts"}
	if !slices.Equal(nem.calls, want) {
		t.Errorf("nemesis calls %v, want %v", nem.calls, want)
	}
	f, err := os.Open(filepath.Join(cfg.ReportDir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ReadHistory(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(nemesisIntervals(h)); got != 2 {
		t.Errorf("%d nemesis intervals in history.jsonl, want 2", got)
	}
	if !slices.Equal(res.Stats.Nemeses, []string{"unavailable", "timeouts"}) {
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
	stops := 0
	nem := &funcNemesis{stop: func(string) error {
		stops++
		if stops == 1 {
			return errors.New("iptables busy")
		}
		return nil
	}}
	cfg.Nemesis = nem
	cfg.Schedule = Schedule{{At: 100 * time.Millisecond, F: FStart, Name: "partition"}, {At: 300 * time.Millisecond, F: FStop, Name: "partition"}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, res)
	if stops != 2 {
		t.Fatalf("stop called %d times, want the failed stop and the heal", stops)
	}
}

func TestRun_RejectsBadConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Schedule = Schedule{{At: time.Second, F: FStart, Name: "kill"}}
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("schedule without nemesis: %v", err)
	}
}

func TestSchedule_Validate(t *testing.T) {
	bad := map[string]Schedule{
		"no name":        {{At: 1, F: FStart}},
		"backwards":      {{At: 2, F: FStart, Name: "a"}, {At: 1, F: FStop, Name: "a"}},
		"double start":   {{At: 1, F: FStart, Name: "a"}, {At: 2, F: FStart, Name: "a"}},
		"stop unstarted": {{At: 1, F: FStop, Name: "a"}},
		"bad f":          {{At: 1, F: FPoll, Name: "a"}},
	}
	for name, s := range bad {
		if err := s.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestStaggeredSchedule_SeededAndValid(t *testing.T) {
	names := []string{"kill", "pause", "partition"}
	a := StaggeredSchedule(names, time.Minute, 5*time.Second, 7)
	b := StaggeredSchedule(names, time.Minute, 5*time.Second, 7)
	c := StaggeredSchedule(names, time.Minute, 5*time.Second, 8)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatal("the schedule must depend on the seed alone")
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(a) < 6 || a[len(a)-1].At > time.Minute {
		t.Fatalf("schedule %v", a)
	}
	used := map[string]bool{}
	for _, st := range a {
		used[st.Name] = true
	}
	if len(used) < 2 {
		t.Errorf("only %v used", used)
	}
}

func TestNemesisRunner_HealStopsWhatIsRunning(t *testing.T) {
	rec := NewRecorder(nil)
	nem := &funcNemesis{start: func(name string) error {
		if name == "pause" {
			return errors.New("half applied")
		}
		return nil
	}}
	r := &nemesisRunner{n: nem, rec: rec}
	r.run(context.Background(), Schedule{{F: FStart, Name: "kill"}, {F: FStart, Name: "pause"}})
	if err := r.heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start kill", "start pause", "stop pause", "stop kill"}
	if !slices.Equal(nem.calls, want) {
		t.Fatalf("calls %v, want %v", nem.calls, want)
	}
	h := rec.History()
	if got := countOps(h, FStart, Info); got != 1 {
		t.Errorf("%d info starts, want the failed one", got)
	}
	if _, err := pairOps(h); err != nil {
		t.Fatal(err)
	}
}
