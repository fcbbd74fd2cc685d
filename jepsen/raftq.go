package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/chaos/lazyfs"
	"github.com/raftq/raftq/chaos/netns"
	"github.com/raftq/raftq/internal/logging"
)

// Fsync policies of raftq nodes.
const (
	FsyncAlways = "always"
	FsyncNever  = "never"
)

// ClusterDir is the report subdirectory that holds the nodes' logs
// (node-N.log) and, while the run lasts, their data directories.
const ClusterDir = "cluster"

// NemesisFile is the report file listing every fault step performed,
// with the nodes it acted on, and any node crash.
const NemesisFile = "nemesis.json"

// metadataMinAge is how often the workload's clients may refresh
// metadata after an error, e.g. when a leader dies.
const metadataMinAge = 250 * time.Millisecond

// RaftqConfig describes a Jepsen run against a cluster of real `raftq
// server` processes in a private network namespace.
type RaftqConfig struct {
	// Run is the workload, checks and report directory. RunRaftq fills in
	// the brokers, the client dialer, the nemesis, the schedule and
	// Recover.
	Run Config
	// Binary is the raftq executable each node runs (`Binary server ...`).
	Binary string
	// Nodes is the cluster size.
	Nodes int
	// Fsync is the nodes' WAL policy: FsyncAlways or FsyncNever.
	Fsync string
	// UnsafeAckBeforeCommit passes the hidden --unsafe-ack-before-commit
	// broker flag: acks=all answered before commit. It only takes effect
	// for non-idempotent producers (the broker cannot project an
	// idempotent batch's offset before apply).
	UnsafeAckBeforeCommit bool
	// ServerArgs are extra `raftq server` flags for every node.
	ServerArgs []string
	// Schedule draws the faults; its Nodes and Duration are filled in
	// (the workload's duration). No Kinds means a run without faults.
	// Its Seed seeds the workload too.
	Schedule chaos.ScheduleConfig
	// Script, when set, is the fault schedule instead of a drawn one
	// (see chaos.Script and schedules/); it must end within the
	// workload's duration.
	Script *chaos.Script
	// LazyFS puts the data dirs on lazyfs; it is forced on when the
	// schedule has lose-unfsynced.
	LazyFS bool
	// Writeback turns on lazyfs's writeback model (see chaos/lazyfs): at a
	// power loss, files dirty for at least this long were written back
	// and survive, as on Linux (lazyfs.LinuxWritebackAge, 30 s). Zero is
	// the worst case, everything not fsynced is lost. results.json names
	// the model (Setup.LazyFS).
	Writeback time.Duration
	// KeepData keeps the nodes' data directories after the run (the logs
	// are always kept).
	KeepData bool
	// ReadyTimeout bounds the wait for a healthy cluster, at the start and
	// after the final heal.
	ReadyTimeout time.Duration
	Logger       *slog.Logger
}

// DefaultRaftqConfig returns a 5-node, fsync-always run of the default
// workload with every nemesis but lose-unfsynced, on a 10 s interval.
func DefaultRaftqConfig() RaftqConfig {
	sc := chaos.DefaultScheduleConfig()
	sc.Kinds = []chaos.Kind{chaos.KindKill, chaos.KindPause, chaos.KindPartition}
	sc.Targets = append(sc.Targets, chaos.TargetLeader)
	sc.Shapes = append(sc.Shapes, chaos.ShapeIsolateLeader)
	return RaftqConfig{Run: DefaultConfig(), Nodes: 5, Fsync: FsyncAlways, Schedule: sc, ReadyTimeout: 90 * time.Second}
}

// Validate reports a bad setting.
func (c RaftqConfig) Validate() error {
	switch {
	case c.Binary == "":
		return fmt.Errorf("no raftq binary: %w", ErrBadConfig)
	case c.Nodes < 1 || c.Nodes > 250:
		return fmt.Errorf("%d nodes, want 1..250: %w", c.Nodes, ErrBadConfig)
	case c.Fsync != FsyncAlways && c.Fsync != FsyncNever:
		return fmt.Errorf("fsync %q, want always or never: %w", c.Fsync, ErrBadConfig)
	case c.ReadyTimeout <= 0:
		return fmt.Errorf("ready timeout %s: %w", c.ReadyTimeout, ErrBadConfig)
	case c.Writeback < 0:
		return fmt.Errorf("lazyfs writeback age %s: %w", c.Writeback, ErrBadConfig)
	case c.Run.ReportDir == "":
		return fmt.Errorf("no report directory: %w", ErrBadConfig)
	case c.Script != nil && c.Script.End() > c.Run.Workload.Duration:
		return fmt.Errorf("script %s runs until %s, past the workload's %s: %w", c.Script.Name, c.Script.End(), c.Run.Workload.Duration, ErrBadConfig)
	case c.Script != nil && c.Nodes < c.Script.MinNodes:
		return fmt.Errorf("script %s needs %d nodes, have %d: %w", c.Script.Name, c.Script.MinNodes, c.Nodes, ErrBadConfig)
	}
	return nil
}

