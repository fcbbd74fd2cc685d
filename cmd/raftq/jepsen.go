package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/jepsen"
)

// jepsenFlags binds `raftq jepsen run`'s flags.
type jepsenFlags struct {
	cfg         jepsen.RaftqConfig
	nemeses     []string
	targets     []string
	power       []string
	shapes      []string
	actions     []string
	corruptCls  []string
	corruptDmg  []string
	acks        string
	concurrency int
	rf          int16
	configs     []string
	schedule    string
	logLevel    string
	allow       []string
	now         func() time.Time
}

func bindJepsenFlags(fs *pflag.FlagSet) *jepsenFlags {
	f := &jepsenFlags{cfg: jepsen.DefaultRaftqConfig(), now: time.Now}
	c, w, s := &f.cfg, &f.cfg.Run.Workload, &f.cfg.Schedule
	fs.IntVar(&c.Nodes, "nodes", c.Nodes, "raftq server processes to run")
	fs.StringSliceVar(&f.nemeses, "nemesis", kindNames(s.Kinds), "faults: kill, pause, partition, lose-unfsynced, membership, corrupt (comma separated; none for no faults)")
	fs.StringVar(&f.schedule, "schedule", "", "fault script (JSON file, or a shipped one: "+strings.Join(jepsen.ShippedScripts(), ", ")+") instead of a random schedule; see jepsen/schedules/README.md")
	fs.DurationVar(&w.Duration, "time", 120*time.Second, "how long the workload and the faults run")
	fs.Float64Var(&w.Rate, "rate", w.Rate, "operations per second, all processes together")
	fs.StringVar(&f.acks, "acks", "all", "producer acks: all, 1 or 0")
	fs.Uint64Var(&s.Seed, "seed", 1, "seed of the fault schedule and the workload")
	fs.StringVar(&c.Fsync, "fsync", c.Fsync, "nodes' WAL fsync policy: always or never")
	fs.StringVar(&c.Run.ReportDir, "report-dir", "", "report directory (default: jepsen-reports/<time>)")
	fs.StringVar(&c.Binary, "binary", "", "raftq executable the nodes run (default: this executable)")
	fs.Int32Var(&w.Partitions, "partitions", w.Partitions, "partitions of the test topic")
	fs.Int16Var(&f.rf, "replication-factor", 0, "replication factor of the test topic (default: min(3, nodes))")
	fs.StringArrayVarP(&f.configs, "config", "c", nil, "topic config key=value of the test topic (repeatable), e.g. -c replication.mode=isr -c min.insync.replicas=2")
	fs.IntVar(&f.concurrency, "concurrency", w.Producers+w.Consumers, "client processes: two thirds produce, the rest poll")
	fs.DurationVar(&s.Interval, "nemesis-interval", s.Interval, "mean time between faults of one kind, and mean fault length")
	fs.StringSliceVar(&f.targets, "kill-targets", targetNames(s.Targets), "nodes kill and pause hit: one, minority, majority, all, leader")
	fs.StringSliceVar(&f.power, "power-targets", targetNames(s.PowerTargets), "nodes lose-unfsynced power-loses: all, one, minority, majority, leader (of a partition of the test topic)")
	fs.StringSliceVar(&f.shapes, "partition-shapes", shapeNames(s.Shapes), "partitions: majority-minority, isolate-one, isolate-leader, bridge, majorities-ring")
	fs.StringSliceVar(&f.actions, "membership-actions", actionNames(s.Membership.Actions), "what membership faults do: move, reorder, cancel, kill-mid-move (of the test topic's partitions), decommission (a node, recommissioned at the fault's stop)")
	fs.Float64Var(&s.Membership.ResizeP, "membership-resize", s.Membership.ResizeP, "chance that a move's target has another number of replicas than the topic (never below min.insync.replicas in isr mode)")
	fs.DurationVar(&s.Membership.Settle, "membership-settle", s.Membership.Settle, "how long a membership fault's stop waits for its moves before it cancels them (never past the next fault step)")
	fs.StringSliceVar(&f.corruptCls, "corrupt-files", nil, "files corrupt faults damage: segment, index, checkpoint, wal (default all)")
	fs.StringSliceVar(&f.corruptDmg, "corrupt-damage", nil, "what corrupt faults do to them: flip (a few bits), truncate (default both)")
	fs.BoolVar(&w.Txn, "txn", false, "producers run Kafka transactions (commits and aborts over several partitions, after an optional read_committed poll) instead of single sends; consumers and final reads read_committed; allows "+strings.Join(txnAllowed, " and ")+" unless --allow is given")
	fs.IntVar(&w.TxnSends, "txn-sends", w.TxnSends, "with --txn: most sends per transaction, each to a random partition")
	fs.Float64Var(&w.TxnAbortP, "txn-abort-p", w.TxnAbortP, "with --txn: chance a transaction is meant to abort")
	fs.Float64Var(&w.TxnPollP, "txn-poll-p", w.TxnPollP, "with --txn: chance a transaction first polls its process's read_committed consumer")
	fs.StringSliceVar(&f.allow, "allow", nil, "checkers whose anomalies are reported but do not fail the run (replaces --txn's): "+strings.Join(jepsen.CheckerNames, ", "))
	fs.BoolVar(&w.Idempotent, "idempotent", true, "idempotent producers (default false with --unsafe-ack-before-commit)")
	fs.StringVar(&w.PollMode, "poll-mode", w.PollMode, "consumers: assign (seek) or subscribe (consumer groups)")
	fs.DurationVar(&w.OpTimeout, "op-timeout", w.OpTimeout, "a send or poll without an answer by then is indefinite")
	fs.DurationVar(&w.FinalReadTimeout, "final-read-timeout", w.FinalReadTimeout, "bound on reading each partition after the heal")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", c.ReadyTimeout, "bound on the cluster becoming healthy at start and after the heal")
	fs.StringArrayVar(&c.ServerArgs, "server-arg", nil, "extra raftq server flag for every node, e.g. --server-arg=--tick-interval=50ms (repeatable)")
	fs.DurationVar(&c.Writeback, "lazyfs-writeback", 0, "power-loss model: 0 loses every write not fsynced (the worst case); an age, e.g. 30s as on Linux, keeps files dirty for longer than it (they were written back)")
	fs.BoolVar(&c.KeepData, "keep-data", false, "keep the nodes' data directories in the report")
	fs.StringVar(&f.logLevel, "log-level", "warn", "harness log level on stderr: debug, info, warn or error")
	fs.BoolVar(&c.UnsafeAckBeforeCommit, "unsafe-ack-before-commit", false, "nodes answer acks=all before commit (to test the checkers)")
	_ = fs.MarkHidden("unsafe-ack-before-commit")
	return f
}

