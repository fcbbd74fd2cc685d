package jepsen

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

func matrixBase() RaftqConfig {
	c := DefaultRaftqConfig()
	c.Binary = "raftq"
	c.Run.Workload.Duration = 45 * time.Second
	c.ServerArgs = []string{"--tick-interval=50ms"}
	return c
}

func mustFind(t *testing.T, modes, nemeses []string) ([]Mode, []Nemesis) {
	t.Helper()
	ms, err := FindModes(modes)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := FindNemeses(nemeses)
	if err != nil {
		t.Fatal(err)
	}
	return ms, ns
}

func TestCellConfig_AppliesModeAndNemesis(t *testing.T) {
	ms, ns := mustFind(t, []string{"i2e-n", "i1-n-rf2", "r-n"}, []string{"lrs", "k1", "pall"})
	c, err := CellConfig(matrixBase(), ms[0], ns[0], 4, "d")
	if err != nil {
		t.Fatal(err)
	}
	w := c.Run.Workload
	if c.Nodes != 5 || w.ReplicationFactor != 3 || c.Script == nil || c.Script.Name != "last-replica-standing" ||
		w.TopicConfigs["replication.mode"] != "isr" || w.TopicConfigs["min.insync.replicas"] != "2" ||
		!slices.Equal(c.ServerArgs, []string{"--tick-interval=50ms", isrLag, elrFlag}) || w.Seed != 4 || c.Run.ReportDir != "d" {
		t.Errorf("i2e-n × lrs: nodes %d rf %d script %v configs %v args %v seed %d", c.Nodes, w.ReplicationFactor, c.Script, w.TopicConfigs, c.ServerArgs, w.Seed)
	}
	if s := c.setup(); !s.ELR || s.Mode != "isr" || s.Nemesis[0] != "script:last-replica-standing" {
		t.Errorf("setup %+v", s)
	}
	if c, err = CellConfig(matrixBase(), ms[1], ns[1], 1, "d"); err != nil || c.Nodes != 3 || c.Run.Workload.ReplicationFactor != 2 ||
		!slices.Equal(c.Schedule.Kinds, []chaos.Kind{chaos.KindKill}) || c.Script != nil {
		t.Errorf("i1-n-rf2 × k1: %+v %v", c.Schedule, err)
	}
	if c, err = CellConfig(matrixBase(), ms[2], ns[2], 1, "d"); err != nil || c.Fsync != FsyncNever || !c.lazyFS() ||
		!slices.Equal(c.Schedule.PowerTargets, []chaos.Target{chaos.TargetAll}) || c.Run.Workload.TopicConfigs["replication.mode"] != "" {
		t.Errorf("r-n × pall: %+v %v", c, err)
	}
	short := matrixBase()
	short.Run.Workload.Duration = 20 * time.Second
	// A scripted cell outlasts its script; the others keep their time.
	if c, err := CellConfig(short, ms[0], ns[0], 1, "d"); err != nil || c.Run.Workload.Duration != c.Script.End()+scriptTail {
		t.Errorf("a 20 s run of a %s script: %s, %v", c.Script.End(), c.Run.Workload.Duration, err)
	}
	if c, err := CellConfig(short, ms[1], ns[1], 1, "d"); err != nil || c.Run.Workload.Duration != 20*time.Second {
		t.Errorf("a 20 s run of k1: %s, %v", c.Run.Workload.Duration, err)
	}
	if _, err := FindModes([]string{"r-a", "paxos"}); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "i2e-n") {
		t.Errorf("unknown mode: %v", err)
	}
}

func TestMatrixExpected_NamesKnownCells(t *testing.T) {
	for m, row := range MatrixExpected {
		if _, err := FindModes([]string{m}); err != nil {
			t.Error(err)
		}
		for n := range row {
			if _, err := FindNemeses([]string{n}); err != nil {
				t.Errorf("mode %s: %v", m, err)
			}
		}
	}
	for _, n := range MatrixNemeses {
		if _, err := CellConfig(matrixBase(), MatrixModes[0], n, 1, "d"); err != nil {
			t.Errorf("nemesis %s: %v", n.Name, err)
		}
	}
}

// fakeCells runs no cluster: it writes a results.json with the loss the
// test chose for each cell, as RunRaftq would.
type fakeCells struct {
	runs []string
	loss map[string]int // "mode/nemesis" -> loss
}

