package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

func TestCostLoads_FollowTheMode(t *testing.T) {
	ms, _ := mustFind(t, []string{"i1-n-rf2", "r-a"}, nil)
	c := DefaultCostConfig()
	ls := CostLoads(c, matrixBase(), ms[0])
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
		if l.ReplicationFactor != 2 || l.TopicConfigs["replication.mode"] != "isr" || l.TopicConfigs["min.insync.replicas"] != "1" ||
			l.Partitions != 6 || l.Duration != 10*time.Second || l.Warmup != 3*time.Second {
			t.Errorf("i1-n-rf2 load %+v", l)
		}
	}
	if !slices.Equal(names, []string{CostSmall, CostLarge, CostFixed}) {
		t.Errorf("loads %v", names)
	}
	if s, l, f := ls[0], ls[1], ls[2]; s.RecordSize != 100 || s.Producers != 4 || s.Rate != 0 || l.RecordSize != 1024 || l.Rate != 0 ||
		f.RecordSize != 100 || f.Producers != 1 || f.Rate != 50000 || s.Topic == l.Topic || l.Topic == f.Topic {
		t.Errorf("loads %+v", ls)
	}
	ls[0].TopicConfigs["x"] = "y" // each load's configs are its own
	if _, shared := ls[1].TopicConfigs["x"]; shared || ms[0].TopicConfigs["x"] != "" {
		t.Error("loads share their topic configs with each other or the mode")
	}
	c.Nodes = 1
	if ls := CostLoads(c, matrixBase(), ms[1]); ls[0].ReplicationFactor != 1 || ls[0].TopicConfigs["replication.mode"] != "" {
		t.Errorf("r-a on one node: %+v", ls[0])
	}
}

func TestCostClusterConfig_NoFaultsNoLazyFS(t *testing.T) {
	ms, ns := mustFind(t, []string{"i2e-n"}, []string{"pall"})
	base, err := CellConfig(matrixBase(), MatrixModes[0], ns[0], 1, "cell") // a base with power faults and lazyfs
	if err != nil {
		t.Fatal(err)
	}
	base.LazyFS, base.Writeback, base.KeepData = true, time.Second, true
	c, err := CostClusterConfig(base, ms[0], 3, "d")
	if err != nil {
		t.Fatal(err)
	}
	if c.Nodes != 3 || c.Fsync != FsyncAlways || c.lazyFS() || c.KeepData || c.Writeback != 0 || len(c.Schedule.Kinds) != 0 ||
		c.Run.ReportDir != "d" || !slices.Equal(c.ServerArgs, []string{"--tick-interval=50ms", isrLag, elrFlag}) {
		t.Errorf("cost cluster %+v", c)
	}
	base.Binary = ""
	if _, err := CostClusterConfig(base, ms[0], 3, "d"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("no binary: %v", err)
	}
}

// fakeCost starts no cluster: its Start hands out brokers named after
// the mode's directory, and its Bench answers with figures the test
// chose.
type fakeCost struct {
	started, closed int
	loads           []string // "mode/load"
	startErr        map[string]error
	benchErr        map[string]error // by "mode/load"
	crashes         map[string]int
	onBench         func()
}

func (f *fakeCost) config() CostConfig {
	c := DefaultCostConfig()
	c.Start, c.Bench = f.start, f.bench
	return c
}

func (f *fakeCost) start(_ context.Context, cfg RaftqConfig) (*CostCluster, error) {
	mode := filepath.Base(cfg.Run.ReportDir)
	if err := f.startErr[mode]; err != nil {
		return nil, err
	}
	f.started++
	dial := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("fake") }
	return &CostCluster{Brokers: []string{mode + ":9092"}, Dial: dial, Close: func() ([]chaos.Exit, error) {
		f.closed++
		return make([]chaos.Exit, f.crashes[mode]), nil
	}}, nil
}

func (f *fakeCost) bench(_ context.Context, l CostLoad) (CostFigures, error) {
	mode, _, _ := strings.Cut(l.Brokers[0], ":")
	name := mode + "/" + l.Name
	if l.Dial == nil {
		name += " (no dialer)"
	}
	f.loads = append(f.loads, name)
	if f.onBench != nil {
		f.onBench()
	}
	if err := f.benchErr[name]; err != nil {
		return CostFigures{}, err
	}
	fig := CostFigures{Records: 1, P50ms: 1.5, P99ms: 9, Setup: map[string]string{"brokers": "3", "durability": mode}}
	switch l.Name {
	case CostSmall:
		fig.RecordsPerS = 1e6
	case CostLarge:
		fig.RecordsPerS, fig.MBPerS, fig.Failed = 1e5, 102.4, 7
	case CostFixed:
		fig.RecordsPerS = l.Rate - 0.4
	}
	return fig, nil
}