// txnAllowed are the checkers a txn run allows unless --allow says
// otherwise: Kafka transactions are atomic but not isolated, so two
// concurrent transactions may write two partitions in opposite orders, a
// write cycle (G0, and G1c with reads) Kafka's model permits.
var txnAllowed = []string{"G0", "G1c"}

// txnAllowedCheckers returns the txnAllowed checkers this build has.
func txnAllowedCheckers() []string {
	var out []string
	for _, n := range txnAllowed {
		if slices.Contains(jepsen.CheckerNames, n) {
			out = append(out, n)
		}
	}
	return out
}

func kindNames(ks []chaos.Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

func targetNames(ts []chaos.Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func actionNames(as []chaos.MemberAction) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}

func shapeNames(ss []chaos.Shape) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// config finishes the RaftqConfig from the flags; fs tells which flags
// were given.
func (f *jepsenFlags) config(fs *pflag.FlagSet, logger *slog.Logger) (jepsen.RaftqConfig, error) {
	c := f.cfg
	w, s := &c.Run.Workload, &c.Schedule
	w.Seed = s.Seed
	s.Kinds, s.Targets, s.Shapes, s.PowerTargets = nil, nil, nil, nil
	for _, n := range f.nemeses {
		if n != "none" && n != "" {
			s.Kinds = append(s.Kinds, chaos.Kind(n))
		}
	}
	for _, t := range f.targets {
		s.Targets = append(s.Targets, chaos.Target(t))
	}
	for _, t := range f.power {
		s.PowerTargets = append(s.PowerTargets, chaos.Target(t))
	}
	for _, sh := range f.shapes {
		s.Shapes = append(s.Shapes, chaos.Shape(sh))
	}
	s.Corrupt = chaos.CorruptConfig{}
	for _, cl := range f.corruptCls {
		s.Corrupt.Classes = append(s.Corrupt.Classes, chaos.FileClass(cl))
	}
	for _, d := range f.corruptDmg {
		s.Corrupt.Damages = append(s.Corrupt.Damages, chaos.Damage(d))
	}
	s.Membership.Actions = nil
	for _, a := range f.actions {
		s.Membership.Actions = append(s.Membership.Actions, chaos.MemberAction(a))
	}
	switch f.acks {
	case "all", "-1":
		w.Acks = jepsen.AcksAll
	case "1", "leader":
		w.Acks = jepsen.AcksLeader
	case "0", "none":
		w.Acks = jepsen.AcksNone
	default:
		return c, usageError{fmt.Errorf("--acks %q: want all, 1 or 0", f.acks)}
	}
	if !fs.Changed("idempotent") && (c.UnsafeAckBeforeCommit || w.Acks != jepsen.AcksAll) {
		w.Idempotent = false // idempotent batches are acknowledged only after apply; and need acks=all
	}
	w.ReadCommitted = w.Txn
	switch {
	case fs.Changed("allow"):
		c.Run.Check.Allowed = f.allow
	case w.Txn:
		c.Run.Check.Allowed = append(slices.Clone(c.Run.Check.Allowed), txnAllowedCheckers()...)
	}
	if f.concurrency < 2 {
		return c, usageError{fmt.Errorf("--concurrency %d: want at least 2 (a producer and a consumer)", f.concurrency)}
	}
	w.Producers = (2*f.concurrency + 2) / 3
	w.Consumers = f.concurrency - w.Producers
	configs, err := parseTopicConfigs(f.configs)
	if err != nil {
		return c, err
	}
	w.TopicConfigs = nil
	for k, v := range configs {
		if w.TopicConfigs == nil {
			w.TopicConfigs = map[string]string{}
		}
		w.TopicConfigs[k] = *v
	}
	w.ReplicationFactor = f.rf
	if f.rf == 0 {
		w.ReplicationFactor = int16(min(3, c.Nodes))
	}
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("find this executable (set --binary): %w", err)
		}
		c.Binary = exe
	}
	if c.Run.ReportDir == "" {
		c.Run.ReportDir = filepath.Join("jepsen-reports", f.now().UTC().Format("20060102T150405Z"))
	}
	c.Logger = logger
	if err := c.Validate(); err != nil {
		return c, usageError{err}
	}
	if err := c.Run.Validate(); err != nil {
		return c, usageError{err}
	}
	if f.schedule != "" {
		if fs.Changed("nemesis") {
			return c, usageError{errors.New("--schedule and --nemesis: give one")}
		}
		sc, err := jepsen.LoadScript(f.schedule)
		if err != nil {
			return c, usageError{err}
		}
		c.Script, s.Kinds = &sc, nil
		if err := c.Validate(); err != nil {
			return c, usageError{err}
		}
		ids := make([]int, c.Nodes)
		for i := range ids {
			ids[i] = i + 1
		}
		if _, err := sc.Schedule(ids); err != nil {
			return c, usageError{err}
		}
		return c, nil
	}
	if len(s.Kinds) > 0 {
		if _, err := c.Plan(); err != nil {
			return c, usageError{err}
		}
	}
	return c, nil
}

