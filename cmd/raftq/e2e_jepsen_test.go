package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/chaos/lazyfs"
	"github.com/raftq/raftq/chaos/netns"
	"github.com/raftq/raftq/jepsen"
)

// End-to-end tests of `raftq jepsen run`: the command runs in this
// process (the harness: clients, nemesis, lazyfs server, checkers) and
// starts the raftq binary built by TestMain as the nodes, in a private
// network namespace. The CI run is here; longer runs are in
// e2e_jepsen_long_test.go behind the long build tag.

// jepsenRun is what one `raftq jepsen run` produced.
type jepsenRun struct {
	code    int
	stdout  string
	dir     string
	results jepsen.Results
	outcome struct {
		Faults     []jepsen.FaultEvent `json:"faults"`
		Crashes    []chaos.Exit        `json:"crashes"`
		Membership *chaos.MemberStats  `json:"membership"`
	}
}

// requireFaults fails the test when the machine cannot make the faults
// (root, ip, iptables, /dev/fuse), or skips it outside CI when
// RAFTQ_SKIP_PRIVILEGED=1, as chaos's own tests do.
func requireFaults(t *testing.T, lazy bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("jepsen runs start real clusters; skipped with -short")
	}
	err := netns.Available()
	if lazy && err == nil {
		err = lazyfs.Available()
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") == "" && os.Getenv("RAFTQ_SKIP_PRIVILEGED") == "1" {
		t.Skipf("prerequisite missing (RAFTQ_SKIP_PRIVILEGED=1): %v", err)
	}
	t.Fatalf("prerequisite missing: %v\n(set RAFTQ_SKIP_PRIVILEGED=1 to skip these tests outside CI)", err)
}

// runJepsenCommand runs `raftq jepsen run` with args against raftqBinary
// and reads back its report.
func runJepsenCommand(t *testing.T, args ...string) *jepsenRun {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "report")
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	all := append([]string{"jepsen", "run", "--binary", raftqBinary, "--report-dir", dir, "--log-level", "warn"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := &jepsenRun{dir: dir}
	r.code = run(ctx, e, all)
	r.stdout = stdout.String()
	t.Logf("raftq %s\nexit %d\n%s%s", strings.Join(all, " "), r.code, r.stdout, tailString(stderr.String(), 3000))
	b, err := os.ReadFile(filepath.Join(dir, jepsen.ResultsFile))
	if err != nil {
		t.Fatalf("no results: %v", err)
	}
	if err := json.Unmarshal(b, &r.results); err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(filepath.Join(dir, jepsen.NemesisFile)); err != nil {
		t.Fatalf("no nemesis file: %v", err)
	}
	if err := json.Unmarshal(b, &r.outcome); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logNodeTails(t, filepath.Join(dir, jepsen.ClusterDir))
		}
	})
	return r
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func logNodeTails(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "node-*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			t.Logf("---- %s (tail) ----\n%s", filepath.Base(l), tail(b, 3000))
		}
	}
}

// count returns a checker's anomaly count, failing the test if absent.
func (r *jepsenRun) count(t *testing.T, name string) int {
	t.Helper()
	c := r.results.Checker(name)
	if c == nil {
		t.Fatalf("results have no %s checker", name)
	}
	return c.Count
}

// requireClean asserts a passing run: exit 0, every checker ok, no node
// crash, the verdict line and report path printed, and sends acknowledged.
func (r *jepsenRun) requireClean(t *testing.T) {
	t.Helper()
	for _, c := range r.results.Checkers {
		if c.Verdict != jepsen.VerdictOK {
			t.Errorf("checker %s: %s, %d anomalies %v, examples %+v", c.Name, c.Verdict, c.Count, c.Counts, c.Examples)
		}
	}
	if len(r.outcome.Crashes) > 0 {
		t.Errorf("nodes crashed: %+v", r.outcome.Crashes)
	}
	if r.code != 0 {
		t.Errorf("exit status %d, want 0", r.code)
	}
	if !strings.HasPrefix(r.stdout, "jepsen: ok: ") || !strings.Contains(r.stdout, "report: "+filepath.Join(r.dir, jepsen.IndexFile)) {
		t.Errorf("output %q lacks the verdict line and the report path", r.stdout)
	}
	if ok := r.results.Stats.ByF[jepsen.FSend][jepsen.OK]; ok < 200 {
		t.Errorf("only %d acknowledged sends: the run proves little", ok)
	}
}

