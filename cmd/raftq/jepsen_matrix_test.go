package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/jepsen"
)

func matrixConfig(t *testing.T, args ...string) (jepsen.MatrixConfig, error) {
	t.Helper()
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	fs := newFlags(e, "jepsen matrix", "")
	f := bindMatrixFlags(fs)
	if err := parse(fs, args); err != nil {
		return jepsen.MatrixConfig{}, err
	}
	return f.config(fs, e, nil)
}

func TestJepsenMatrixFlags_Config(t *testing.T) {
	c, err := matrixConfig(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Modes) != len(jepsen.MatrixModes) || len(c.Nemeses) != len(jepsen.MatrixNemeses) || len(c.Seeds) != 1 ||
		c.Base.Run.Workload.Duration != 30*time.Second || c.Dir != "jepsen-matrix" {
		t.Errorf("default matrix: %d modes %d nemeses seeds %v time %s dir %s", len(c.Modes), len(c.Nemeses), c.Seeds, c.Base.Run.Workload.Duration, c.Dir)
	}
	if c, err = matrixConfig(t, "--quick", "--seeds", "3,4"); err != nil || len(c.Modes) != len(quickModes) ||
		len(c.Nemeses) != len(quickNemeses) || len(c.Seeds) != 2 || c.Seeds[1] != 4 {
		t.Errorf("--quick: %+v %v", c, err)
	}
	if c, err = matrixConfig(t, "--quick", "--modes", "i2-a"); err != nil || len(c.Modes) != 1 || c.Modes[0].Name != "i2-a" || len(c.Nemeses) != len(quickNemeses) {
		t.Errorf("--quick --modes i2-a: %+v %v", c.Modes, err)
	}
	if _, err := matrixConfig(t, "--nemeses", "lrs", "--time", "20s"); err != nil {
		t.Errorf("a 20 s matrix of a 35 s script (the cell runs longer): %v", err)
	}
	for _, bad := range [][]string{
		{"--modes", "paxos"}, {"--nemeses", "flood"}, {"--seeds", ""},
		{"--cost-rate", "0"}, {"--cost-time", "0s"}, {"--cost-producers", "0"},
		{"--nemeses", "", "--cost=false"}, // nothing to run
	} {
		var ue usageError
		if _, err := matrixConfig(t, bad...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

func TestJepsenMatrixFlags_Cost(t *testing.T) {
	c, err := matrixConfig(t)
	if err != nil {
		t.Fatal(err)
	}
	if cc := c.Cost; cc.Bench == nil || cc.Nodes != 3 || cc.Duration != 10*time.Second || cc.Warmup != 3*time.Second ||
		cc.Rate != 50000 || cc.Producers != 4 || cc.Partitions != 6 {
		t.Errorf("default cost phase: %+v", cc)
	}
	if c, err = matrixConfig(t, "--quick"); err != nil || c.Cost.Bench == nil || c.Cost.Duration != quickCostTime || c.Cost.Warmup != quickCostWarmup {
		t.Errorf("--quick cost phase: %+v %v", c.Cost, err)
	}
	if c, err = matrixConfig(t, "--quick", "--cost-time", "5s", "--cost-warmup", "0s", "--cost-rate", "20000", "--cost-producers", "2"); err != nil ||
		c.Cost.Duration != 5*time.Second || c.Cost.Warmup != 0 || c.Cost.Rate != 20000 || c.Cost.Producers != 2 {
		t.Errorf("--quick with cost flags: %+v %v", c.Cost, err)
	}
	if c, err = matrixConfig(t, "--cost=false"); err != nil || c.Cost.Bench != nil {
		t.Errorf("--cost=false: %+v %v", c.Cost, err)
	}
	if c, err = matrixConfig(t, "--nemeses", "", "--modes", "r-a,i1-n"); err != nil || len(c.Nemeses) != 0 || len(c.Modes) != 2 || c.Cost.Bench == nil {
		t.Errorf("costs alone: %d nemeses, %d modes, %+v, %v", len(c.Nemeses), len(c.Modes), c.Cost, err)
	}
}

// TestE2E_JepsenMatrixOneCellAndResume runs a one-cell matrix on a real
// cluster, then again: the second run finds the cell done.
func TestE2E_JepsenMatrixOneCellAndResume(t *testing.T) {
	requireFaults(t, false)
	dir := filepath.Join(t.TempDir(), "matrix")
	args := []string{"jepsen", "matrix", "--binary", raftqBinary, "--dir", dir, "--modes", "r-a", "--nemeses", "k1",
		"--time", "15s", "--nemesis-interval", "4s", "--cost=false"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i, want := range []string{", 0s elapsed", ": done before, skipped"} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		if code := run(ctx, e, args); code != 0 {
			t.Fatalf("run %d: exit %d\n%s\n%s", i, code, stdout.String(), tailString(stderr.String(), 3000))
		}
		out := stdout.String()
		t.Logf("run %d:\n%s", i, out)
		if !strings.Contains(out, "cell 1/1 r-a/k1/seed-1"+want) || !strings.Contains(out, "| r-a | ok ok · loss/M 0") ||
			(i == 0) != strings.Contains(out, "  r-a/k1/seed-1: ok ok · loss/M 0") {
			t.Errorf("run %d output lacks the progress line %q or an ok r-a row", i, want)
		}
	}
	for _, name := range []string{jepsen.MatrixTable, jepsen.MatrixJSON, filepath.Join("r-a", "k1", "seed-1", jepsen.ResultsFile)} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

// TestE2E_JepsenMatrixCostAndResume runs the cost phase alone for two
// modes on real clusters, then again: the second run finds both done.
func TestE2E_JepsenMatrixCostAndResume(t *testing.T) {
	requireFaults(t, false)
	dir := filepath.Join(t.TempDir(), "matrix")
	args := []string{"jepsen", "matrix", "--binary", raftqBinary, "--dir", dir, "--modes", "r-a,i1-n", "--nemeses", "",
		"--cost-time", "3s", "--cost-warmup", "1s", "--cost-rate", "5000"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i, want := range []string{", 0s elapsed", ": done before, skipped"} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		if code := run(ctx, e, args); code != 0 {
			t.Fatalf("run %d: exit %d\n%s\n%s", i, code, stdout.String(), tailString(stderr.String(), 3000))
		}
		out := stdout.String()
		t.Logf("run %d:\n%s", i, out)
		if !strings.Contains(out, "cost 1/2 r-a"+want) || !strings.Contains(out, "## Cost") || !strings.Contains(out, "| i1-n | ") ||
			(i == 0) != strings.Contains(out, "  i1-n: 100 B ") || strings.Contains(out, "did not run through") {
			t.Errorf("run %d output lacks the progress line %q or the cost rows", i, want)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, jepsen.MatrixCostJSON))
	if err != nil {
		t.Fatal(err)
	}
	var rows []jepsen.CostRow
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 2 {
		t.Fatalf("cost.json: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		for _, m := range r.Loads {
			if f := m.Figures; !r.Done() || f == nil || f.RecordsPerS <= 0 || f.Failed != 0 || f.Unanswered != 0 || f.P99ms <= 0 {
				t.Errorf("%s %s: %+v %s", r.Mode, m.Load.Name, f, m.Err)
			}
		}
	}
	if s := rows[1].Setup(); s["topic.replication.mode"] != "isr" || s["brokers"] != "3" || s["topic.replication.factor"] != "3" {
		t.Errorf("i1-n setup %v", s)
	}
	for _, name := range []string{jepsen.MatrixTable, jepsen.MatrixIndex, jepsen.MatrixCostPlot, filepath.Join(jepsen.CostDir, "r-a.json"),
		filepath.Join(jepsen.CostDir, "i1-n", jepsen.ClusterDir, "node-1.log")} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, jepsen.CostDir, "r-a", jepsen.ClusterDir, "node-1", "data")); !os.IsNotExist(err) {
		t.Errorf("a cost cluster's data is left: %v", err)
	}
}