// RaftqOutcome is what a run against raftq produced.
type RaftqOutcome struct {
	// Results are the checkers' verdicts; nil when the run recorded
	// nothing to check.
	Results *Results `json:"-"`
	// Faults lists the fault steps performed; Crashes the node exits the
	// harness did not cause.
	Faults  []FaultEvent `json:"faults"`
	Crashes []chaos.Exit `json:"crashes"`
	// Schedule is the planned faults.
	Schedule chaos.Schedule `json:"schedule"`
	// Membership counts what the membership nemesis did, when it ran.
	Membership *chaos.MemberStats `json:"membership,omitempty"`
	// Setup is what the run ran against (also in results.json).
	Setup Setup `json:"setup"`
}

// RunRaftq starts a raftq cluster in a private network namespace (on
// lazyfs when asked), runs the workload while the nemesis follows the
// seeded schedule, heals, waits for the cluster to recover, reads every
// partition, checks the history and writes the report. The cluster is torn
// down before it returns, also on failure.
func RunRaftq(ctx context.Context, cfg RaftqConfig) (*RaftqOutcome, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := logging.Discard(cfg.Logger)
	cfg.LazyFS = cfg.lazyFS()
	if err := prerequisites(cfg.LazyFS); err != nil {
		return nil, err
	}
	if ns, mounts, err := chaos.CleanupStale(ctx, 0); err != nil {
		log.Warn("clean up after earlier runs", "err", err)
	} else if len(ns)+len(mounts) > 0 {
		log.Info("cleaned up after earlier runs", "namespaces", ns, "mounts", mounts)
	}
	out := &RaftqOutcome{Setup: cfg.setup()}
	if cfg.Script != nil {
		s, err := cfg.Script.Schedule(nodeIDs(cfg.Nodes))
		if err != nil {
			return nil, fmt.Errorf("schedule of script %s: %w", cfg.Script.Name, err)
		}
		out.Schedule = s
	} else if len(cfg.Schedule.Kinds) > 0 {
		s, err := cfg.Plan()
		if err != nil {
			return nil, err
		}
		out.Schedule = s
	}
	c, err := startRaftq(ctx, cfg, log)
	if err != nil {
		return out, err
	}
	runErr := runOnCluster(ctx, cfg, c, out, log)
	out.Crashes = c.Crashes()
	runErr = errors.Join(runErr, c.Close())
	if err := writeJSON(filepath.Join(cfg.Run.ReportDir, NemesisFile), out); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if !cfg.KeepData {
		for _, n := range c.Nodes() {
			os.RemoveAll(n.Dir)
		}
	}
	return out, runErr
}

// Plan draws the random schedule of the run: cfg.Schedule over the
// workload's duration and the nodes, the membership nemesis moving the
// test topic's partitions at its replication factor and never below
// min.insync.replicas in ISR mode.
func (c RaftqConfig) Plan() (chaos.Schedule, error) {
	sc := c.Schedule
	w := c.Run.Workload
	sc.Duration, sc.Nodes = w.Duration, nodeIDs(c.Nodes)
	sc.Membership.ReplicationFactor, sc.Membership.MinReplicas = int(w.ReplicationFactor), 1
	if topicSetting(w.TopicConfigs, "replication.mode", defaultMode) == "isr" {
		n, err := strconv.Atoi(topicSetting(w.TopicConfigs, "min.insync.replicas", defaultMinInsync))
		if err != nil {
			return chaos.Schedule{}, fmt.Errorf("min.insync.replicas %q: %w", w.TopicConfigs["min.insync.replicas"], ErrBadConfig)
		}
		sc.Membership.MinReplicas = n
	}
	s, err := chaos.Plan(sc)
	if err != nil {
		return chaos.Schedule{}, fmt.Errorf("plan faults: %w", err)
	}
	return s, nil
}

// lazyFS reports whether the data dirs go on lazyfs: when asked, or when
// a fault needs it.
func (c RaftqConfig) lazyFS() bool {
	if c.Script != nil && slices.Contains(c.Script.Kinds(), chaos.KindLoseUnfsynced) {
		return true
	}
	return c.LazyFS || slices.Contains(c.Schedule.Kinds, chaos.KindLoseUnfsynced)
}