// requireFaultsDone asserts that the nemesis started and stopped at
// least min faults of each kind without an error.
func (r *jepsenRun) requireFaultsDone(t *testing.T, min int, kinds ...chaos.Kind) {
	t.Helper()
	for _, k := range kinds {
		started, stopped := 0, 0
		for _, f := range r.outcome.Faults {
			if f.Kind != k || f.Err != "" {
				continue
			}
			switch f.Phase {
			case chaos.PhaseStart:
				started++
			case chaos.PhaseStop:
				stopped++
			}
		}
		if started < min || stopped < min {
			t.Errorf("%s: %d faults started and %d stopped without error, want at least %d", k, started, stopped, min)
		}
	}
}

// TestE2E_JepsenKillPartition is the CI run: three nodes, kill (of one,
// a minority, a majority, all nodes or a partition leader) and network
// partitions (every shape, the leader isolated too), acks=all, fsync
// always, for 60 s. Every checker must pass.
func TestE2E_JepsenKillPartition(t *testing.T) {
	requireFaults(t, false)
	r := runJepsenCommand(t, "--nodes", "3", "--nemesis", "kill,partition", "--time", "60s",
		"--nemesis-interval", "8s", "--rate", "500", "--acks", "all", "--fsync", "always", "--seed", "7",
		"--server-arg=--tick-interval=50ms")
	r.requireClean(t)
	r.requireFaultsDone(t, 2, chaos.KindKill, chaos.KindPartition)
}

// TestE2E_JepsenCatchesUnsafeAckBeforeCommit is the test of the test:
// nodes that answer acks=all before commit lose acknowledged writes when
// a partition leader is cut off (it acknowledges writes no majority will
// ever hold), and the run must say so.
func TestE2E_JepsenCatchesUnsafeAckBeforeCommit(t *testing.T) {
	requireFaults(t, false)
	r := runJepsenCommand(t, "--nodes", "3", "--nemesis", "partition", "--partition-shapes", "isolate-leader",
		"--time", "25s", "--nemesis-interval", "4s", "--rate", "500", "--acks", "all", "--seed", "7",
		"--unsafe-ack-before-commit")
	if r.code == 0 {
		t.Errorf("exit status 0 for a run against --unsafe-ack-before-commit")
	}
	if n := r.count(t, jepsen.CheckLostWrite); n == 0 {
		t.Errorf("no lost writes reported against --unsafe-ack-before-commit; results %s", r.results.Summary())
	}
	if !strings.HasPrefix(r.stdout, "jepsen: fail: ") {
		t.Errorf("verdict line %q, want a fail", r.stdout)
	}
	r.requireFaultsDone(t, 1, chaos.KindPartition)
}

// TestE2E_JepsenLoseUnfsyncedLosesWritesWithFsyncNever proves the lazyfs
// layer drops what it claims to: with the partition WALs never fsynced, a
// power loss of every node loses acknowledged writes, and the run reports
// them.
func TestE2E_JepsenLoseUnfsyncedLosesWritesWithFsyncNever(t *testing.T) {
	requireFaults(t, true)
	// One consumer for three producers: a lost write is one no poll read
	// before the loss, so consumers that keep up closely leave few.
	r := runJepsenCommand(t, "--nodes", "3", "--nemesis", "lose-unfsynced", "--fsync", "never",
		"--time", "25s", "--nemesis-interval", "4s", "--rate", "500", "--acks", "all", "--seed", "7",
		"--concurrency", "4")
	if r.code == 0 {
		t.Errorf("exit status 0 although unsynced writes were dropped")
	}
	if n := r.count(t, jepsen.CheckLostWrite); n == 0 {
		t.Errorf("no lost writes after losing unsynced writes with fsync never; results %s", r.results.Summary())
	}
	if m := r.results.Measures; m.LossPerMillion <= 0 || m.LostPerMillion <= 0 {
		t.Errorf("loss per million %g, lost per million %g: want both above 0", m.LossPerMillion, m.LostPerMillion)
	}
	r.requireFaultsDone(t, 1, chaos.KindLoseUnfsynced)
}

