package main

import (
	"bytes"
	"context"
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
	return f.config(fs, nil)
}

func TestJepsenMatrixFlags_Config(t *testing.T) {
	c, err := matrixConfig(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Modes) != len(jepsen.MatrixModes) || len(c.Nemeses) != len(jepsen.MatrixNemeses) || len(c.Seeds) != 1 ||
		c.Base.Run.Workload.Duration != 40*time.Second || c.Dir != "jepsen-matrix" {
		t.Errorf("default matrix: %d modes %d nemeses seeds %v time %s dir %s", len(c.Modes), len(c.Nemeses), c.Seeds, c.Base.Run.Workload.Duration, c.Dir)
	}
	if c, err = matrixConfig(t, "--quick", "--seeds", "3,4"); err != nil || len(c.Modes) != len(quickModes) ||
		len(c.Nemeses) != len(quickNemeses) || len(c.Seeds) != 2 || c.Seeds[1] != 4 {
		t.Errorf("--quick: %+v %v", c, err)
	}
	if c, err = matrixConfig(t, "--quick", "--modes", "i2-a"); err != nil || len(c.Modes) != 1 || c.Modes[0].Name != "i2-a" || len(c.Nemeses) != len(quickNemeses) {
		t.Errorf("--quick --modes i2-a: %+v %v", c.Modes, err)
	}
	for _, bad := range [][]string{
		{"--modes", "paxos"}, {"--nemeses", "flood"}, {"--seeds", ""},
		{"--nemeses", "lrs", "--time", "20s"}, // the script runs 32 s
	} {
		var ue usageError
		if _, err := matrixConfig(t, bad...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

// TestE2E_JepsenMatrixOneCellAndResume runs a one-cell matrix on a real
// cluster, then again: the second run finds the cell done.
func TestE2E_JepsenMatrixOneCellAndResume(t *testing.T) {
	requireFaults(t, false)
	dir := filepath.Join(t.TempDir(), "matrix")
	args := []string{"jepsen", "matrix", "--binary", raftqBinary, "--dir", dir, "--modes", "r-a", "--nemeses", "k1",
		"--time", "15s", "--nemesis-interval", "4s"}
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