// prerequisites says what is missing to run the cluster: ip and
// iptables always, FUSE for lazyfs.
func prerequisites(lazy bool) error {
	err := netns.Available()
	if lazy {
		err = errors.Join(err, lazyfs.Available())
	}
	if err != nil {
		return fmt.Errorf("jepsen: cannot run a raftq cluster here: %w", err)
	}
	return nil
}

func nodeIDs(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i + 1
	}
	return ids
}

// startRaftq makes the cluster and waits until every node is up and
// sees every broker alive.
func startRaftq(ctx context.Context, cfg RaftqConfig, log *slog.Logger) (*chaos.Cluster, error) {
	w := cfg.Run.Workload
	extra := slices.Clone(cfg.ServerArgs)
	if cfg.UnsafeAckBeforeCommit {
		extra = append(extra, "--unsafe-ack-before-commit")
	}
	cc := chaos.DefaultConfig()
	cc.Binary, cc.Nodes = cfg.Binary, cfg.Nodes
	cc.Dir = filepath.Join(cfg.Run.ReportDir, ClusterDir)
	cc.Args = chaos.ServerArgs("jepsen", cfg.Fsync, extra...)
	cc.Namespace, cc.GuardPeerPort, cc.LazyFS = true, true, cfg.LazyFS
	cc.LazyFSWritebackAge = cfg.Writeback
	cc.Ready = chaos.HTTPReady("/v1/status")
	cc.Leader = leaderFunc(w.Topic, w.Partitions)
	cc.Roles = rolesFunc(w.Topic, w.Partitions)
	cc.StartTimeout = cfg.ReadyTimeout
	cc.Logger = log.With("component", "chaos")
	c, err := chaos.New(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("jepsen: make cluster: %w", err)
	}
	err = c.StartAll(ctx)
	if err == nil {
		err = awaitHealthy(ctx, c, "", 0, cfg.ReadyTimeout)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("jepsen: start cluster: %w", err)
	}
	log.Info("cluster up", "nodes", cfg.Nodes, "dir", cc.Dir, "fsync", cfg.Fsync, "lazyfs", lazyFSModel(cfg.LazyFS, cfg.Writeback))
	return c, nil
}

// runOnCluster runs the test against c and records the outcome.
func runOnCluster(ctx context.Context, cfg RaftqConfig, c *chaos.Cluster, out *RaftqOutcome, log *slog.Logger) error {
	rc := cfg.Run
	rc.Logger = log
	w := &rc.Workload
	w.Brokers = nil
	for _, n := range c.Nodes() {
		w.Brokers = append(w.Brokers, n.KafkaAddr())
	}
	// kgo refreshes metadata at most every 5 s by default, which would
	// leave every client stuck on a killed leader for that long.
	w.ClientOpts = append(slices.Clone(w.ClientOpts), kgo.Dialer(c.DialContext), kgo.MetadataMinAge(metadataMinAge))
	flog := log.With("component", "nemesis")
	rc.Faults, rc.Schedule = c, out.Schedule
	if hasMembership(out.Schedule) {
		env, err := newMembersEnv(c, w.Topic)
		if err != nil {
			return err
		}
		defer env.Close()
		rc.Faults = env
	}
	rc.Setup = &out.Setup
	rc.OnFault = func(ev chaos.Event) {
		fe := faultEvent(ev)
		if fe.Err != "" {
			flog.Warn("nemesis step failed", "kind", fe.Kind, "phase", fe.Phase, "detail", fe.Detail, "err", fe.Err)
		} else {
			flog.Info("nemesis", "kind", fe.Kind, "phase", fe.Phase, "detail", fe.Detail, "took", fe.Took)
		}
		out.Faults = append(out.Faults, fe) // read only after Run returns
		if fe.Membership != nil {
			out.Membership = fe.Membership
		}
	}
	rc.Recover = func(ctx context.Context) error { return recoverCluster(ctx, c, cfg) }
	res, err := Run(ctx, rc)
	out.Results = res
	return err
}

func hasMembership(s chaos.Schedule) bool {
	return slices.ContainsFunc(s.Faults, func(f chaos.Fault) bool { return f.Kind == chaos.KindMembership })
}

// recoverCluster runs after the nemesis' final heal: it waits until
// every node sees all brokers alive and every partition of the topic has
// a leader.
func recoverCluster(ctx context.Context, c *chaos.Cluster, cfg RaftqConfig) error {
	w := cfg.Run.Workload
	return awaitHealthy(context.WithoutCancel(ctx), c, w.Topic, w.Partitions, cfg.ReadyTimeout)
}