// TestE2E_JepsenLoseUnfsyncedIsCleanWithFsyncAlways is the control: the
// same power losses of every node with fsync always lose nothing that was
// acknowledged.
func TestE2E_JepsenLoseUnfsyncedIsCleanWithFsyncAlways(t *testing.T) {
	requireFaults(t, true)
	r := runJepsenCommand(t, "--nodes", "3", "--nemesis", "lose-unfsynced", "--fsync", "always",
		"--time", "25s", "--nemesis-interval", "4s", "--rate", "500", "--acks", "all", "--seed", "7",
		"-c", "retention.ms=86400000")
	r.requireClean(t)
	r.requireFaultsDone(t, 1, chaos.KindLoseUnfsynced)
	if s := r.results.Setup; s == nil || s.TopicConfigs["retention.ms"] != "86400000" || s.Fsync != "always" || s.LazyFS != "worst-case" {
		t.Errorf("results.json setup %+v", s)
	}
	if !strings.Contains(r.stdout, "setup: ") || !strings.Contains(r.stdout, "topic.retention.ms=86400000") {
		t.Errorf("output %q lacks the setup line", r.stdout)
	}
}

// TestE2E_JepsenPowerLossOfTheLeader power-loses one partition leader
// at a time with fsync always: each fault hits one node, the others keep
// serving, and nothing acknowledged is lost.
func TestE2E_JepsenPowerLossOfTheLeader(t *testing.T) {
	requireFaults(t, true)
	r := runJepsenCommand(t, "--nodes", "3", "--nemesis", "lose-unfsynced", "--power-targets", "leader",
		"--fsync", "always", "--time", "25s", "--nemesis-interval", "4s", "--rate", "500", "--acks", "all", "--seed", "7")
	r.requireClean(t)
	r.requireFaultsDone(t, 1, chaos.KindLoseUnfsynced)
	for _, f := range r.outcome.Faults {
		if f.Kind == chaos.KindLoseUnfsynced && len(f.Nodes) != 1 {
			t.Errorf("power loss of the leader hit %v: %s", f.Nodes, f.Detail)
		}
	}
	if s := r.results.Setup; s == nil || !slices.Equal(s.PowerTargets, []string{"leader"}) {
		t.Errorf("setup %+v lacks the power targets", s)
	}
	r.requireMeasures(t)
}

