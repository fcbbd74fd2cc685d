package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/logging"
)

// Config describes one Jepsen run: the workload, the faults, the checks
// and where the report goes.
type Config struct {
	Workload WorkloadConfig
	Check    CheckConfig
	// ReportDir receives history.jsonl (streamed while the run goes),
	// results.json, the plots and index.html. It is created if missing.
	ReportDir string
	// Faults is what the nemesis acts on (a chaos.Cluster; a
	// chaos.MembershipEnv for membership faults); nil means a run
	// without faults. Run plays Schedule on it with a chaos.Executor
	// while the workload runs, its offsets counted from the history's
	// time 0, and heals it after.
	Faults   chaos.Env
	Schedule chaos.Schedule
	// OnFault, if set, is told of every fault step when it is done, the
	// final heal included, on the goroutine that performed it.
	OnFault func(chaos.Event)
	// Recover, if set, runs after the final heal and before the final
	// reads, e.g. to wait until every partition has a leader again.
	Recover func(ctx context.Context) error
	// Setup, if set, is written into results.json with the verdicts.
	Setup  *Setup
	Logger *slog.Logger
}

// DefaultConfig returns a run with the default workload and checks and no
// faults; callers set brokers, the nemesis and the report directory.
func DefaultConfig() Config {
	return Config{Workload: DefaultWorkloadConfig(), Check: DefaultCheckConfig(), ReportDir: "jepsen-report"}
}

// Validate reports a bad setting.
func (c Config) Validate() error {
	if err := c.Workload.Validate(); err != nil {
		return err
	}
	if err := c.Check.Validate(); err != nil {
		return err
	}
	if c.ReportDir == "" {
		return fmt.Errorf("no report directory: %w", ErrBadConfig)
	}
	if len(c.Schedule.Faults) > 0 && c.Faults == nil {
		return fmt.Errorf("a schedule without a nemesis: %w", ErrBadConfig)
	}
	if _, ok := c.Faults.(chaos.MembershipEnv); !ok && slices.ContainsFunc(c.Schedule.Faults, func(f chaos.Fault) bool { return f.Kind == chaos.KindMembership }) {
		return fmt.Errorf("membership faults on a nemesis without an admin API: %w", ErrBadConfig)
	}
	if _, ok := c.Faults.(chaos.CorruptEnv); !ok && slices.ContainsFunc(c.Schedule.Faults, func(f chaos.Fault) bool { return f.Kind == chaos.KindCorrupt }) {
		return fmt.Errorf("corrupt faults on a nemesis without data directories: %w", ErrBadConfig)
	}
	if err := c.Schedule.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return nil
}

// Run performs a whole test: set up the topic, run the workload while the
// nemesis follows the schedule, heal every fault, recover, read every
// partition in full, check the history and write the report. The returned
// results are nil only when the run could not produce a history to check;
// an error after checking (a failed heal, a report that could not be
// written) comes with the results.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := logging.Discard(cfg.Logger)
	if cfg.Workload.Logger == nil {
		cfg.Workload.Logger = log
	}
	if err := os.MkdirAll(cfg.ReportDir, 0o755); err != nil {
		return nil, fmt.Errorf("report dir %s: %w", cfg.ReportDir, err)
	}
	hpath := filepath.Join(cfg.ReportDir, HistoryFile)
	hf, err := os.Create(hpath)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", hpath, err)
	}
	defer hf.Close()
	rec := NewRecorder(hf)
	runErr := execute(ctx, cfg, rec, log)
	if err := rec.Flush(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if err := hf.Sync(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("sync %s: %w", hpath, err))
	}
	h := rec.History()
	if len(h) == 0 {
		return nil, errors.Join(runErr, errors.New("jepsen: the run recorded nothing"))
	}
	res, err := Check(h, cfg.Check)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	res.Setup = cfg.Setup
	if err := writeReport(cfg.ReportDir, h, res); err != nil {
		runErr = errors.Join(runErr, err)
	}
	log.Info("jepsen run checked", "verdict", res.Verdict, "summary", res.Summary(), "report", cfg.ReportDir)
	return res, runErr
}

// execute runs the phases that produce the history.
func execute(ctx context.Context, cfg Config, rec *Recorder, log *slog.Logger) error {
	w, err := NewWorkload(cfg.Workload, rec)
	if err != nil {
		return err
	}
	if err := w.Setup(ctx); err != nil {
		return err
	}
	var nem *chaos.Executor
	if cfg.Faults != nil {
		nem = chaos.NewExecutor(cfg.Faults, cfg.Schedule, rec.Began(), nemesisObserver(rec, cfg.OnFault))
	}
	nctx, stopNemesis := context.WithCancel(ctx)
	nemDone := make(chan struct{})
	go func() {
		defer close(nemDone)
		if nem != nil {
			nem.Play(nctx)
		}
	}()
	log.Info("workload started", "duration", cfg.Workload.Duration)
	werr := w.Run(ctx)
	stopNemesis()
	<-nemDone
	var errs []error
	if werr != nil {
		errs = append(errs, fmt.Errorf("workload: %w", werr))
	}
	if nem != nil { // after Play has returned; heals even when ctx is done
		if err := nem.Heal(ctx); err != nil {
			errs = append(errs, fmt.Errorf("heal: %w", err))
		}
	}
	if cfg.Recover != nil {
		if err := cfg.Recover(ctx); err != nil {
			errs = append(errs, fmt.Errorf("recover: %w", err))
		}
	}
	start := time.Now()
	w.FinalReads(ctx)
	log.Info("final reads done", "took", time.Since(start))
	return errors.Join(errs...)
}
