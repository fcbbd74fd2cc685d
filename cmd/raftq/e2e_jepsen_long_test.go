//go:build long

package main

import (
	"testing"

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