// TestE2E_JepsenMembership runs the membership nemesis alone on five
// raft-mode nodes for 40 s: partitions of the test topic move to other
// replicas (now and then another number of them), reorders move the
// preferred leader, moves are cancelled, nodes killed mid-move and a
// node decommissioned and recommissioned, under acks=all load. Every
// checker must pass, moves must complete, the nemesis log must say so,
// and no move may be left in flight. Seed 3 draws kill-mid-move, move,
// cancel, move, cancel and decommission.
func TestE2E_JepsenMembership(t *testing.T) {
	requireFaults(t, false)
	r := runJepsenCommand(t, "--nodes", "5", "--nemesis", "membership", "--time", "40s", "--nemesis-interval", "4s",
		"--rate", "500", "--acks", "all", "--seed", "3", "--server-arg=--leader-balance-interval=2s")
	r.requireClean(t)
	r.requireFaultsDone(t, 2, chaos.KindMembership)
	st := r.outcome.Membership
	if st == nil || st.Moves == 0 || st.Completed == 0 || st.Unfinished != 0 || st.Elsewhere != 0 {
		t.Fatalf("membership stats %+v, want moves completed, none unfinished or elsewhere", st)
	}
	if !strings.Contains(r.stdout, "membership: moves=") {
		t.Errorf("output %q lacks the membership line", r.stdout)
	}
	var moved, settled bool
	for _, f := range r.outcome.Faults {
		switch {
		case f.Kind != chaos.KindMembership:
		case f.Phase == chaos.PhaseStart && f.Err == "" && !strings.Contains(f.Detail, "->[") && !strings.Contains(f.Detail, "nothing to do") &&
			!strings.HasPrefix(f.Detail, "decommission "):
			t.Errorf("start %q names no target", f.Detail)
		case f.Phase == chaos.PhaseStop && strings.Contains(f.Detail, " on [") && strings.Contains(f.Detail, " after "):
			moved = true
		case f.Phase == chaos.PhaseHeal:
			settled = f.Err == "" && f.Membership != nil
		}
	}
	if !moved || !settled {
		t.Errorf("faults %+v: want a stop that saw a move end on its target, and a clean final settle", r.outcome.Faults)
	}
	for _, f := range r.results.Measures.Faults {
		if f.Nemesis == string(chaos.KindMembership) && f.NoFailover == strings.HasPrefix(f.Detail, "kill ") {
			t.Errorf("fault %+v: a failover is measured exactly for kills mid-move", f)
		}
	}
	if s := r.results.Setup; s == nil || len(s.MembershipActions) != len(chaos.MemberActions) {
		t.Errorf("setup %+v lacks the membership actions", s)
	}
}

// requireMeasures asserts results.json's measures agree with the run's
// counts: every acknowledged send counted, a fault measure per window,
// each fault followed by an ok send on every partition.
func (r *jepsenRun) requireMeasures(t *testing.T) {
	t.Helper()
	m := r.results.Measures
	if ok := r.results.Stats.ByF[jepsen.FSend][jepsen.OK]; m.Acknowledged != ok || m.Attempted < ok {
		t.Errorf("measures count %d acknowledged of %d, history has %d ok sends", m.Acknowledged, m.Attempted, ok)
	}
	if len(m.Faults) == 0 || m.AvailabilityOutside.Value <= 0 || m.OKSendsPerSecOutside <= 0 || m.LatencyP99Ns < m.LatencyP50Ns {
		t.Errorf("measures %+v", m)
	}
	for i, f := range m.Faults {
		if f.FailoverNs < 0 && i < len(m.Faults)-1 { // the last may last to the workload's end
			t.Errorf("fault %+v: a partition never took a write again", f)
		}
	}
	if !strings.Contains(r.stdout, "measures: acknowledged=") {
		t.Errorf("output %q lacks the measures line", r.stdout)
	}
}

// TestE2E_JepsenScriptLastReplicaStanding plays the shipped
// last-replica-standing script on five raft-mode nodes with fsync always:
// the script binds the roles of a partition away from the metadata
// leader, cuts that partition's leader from its followers and
// power-loses the leader; raft's majority elects a new leader, and
// nothing acknowledged is lost.
func TestE2E_JepsenScriptLastReplicaStanding(t *testing.T) {
	requireFaults(t, true)
	r := runJepsenCommand(t, "--nodes", "5", "--schedule", "last-replica-standing", "--fsync", "always",
		"--time", "40s", "--rate", "500", "--acks", "all", "--seed", "7", "--server-arg=--tick-interval=50ms")
	r.requireClean(t)
	r.requireFaultsDone(t, 1, chaos.KindPartition, chaos.KindLoseUnfsynced)
	var cut, loss *jepsen.FaultEvent
	for i, f := range r.outcome.Faults {
		switch {
		case f.Phase != chaos.PhaseStart:
		case f.Kind == chaos.KindPartition:
			cut = &r.outcome.Faults[i]
		case f.Kind == chaos.KindLoseUnfsynced:
			loss = &r.outcome.Faults[i]
		}
	}
	if cut == nil || loss == nil {
		t.Fatalf("faults %+v", r.outcome.Faults)
	}
	if !strings.Contains(cut.Detail, "leader ") || len(cut.Nodes) != 3 {
		t.Errorf("the cut acted on %v (%s), want the partition's three replicas and its roles", cut.Nodes, cut.Detail)
	}
	if len(loss.Nodes) != 1 || !slices.Contains(cut.Nodes, loss.Nodes[0]) {
		t.Errorf("power loss of %v, want the cut partition's leader (cut %v)", loss.Nodes, cut.Nodes)
	}
	if s := r.results.Setup; s == nil || !slices.Equal(s.Nemesis, []string{"script:last-replica-standing"}) {
		t.Errorf("setup %+v", s)
	}
}