func TestRunMatrix_CostPhaseWritesTheTableAndResumes(t *testing.T) {
	dir := t.TempDir()
	ms, ns := mustFind(t, []string{"r-a", "i1-n", "i2-a"}, []string{"k1"})
	cells := &fakeCells{}
	fake := &fakeCost{startErr: map[string]error{"i2-a": errors.New("cluster did not start")},
		benchErr: map[string]error{"i1-n/1KiB": errors.New("create bench topic: boom")}}
	var prog []string
	var done []CostRow
	cfg := MatrixConfig{Base: matrixBase(), Modes: ms, Nemeses: ns, Seeds: []uint64{1}, Dir: dir, Run: cells.run, Cost: fake.config(),
		Progress: func(p MatrixProgress) { prog = append(prog, p.String()) },
		CostDone: func(r CostRow) { done = append(done, r) }}
	res, err := RunMatrix(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 3 || len(res.Cost) != 3 || len(done) != 3 || fake.started != 2 || fake.closed != 2 {
		t.Fatalf("%d cells, %d cost rows, %d done, %d clusters started, %d closed", len(res.Cells), len(res.Cost), len(done), fake.started, fake.closed)
	}
	wantLoads := []string{"r-a/100B", "r-a/1KiB", "r-a/rate", "i1-n/100B", "i1-n/1KiB", "i1-n/rate"}
	if !slices.Equal(fake.loads, wantLoads) {
		t.Errorf("loads run %v, want %v", fake.loads, wantLoads)
	}
	if len(prog) != 6 || !strings.HasPrefix(prog[3], "cost 1/3 r-a, ") || !strings.HasPrefix(prog[4], "cost 2/3 i1-n, ") {
		t.Errorf("progress %q", prog)
	}
	if s := done[0].String(); s != "r-a: 100 B 1,000,000 records/s · 1 KiB 100,000 records/s (102.4 MB/s) · fixed rate 50,000 records/s, "+
		"p50 1.50 ms, p99 9.00 ms; r-a 1KiB: 7 records failed, 0 unanswered" {
		t.Errorf("done line %q", s)
	}
	b, err := os.ReadFile(filepath.Join(dir, MatrixTable))
	if err != nil {
		t.Fatal(err)
	}
	table := string(b)
	for _, want := range []string{
		"| mode | k1 (3 nodes) |", // the cells' table is still there
		"## Cost",
		"fresh 3-node cluster per mode, each load on a fresh topic of 6 partitions",
		"4 at full speed, 1 at the fixed rate; 10s measured after a 3s warm-up",
		"| mode | 100 B records/s | 1 KiB records/s | 1 KiB MB/s | 100 B at 50,000/s: records/s | p50 ms | p99 ms |",
		"| r-a | 1,000,000 | 100,000 | 102.4 | 50,000 | 1.50 | 9.00 |",
		"| i1-n | 1,000,000 | - | - | 50,000 | 1.50 | 9.00 |",
		"| i2-a | - | - | - | - | - | - |",
		"- r-a: brokers=3 durability=r-a",
		"- i1-n 1KiB: create bench topic: boom",
		"- i2-a did not run through: cluster did not start",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("matrix.md lacks %q:\n%s", want, table)
		}
	}
	assertPNG(t, filepath.Join(dir, MatrixCostPlot))
	html, err := os.ReadFile(filepath.Join(dir, MatrixIndex))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Cost</h2>", `<td style="text-align:right">1,000,000</td>`, MatrixCostPlot,
		`<a href="cost/i1-n/cluster/">`, "i2-a did not run through"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("matrix.html lacks %q", want)
		}
	}
	var kept []CostRow
	if b, err = os.ReadFile(filepath.Join(dir, MatrixCostJSON)); err != nil || json.Unmarshal(b, &kept) != nil ||
		len(kept) != 3 || kept[0].Figures(CostFixed) == nil || kept[0].Measure(CostFixed).Load.Rate != 50000 {
		t.Errorf("cost.json: %v %s", err, b)
	}

	// Again: r-a is measured; i1-n (a load failed) and i2-a (no cluster) run again.
	fake.loads, prog, done = nil, nil, nil
	delete(fake.startErr, "i2-a")
	if res, err = RunMatrix(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(fake.loads) != 6 || fake.loads[0] != "i1-n/100B" || fake.loads[3] != "i2-a/100B" || len(done) != 2 {
		t.Errorf("resumed run ran %v", fake.loads)
	}
	if prog[3] != "cost 1/3 r-a: done before, skipped" || res.Cost[0].Figures(CostSmall) == nil || !res.Cost[2].Done() {
		t.Errorf("resumed: progress %q, rows %+v", prog, res.Cost)
	}

	// Other loads (here a longer one) measure every mode again: a table
	// never mixes rows of two durations.
	fake.loads, prog = nil, nil
	cfg.Cost.Duration *= 2
	if _, err = RunMatrix(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(fake.loads) != 9 || fake.loads[0] != "r-a/100B" {
		t.Errorf("a run with other loads ran %v, want all 9 again", fake.loads)
	}

	// Without a cost phase the rows measured before are still reported.
	cfg.Cost.Bench, fake.loads = nil, nil
	if res, err = RunMatrix(context.Background(), cfg); err != nil || len(res.Cost) != 3 || len(fake.loads) != 0 {
		t.Fatalf("without a cost phase: %d rows, loads %v, %v", len(res.Cost), fake.loads, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, MatrixTable)); !strings.Contains(string(b), "| i2-a | 1,000,000 |") {
		t.Errorf("matrix.md without a cost phase:\n%s", b)
	}
}

func TestRunMatrix_CostAloneCrashesAndCancel(t *testing.T) {
	dir := t.TempDir()
	ms, _ := mustFind(t, []string{"r-n", "i2-n"}, nil)
	fake := &fakeCost{crashes: map[string]int{"r-n": 1}}
	cfg := MatrixConfig{Base: matrixBase(), Modes: ms, Dir: dir, Cost: fake.config()}
	res, err := RunMatrix(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 0 || len(res.Cost) != 2 || res.Cost[0].Crashes != 1 || res.Cost[0].Done() || !res.Cost[1].Done() {
		t.Fatalf("cost alone: %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(dir, MatrixTable))
	if err != nil {
		t.Fatal(err)
	}
	if table := string(b); strings.Contains(table, "| mode | k1") || !strings.Contains(table, "- r-n: 1 node crashes") {
		t.Errorf("matrix.md of costs alone:\n%s", table)
	}
	if _, err := os.Stat(filepath.Join(dir, MatrixLossAvailability)); !os.IsNotExist(err) {
		t.Errorf("a plot of no cells: %v", err)
	}

	// Canceled in its first load, a mode keeps no row: it runs again.
	dir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	fake = &fakeCost{onBench: cancel}
	cfg.Dir, cfg.Cost = dir, fake.config()
	if _, err := RunMatrix(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if _, err := os.Stat(costPath(dir, "r-n")); !os.IsNotExist(err) || fake.closed != 1 || len(fake.loads) != 1 {
		t.Errorf("canceled run kept a row (%v), closed %d clusters, ran %v", err, fake.closed, fake.loads)
	}
}

func TestRunMatrix_RejectsNothingToRun(t *testing.T) {
	ms, ns := mustFind(t, []string{"r-a"}, []string{"k1"})
	bad := DefaultCostConfig()
	bad.Rate = 0
	bad.Bench = (&fakeCost{}).bench
	for name, cfg := range map[string]MatrixConfig{
		"no nemeses, no cost":    {Base: matrixBase(), Modes: ms, Dir: "d"},
		"nemeses, no seeds":      {Base: matrixBase(), Modes: ms, Nemeses: ns, Dir: "d"},
		"a cost phase at rate 0": {Base: matrixBase(), Modes: ms, Dir: "d", Cost: bad},
	} {
		if _, err := RunMatrix(context.Background(), cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestThousands(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 999.6: "1,000", 1234567: "1,234,567", 100: "100", -4321: "-4,321"} {
		if got := thousands(f); got != want {
			t.Errorf("thousands(%g) = %q, want %q", f, got, want)
		}
	}
}