func runJepsen(ctx context.Context, e *env, args []string) error {
	return runSubcommand(ctx, e, args, []subcommand{{"run", runJepsenRun}, {"check", runJepsenCheck}, {"matrix", runJepsenMatrix}})
}

// runJepsenRun is `raftq jepsen run`: a whole test against a fresh cluster.
func runJepsenRun(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "jepsen run", "")
	f := bindJepsenFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	level, err := parseLevel(f.logLevel)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := f.config(fs, logger)
	if err != nil {
		return err
	}
	out, err := jepsen.RunRaftq(ctx, cfg)
	return reportJepsen(e, cfg, out, err)
}

// errJepsenFailed makes the command exit non-zero after it has printed
// its verdict.
var errJepsenFailed = errors.New("the run did not pass")

// reportJepsen prints the one-line verdict, the report path and the setup line, and
// returns an error (a non-zero exit) unless every checker passed, the
// run went through and no node crashed on its own.
func reportJepsen(e *env, cfg jepsen.RaftqConfig, out *jepsen.RaftqOutcome, runErr error) error {
	if out == nil || out.Results == nil {
		if runErr == nil {
			runErr = errors.New("the run produced no history")
		}
		return runErr
	}
	var extra string
	if n := len(out.Crashes); n > 0 {
		extra = fmt.Sprintf("; %d node crash(es), see %s", n, filepath.Join(cfg.Run.ReportDir, jepsen.NemesisFile))
	}
	problems := printVerdict(e, cfg.Run.ReportDir, out.Results, extra)
	fmt.Fprintf(e.stdout, "measures: %s\n", out.Results.Measures)
	if out.Membership != nil {
		fmt.Fprintf(e.stdout, "membership: %s\n", out.Membership)
	}
	fmt.Fprintf(e.stdout, "setup: %s durability=%s\n", out.Setup, jepsenDurability(cfg))
	if len(out.Crashes) > 0 {
		problems = append(problems, "nodes crashed")
	}
	if runErr != nil {
		problems = append(problems, runErr.Error())
	}
	return failedRun(problems)
}

// printVerdict prints the one-line verdict of res, followed by extra, and
// the path of dir's report, and returns what keeps the checked history
// from passing.
func printVerdict(e *env, dir string, res *jepsen.Results, extra string) []string {
	fmt.Fprintf(e.stdout, "jepsen: %s%s\n", res.Summary(), extra)
	fmt.Fprintf(e.stdout, "report: %s\n", filepath.Join(dir, jepsen.IndexFile))
	switch res.Verdict {
	case jepsen.VerdictFail:
		return []string{"anomalies found"}
	case jepsen.VerdictUnknown:
		return []string{"some checkers could not decide"}
	}
	return nil
}

// failedRun is nil without problems, else errJepsenFailed naming them.
func failedRun(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", errJepsenFailed, strings.Join(slices.Compact(problems), "; "))
}