func (f *fakeCells) run(_ context.Context, cfg RaftqConfig) (*RaftqOutcome, error) {
	rel := filepath.Base(filepath.Dir(filepath.Dir(cfg.Run.ReportDir))) + "/" + filepath.Base(filepath.Dir(cfg.Run.ReportDir))
	f.runs = append(f.runs, rel)
	s := cfg.setup()
	res := &Results{Verdict: VerdictOK, Setup: &s}
	res.Measures.Acknowledged, res.Measures.Loss = 1000, f.loss[rel]
	res.Measures.LossPerMillion = float64(res.Measures.Loss) * 1000
	res.Measures.AvailabilityFaults = Ratio{OK: 9, Attempted: 10, Value: 0.9}
	res.Measures.Faults = []FaultMeasure{{FailoverNs: int64(1500 * time.Millisecond)}}
	if res.Measures.Loss > 0 {
		res.Verdict = VerdictFail
	}
	if err := os.MkdirAll(cfg.Run.ReportDir, 0o755); err != nil {
		return nil, err
	}
	if rel == "r-a/k1" && cfg.Schedule.Seed == 2 {
		return &RaftqOutcome{}, errors.New("cluster did not start")
	}
	if rel == "r-a/lrs" && cfg.Schedule.Seed == 2 {
		return &RaftqOutcome{Results: res}, errors.Join(errors.New("heal: node 3 exited before ready"),
			writeJSON(filepath.Join(cfg.Run.ReportDir, ResultsFile), res))
	}
	out := &RaftqOutcome{Results: res}
	if rel == "i1-n/k1" {
		out.Crashes = []chaos.Exit{{Node: 2}}
	}
	return out, writeJSON(filepath.Join(cfg.Run.ReportDir, ResultsFile), res)
}

