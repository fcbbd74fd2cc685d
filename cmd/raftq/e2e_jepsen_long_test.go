//go:build long

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/jepsen"
)

// Long jepsen runs, on demand: go test -tags long -run TestE2E_JepsenLong ./cmd/raftq/
// (about 14 minutes without -race). The verdict table in jepsen/RESULTS.md
// comes from jepsen/scripts/verdict-table.sh, with 5-minute runs.

// TestE2E_JepsenLong_CleanUnderEachNemesis runs five nodes, acks=all and
// fsync always under each nemesis alone for two minutes; lose-unfsynced
// runs together with kill. Every checker must pass.
func TestE2E_JepsenLong_CleanUnderEachNemesis(t *testing.T) {
	for _, nem := range []string{"kill", "pause", "partition", "lose-unfsynced,kill"} {
		t.Run(nem, func(t *testing.T) {
			requireFaults(t, true)
			r := runJepsenCommand(t, "--nodes", "5", "--nemesis", nem, "--time", "120s", "--rate", "2000",
				"--acks", "all", "--fsync", "always", "--seed", "7")
			r.requireClean(t)
		})
	}
}

// TestE2E_JepsenLong_IssueCommand is the command line of the issue: every
// nemesis at once on five nodes.
func TestE2E_JepsenLong_IssueCommand(t *testing.T) {
	requireFaults(t, true)
	r := runJepsenCommand(t, "--nodes", "5", "--nemesis", "kill,pause,partition,lose-unfsynced",
		"--time", "120s", "--rate", "2000", "--acks", "all", "--seed", "7")
	r.requireClean(t)
	r.requireFaultsDone(t, 2, chaos.KindKill, chaos.KindPause, chaos.KindPartition, chaos.KindLoseUnfsynced)
}

// TestE2E_JepsenLong_UnsafeAckBeforeCommitUnderKillAndPartition is the
// test of the test in a mixed run: kills of any target, including
// partition leaders, and every partition shape. Kills alone rarely expose
// the unsafe flag: the leader sends an entry to its followers in the same
// raft Ready that appends it, before the early answer, so a killed leader's
// entries usually survive on a follower that then wins the election; a
// cut-off leader's do not.
func TestE2E_JepsenLong_UnsafeAckBeforeCommitUnderKillAndPartition(t *testing.T) {
	requireFaults(t, false)
	r := runJepsenCommand(t, "--nodes", "5", "--nemesis", "kill,partition",
		"--time", "120s", "--rate", "2000", "--acks", "all", "--seed", "7", "--unsafe-ack-before-commit")
	if n := r.count(t, jepsen.CheckLostWrite); n == 0 {
		t.Errorf("no lost writes reported against --unsafe-ack-before-commit; %s", r.results.Summary())
	}
}

// TestE2E_JepsenLong_ScriptUncleanElection plays the unclean-election
// script in raft mode: the killed leader's partition elects a new leader
// from its followers, as raft always may, and nothing acknowledged is
// lost.
func TestE2E_JepsenLong_ScriptUncleanElection(t *testing.T) {
	requireFaults(t, false)
	r := runJepsenCommand(t, "--nodes", "5", "--schedule", "unclean-election", "--time", "40s", "--rate", "500",
		"--acks", "all", "--seed", "7", "--server-arg=--tick-interval=50ms")
	r.requireClean(t)
	r.requireFaultsDone(t, 1, chaos.KindPartition, chaos.KindKill)
	r.requireMeasures(t)
}

// TestE2E_JepsenLong_QuickMatrix is the --quick matrix (about ten minutes
// without -race). Cells that need the broker's isr mode fail to run until
// it exists; the raft cells must agree with ISR-NOTES §4.3.
func TestE2E_JepsenLong_QuickMatrix(t *testing.T) {
	requireFaults(t, true)
	dir := filepath.Join(t.TempDir(), "matrix")
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	code := run(ctx, e, []string{"jepsen", "matrix", "--quick", "--binary", raftqBinary, "--dir", dir})
	t.Logf("exit %d\n%s", code, stdout.String())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, tailString(stderr.String(), 3000))
	}
	b, err := os.ReadFile(filepath.Join(dir, jepsen.MatrixJSON))
	if err != nil {
		t.Fatal(err)
	}
	var cells []jepsen.MatrixCell
	if err := json.Unmarshal(b, &cells); err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		if strings.HasPrefix(c.Mode, "r-") {
			if d := c.LossDisagrees(); d != "" || c.Measures == nil {
				t.Errorf("raft cell %s/%s: %s %s", c.Mode, c.Nemesis, d, c.Err)
			}
		}
	}
}