// jepsenConfig parses `raftq jepsen run` flags into the run's config.
func jepsenConfig(t *testing.T, args ...string) (jepsen.RaftqConfig, error) {
	t.Helper()
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	fs := newFlags(e, "jepsen run", "")
	f := bindJepsenFlags(fs)
	f.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	if err := parse(fs, args); err != nil {
		return jepsen.RaftqConfig{}, err
	}
	return f.config(fs, nil)
}

func TestJepsenFlags_Config(t *testing.T) {
	c, err := jepsenConfig(t, "--nodes", "5", "--nemesis", "kill,pause,partition,lose-unfsynced", "--time", "120s",
		"--rate", "2000", "--acks", "all", "--seed", "7", "--concurrency", "9")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	w := c.Run.Workload
	switch {
	case c.Binary != exe:
		t.Errorf("binary %q, want this executable %q", c.Binary, exe)
	case c.Run.ReportDir != filepath.Join("jepsen-reports", "20260102T030405Z"):
		t.Errorf("report dir %q", c.Run.ReportDir)
	case len(c.Schedule.Kinds) != 4 || c.Schedule.Seed != 7 || w.Seed != 7:
		t.Errorf("kinds %v seed %d/%d", c.Schedule.Kinds, c.Schedule.Seed, w.Seed)
	case w.Producers != 6 || w.Consumers != 3:
		t.Errorf("%d producers %d consumers, want 6 and 3", w.Producers, w.Consumers)
	case w.ReplicationFactor != 3 || w.Duration != 120*time.Second || w.Rate != 2000:
		t.Errorf("rf %d duration %s rate %g", w.ReplicationFactor, w.Duration, w.Rate)
	case w.Acks != jepsen.AcksAll || !w.Idempotent || c.UnsafeAckBeforeCommit || c.Fsync != jepsen.FsyncAlways:
		t.Errorf("acks %s idempotent %v unsafe %v fsync %s", w.Acks, w.Idempotent, c.UnsafeAckBeforeCommit, c.Fsync)
	}

	if c, err = jepsenConfig(t, "--unsafe-ack-before-commit", "--nodes", "1", "--nemesis", "none"); err != nil {
		t.Fatal(err)
	}
	if !c.UnsafeAckBeforeCommit || c.Run.Workload.Idempotent || c.Run.Workload.ReplicationFactor != 1 || len(c.Schedule.Kinds) != 0 {
		t.Errorf("unsafe run: unsafe %v idempotent %v rf %d kinds %v", c.UnsafeAckBeforeCommit,
			c.Run.Workload.Idempotent, c.Run.Workload.ReplicationFactor, c.Schedule.Kinds)
	}
	if c, err = jepsenConfig(t, "--unsafe-ack-before-commit", "--idempotent=true"); err != nil || !c.Run.Workload.Idempotent {
		t.Errorf("an explicit --idempotent must win: %v %v", c.Run.Workload.Idempotent, err)
	}
	if c, err = jepsenConfig(t, "-c", "replication.mode=isr", "--config", "min.insync.replicas=2", "-c", "x=a=b"); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Run.Workload.TopicConfigs, map[string]string{"replication.mode": "isr", "min.insync.replicas": "2", "x": "a=b"}; !maps.Equal(got, want) {
		t.Errorf("topic configs %v, want %v", got, want)
	}
	if c, err = jepsenConfig(t); err != nil || c.Run.Workload.TopicConfigs != nil {
		t.Errorf("no -c: topic configs %v, %v", c.Run.Workload.TopicConfigs, err)
	}
	if c, err = jepsenConfig(t, "--nemesis", "lose-unfsynced", "--power-targets", "leader,one"); err != nil {
		t.Fatal(err)
	}
	if got := c.Schedule.PowerTargets; !slices.Equal(got, []chaos.Target{chaos.TargetLeader, chaos.TargetOne}) {
		t.Errorf("power targets %v", got)
	}
	if c, err = jepsenConfig(t); err != nil || !slices.Equal(c.Schedule.PowerTargets, []chaos.Target{chaos.TargetAll}) {
		t.Errorf("default power targets %v, %v", c.Schedule.PowerTargets, err)
	}
	if c, err = jepsenConfig(t, "--lazyfs-writeback", "30s"); err != nil || c.Writeback != 30*time.Second {
		t.Errorf("--lazyfs-writeback 30s: %s, %v", c.Writeback, err)
	}
	if c, err = jepsenConfig(t, "--nodes", "5", "--time", "45s", "--schedule", "last-replica-standing"); err != nil {
		t.Fatal(err)
	}
	if c.Script == nil || c.Script.Name != "last-replica-standing" || len(c.Schedule.Kinds) != 0 {
		t.Errorf("--schedule: script %v kinds %v", c.Script, c.Schedule.Kinds)
	}
	for _, bad := range [][]string{
		{"--nodes", "3", "--time", "45s", "--schedule", "last-replica-standing"},
		{"--nodes", "5", "--time", "20s", "--schedule", "unclean-election"},
		{"--nodes", "5", "--time", "45s", "--schedule", "unclean-election", "--nemesis", "kill"},
		{"--schedule", "no-such-file.json"},
	} {
		var ue usageError
		if _, err := jepsenConfig(t, bad...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
	if c, err = jepsenConfig(t, "--acks", "1"); err != nil || c.Run.Workload.Acks != jepsen.AcksLeader || c.Run.Workload.Idempotent {
		t.Errorf("acks=1: %s idempotent %v %v", c.Run.Workload.Acks, c.Run.Workload.Idempotent, err)
	}
	if c, err = jepsenConfig(t, "--nodes", "5", "--nemesis", "membership,kill,partition", "--membership-actions", "move,kill-mid-move"); err != nil {
		t.Fatal(err)
	}
	if got := c.Schedule.Membership.Actions; !slices.Equal(got, []chaos.MemberAction{chaos.ActionMove, chaos.ActionKillMidMove}) || len(c.Schedule.Kinds) != 3 {
		t.Errorf("membership actions %v, kinds %v", got, c.Schedule.Kinds)
	}
	if c, err = jepsenConfig(t, "--nemesis", "membership"); err != nil || !slices.Equal(c.Schedule.Membership.Actions, chaos.MemberActions) {
		t.Errorf("default membership actions %v, %v", c.Schedule.Membership.Actions, err)
	}
	for _, bad := range [][]string{
		{"--nemesis", "membership", "--membership-actions", "frobnicate"},
		{"--nemesis", "membership", "-c", "replication.mode=isr", "-c", "min.insync.replicas=4"},
		{"--nemesis", "membership", "--membership-resize", "2"},
		{"--nemesis", "flood"}, {"--fsync", "sometimes"}, {"--acks", "2"},
		{"--concurrency", "1"}, {"--kill-targets", "nobody"}, {"--power-targets", "half"}, {"--lazyfs-writeback", "-1s"}, {"--nodes", "0"}, {"-c", "novalue"}, {"-c", "=v"},
	} {
		var ue usageError
		if _, err := jepsenConfig(t, bad...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

func TestJepsenCommand_NeedsRun(t *testing.T) {
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	if code := run(context.Background(), e, []string{"jepsen"}); code != 2 {
		t.Errorf("raftq jepsen: exit %d, want 2", code)
	}
	if code := run(context.Background(), e, []string{"jepsen", "run", "--bogus"}); code != 2 {
		t.Errorf("raftq jepsen run --bogus: exit %d, want 2", code)
	}
}