func TestRunMatrix_RunsEachCellOnceWritesTheTableAndResumes(t *testing.T) {
	dir := t.TempDir()
	ms, ns := mustFind(t, []string{"r-a", "i1-n"}, []string{"k1", "lrs"})
	fake := &fakeCells{loss: map[string]int{"r-a/k1": 3}} // r-a/k1 expects ok: a disagreement; i1-n/lrs expects L
	var prog []MatrixProgress
	var done []string
	cfg := MatrixConfig{Base: matrixBase(), Modes: ms, Nemeses: ns, Seeds: []uint64{1, 2}, Dir: dir, Run: fake.run,
		Progress: func(p MatrixProgress) { prog = append(prog, p) },
		CellDone: func(c MatrixCell) { done = append(done, c.String()) }}
	res, err := RunMatrix(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cells := res.Cells
	if len(cells) != 8 || len(fake.runs) != 8 || len(prog) != 8 || prog[7].Cell != 8 || prog[7].Cells != 8 || prog[0].Left != 0 {
		t.Fatalf("%d cells, %d runs, progress %v", len(cells), len(fake.runs), prog)
	}
	if len(done) != 8 || done[1] != "r-a/k1/seed-2: error (exp. ok); cluster did not start" {
		t.Errorf("cells done %q", done)
	}
	if !strings.HasPrefix(prog[1].String(), "cell 2/8 r-a/k1/seed-2, ") || !strings.Contains(prog[1].String(), "left") {
		t.Errorf("progress line %q", prog[1])
	}
	b, err := os.ReadFile(filepath.Join(dir, MatrixTable))
	if err != nil {
		t.Fatal(err)
	}
	table := string(b)
	for _, want := range []string{
		"| mode | k1 (3 nodes) | lrs (5 nodes) |",
		"| r-a | fail L · loss/M 3000 · avail 0.90 · failover 1.5s (exp. ok)<br>error (exp. ok) |",
		"r-a/k1 seed 1: expected ok, measured a loss of 3000 per million acknowledged",
		"i1-n/lrs seed 1: expected L, measured no loss",
		"r-a/k1 seed 2 did not run through: cluster did not start",
		"- i1-n: isr, min.insync.replicas=1",
		"failover 1.5s · 1 node crashes (exp. ok)",
		"r-a/lrs seed 2 did not run through: heal: node 3 exited before ready",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	for _, name := range []string{MatrixLossAvailability, MatrixCost} {
		assertPNG(t, filepath.Join(dir, name))
	}
	html, err := os.ReadFile(filepath.Join(dir, MatrixIndex))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<a href="r-a/k1/seed-1/index.html">fail L · loss/M 3000`, MatrixLossAvailability,
		"i1-n/lrs seed 1: expected L, measured no loss", "<th>lrs (5 nodes)</th>"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("matrix.html lacks %q", want)
		}
	}
	if strings.Contains(table, "r-a/lrs seed 1: expected") {
		t.Errorf("an agreeing cell is listed as a disagreement:\n%s", table)
	}

	// Again: every cell with a results.json is skipped; the failed one runs again.
	fake.runs, prog = nil, nil
	if res, err = RunMatrix(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	cells = res.Cells
	if !slices.Equal(fake.runs, []string{"r-a/k1"}) || len(cells) != 8 || !prog[0].Skipped || prog[1].Skipped {
		t.Errorf("resumed run ran %v; progress %v", fake.runs, prog)
	}
	if c := cells[0]; c.Measures == nil || c.Measures.Loss != 3 || c.Setup == nil || c.Setup.Mode != "raft" {
		t.Errorf("a skipped cell lost its results: %+v", c)
	}
	if c := cells[4]; c.Mode != "i1-n" || c.Nemesis != "k1" || c.Crashes != 1 {
		t.Errorf("a skipped cell lost its crashes: %+v", c)
	}
	if c := cells[3]; c.Nemesis != "lrs" || c.Seed != 2 || !strings.Contains(c.Err, "exited before ready") {
		t.Errorf("a skipped cell lost its run error: %+v", c)
	}
}

// A cell is U when a fault kept a partition from an ok send for half
// the fault's window and at least stallFloor (or for good), however many
// sends the others took meanwhile; its expected outcome is checked on
// loss and on availability.
func TestMatrixCell_MeasuredAndDisagreements(t *testing.T) {
	const s = int64(time.Second)
	cell := func(exp string, loss int, window, failover int64) MatrixCell {
		m := &Measures{Loss: loss, AvailabilityFaults: Ratio{OK: 95, Attempted: 100, Value: 0.95},
			WorstPartitionFaults: PartitionRatio{Partition: "t/1", Ratio: Ratio{OK: 18, Attempted: 20, Value: 0.9}},
			Faults:               []FaultMeasure{{StartNs: 10 * s, EndNs: 10*s + window, FailoverNs: failover}}}
		if loss > 0 {
			m.LossPerMillion = 1e6 * float64(loss) / 100
		}
		return MatrixCell{Mode: "i2-n", Nemesis: "lrs", Seed: 1, Expected: exp, Measures: m}
	}
	for _, tc := range []struct {
		c        MatrixCell
		measured string
		loss, av bool // a loss disagreement, an availability one
	}{
		{cell("ok, U", 0, 20*s, 12*s), "U", false, false}, // stopped for most of the fault, as expected
		{cell("ok, U", 0, 20*s, 2*s), "ok", false, true},  // expected U, a blip only
		{cell("ok", 0, 20*s, -1), "U", false, true},       // expected ok, never recovered
		{cell("ok", 0, 2*s, 3*s), "ok", false, false},     // a short fault's failover: under the floor
		{cell("W", 0, 20*s, s), "ok", false, false},       // writable, as expected
		{cell("L, U", 5, 20*s, 15*s), "L", false, false},  // the expected loss
		{cell("ok", 5, 20*s, s), "L", true, false},        // an unexpected loss
		{cell("L", 0, 20*s, 15*s), "U", true, false},      // the expected loss did not happen; judged on loss only
		{cell("L?", 5, 20*s, s), "L", false, false},       // a coincidence either way
		{cell("n/a", 0, 20*s, 15*s), "U", false, false},   // nothing expected
	} {
		c := tc.c
		if got := c.Measured(); got != tc.measured {
			t.Errorf("%s %+v: measured %s, want %s", c.Expected, c.Measures.Faults, got, tc.measured)
		}
		if got := c.LossDisagrees() != ""; got != tc.loss {
			t.Errorf("%s, measured %s: loss disagreement %q, want one: %v", c.Expected, c.Measured(), c.LossDisagrees(), tc.loss)
		}
		if got := c.AvailabilityDisagrees() != ""; got != tc.av {
			t.Errorf("%s, measured %s: availability disagreement %q, want one: %v", c.Expected, c.Measured(), c.AvailabilityDisagrees(), tc.av)
		}
		if !strings.Contains(c.cellText(), "worst partition 0.90") {
			t.Errorf("cell text %q names no worst partition", c.cellText())
		}
	}
}
