package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/jepsen"
)

// The quick matrix: the rows and columns that show the trade-off in
// about ten minutes on two cores (12 cells of about 55 s), and a cost
// phase of short loads (about 20 s a mode).
var (
	quickModes      = []string{"r-a", "r-n", "i1-n"}
	quickNemeses    = []string{"k1", "p1", "lrs", "unc"}
	quickCostTime   = 3 * time.Second
	quickCostWarmup = time.Second
)

// matrixFlags binds `raftq jepsen matrix`'s flags.
type matrixFlags struct {
	base     jepsen.RaftqConfig
	modes    []string
	nemeses  []string
	seeds    []uint
	dir      string
	quick    bool
	logLevel string
	// cost runs the cost phase, with costCfg's loads.
	cost    bool
	costCfg jepsen.CostConfig
}

func bindMatrixFlags(fs *pflag.FlagSet) *matrixFlags {
	f := &matrixFlags{base: jepsen.DefaultRaftqConfig(), costCfg: jepsen.DefaultCostConfig()}
	c, w := &f.base, &f.base.Run.Workload
	var modes, nemeses []string
	for _, m := range jepsen.MatrixModes {
		modes = append(modes, m.Name)
	}
	for _, n := range jepsen.MatrixNemeses {
		nemeses = append(nemeses, n.Name)
	}
	fs.StringSliceVar(&f.modes, "modes", modes, "rows: replication modes (see jepsen/matrix.go)")
	fs.StringSliceVar(&f.nemeses, "nemeses", nemeses, "columns: faults")
	fs.UintSliceVar(&f.seeds, "seeds", []uint{1}, "seeds: one run of every cell per seed")
	fs.DurationVar(&w.Duration, "time", 30*time.Second, "length of each cell's run; a scripted cell runs until its script ends plus 5s at least (40s)")
	fs.BoolVar(&f.quick, "quick", false, "the quick matrix ("+fmt.Sprint(quickModes)+" × "+fmt.Sprint(quickNemeses)+"), unless --modes or --nemeses say otherwise")
	fs.StringVar(&f.dir, "dir", "jepsen-matrix", "directory of the cells' reports and the table; cells already in it are not run again")
	fs.Float64Var(&w.Rate, "rate", 500, "operations per second of each cell, all processes together")
	fs.DurationVar(&c.Schedule.Interval, "nemesis-interval", 8*time.Second, "mean time between random faults, and mean fault length")
	fs.DurationVar(&c.Writeback, "lazyfs-writeback", 0, "power-loss model: 0 is the worst case; an age such as 30s keeps files dirty for longer (Linux)")
	fs.StringVar(&c.Binary, "binary", "", "raftq executable the nodes run (default: this executable)")
	fs.StringArrayVar(&c.ServerArgs, "server-arg", []string{"--tick-interval=50ms"}, "extra raftq server flag for every node of every cell (repeatable)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "harness log level on stderr: debug, info, warn or error")
	bindCostFlags(fs, f)
	return f
}

func bindCostFlags(fs *pflag.FlagSet, f *matrixFlags) {
	cc := &f.costCfg
	fs.BoolVar(&f.cost, "cost", true, fmt.Sprintf("after the cells, measure each mode with raftq bench on a fresh %d-node cluster: "+
		"records/s at 100 B and 1 KiB, and latency at --cost-rate (modes measured before are not run again)", cc.Nodes))
	fs.DurationVar(&cc.Duration, "cost-time", cc.Duration, fmt.Sprintf("length of each cost load, after its warm-up (--quick: %s)", quickCostTime))
	fs.DurationVar(&cc.Warmup, "cost-warmup", cc.Warmup, fmt.Sprintf("uncounted warm-up of each cost load (--quick: %s)", quickCostWarmup))
	fs.Float64Var(&cc.Rate, "cost-rate", cc.Rate, "records/s of 100 B offered for the latency; every mode must sustain it")
	fs.IntVar(&cc.Producers, "cost-producers", cc.Producers, "producers of the full-speed cost loads")
}

// config makes the matrix run from the flags; the cost phase's bench
// notes go to e.
func (f *matrixFlags) config(fs *pflag.FlagSet, e *env, logger *slog.Logger) (jepsen.MatrixConfig, error) {
	modes, nemeses := f.modes, f.nemeses
	if f.quick {
		if !fs.Changed("modes") {
			modes = quickModes
		}
		if !fs.Changed("nemeses") {
			nemeses = quickNemeses
		}
	}
	ms, err := jepsen.FindModes(modes)
	if err != nil {
		return jepsen.MatrixConfig{}, usageError{err}
	}
	ns, err := jepsen.FindNemeses(nemeses)
	if err != nil {
		return jepsen.MatrixConfig{}, usageError{err}
	}
	if len(f.seeds) == 0 {
		return jepsen.MatrixConfig{}, usageError{fmt.Errorf("--seeds: want at least one")}
	}
	if len(ns) == 0 && !f.cost {
		return jepsen.MatrixConfig{}, usageError{fmt.Errorf("no --nemeses and --cost=false: nothing to run")}
	}
	base := f.base
	if base.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return jepsen.MatrixConfig{}, fmt.Errorf("find this executable (set --binary): %w", err)
		}
		base.Binary = exe
	}
	base.Logger = logger
	cfg := jepsen.MatrixConfig{Base: base, Modes: ms, Nemeses: ns, Dir: f.dir}
	for _, s := range f.seeds {
		cfg.Seeds = append(cfg.Seeds, uint64(s))
	}
	for _, m := range ms { // every cell must be runnable before the first starts
		for _, n := range ns {
			if _, err := jepsen.CellConfig(base, m, n, cfg.Seeds[0], filepath.Join(f.dir, "probe")); err != nil {
				return cfg, usageError{fmt.Errorf("cell %s/%s: %w", m.Name, n.Name, err)}
			}
		}
	}
	if f.cost {
		cc, err := f.costConfig(fs, e, base, ms)
		if err != nil {
			return cfg, err
		}
		cfg.Cost = cc
	}
	return cfg, nil
}

// costConfig is the cost phase from the flags: --quick shortens the
// loads unless their flags say otherwise.
func (f *matrixFlags) costConfig(fs *pflag.FlagSet, e *env, base jepsen.RaftqConfig, ms []jepsen.Mode) (jepsen.CostConfig, error) {
	cc := f.costCfg
	if f.quick && !fs.Changed("cost-time") {
		cc.Duration = quickCostTime
	}
	if f.quick && !fs.Changed("cost-warmup") {
		cc.Warmup = quickCostWarmup
	}
	if err := cc.Validate(); err != nil {
		return cc, usageError{err}
	}
	for _, m := range ms {
		if _, err := jepsen.CostClusterConfig(base, m, cc.Nodes, filepath.Join(f.dir, "probe")); err != nil {
			return cc, usageError{fmt.Errorf("cost of %s: %w", m.Name, err)}
		}
	}
	cc.Bench = costBench(e)
	return cc, nil
}

// runJepsenMatrix is `raftq jepsen matrix`: every mode × nemesis cell on a
// fresh cluster, then every mode's cost, into one report.
func runJepsenMatrix(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "jepsen matrix", "")
	f := bindMatrixFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	level, err := parseLevel(f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := f.config(fs, e, slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})))
	if err != nil {
		return err
	}
	cfg.Progress = func(p jepsen.MatrixProgress) { fmt.Fprintln(e.stdout, p) }
	cfg.CellDone = func(c jepsen.MatrixCell) { fmt.Fprintf(e.stdout, "  %s\n", c) }
	cfg.CostDone = func(r jepsen.CostRow) { fmt.Fprintf(e.stdout, "  %s\n", r) }
	res, err := jepsen.RunMatrix(ctx, cfg)
	if err != nil {
		return err
	}
	if err := errors.Join(jepsen.WriteMatrixTable(e.stdout, cfg.Modes, cfg.Nemeses, res.Cells), jepsen.WriteCostTable(e.stdout, res.Cost)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "table: %s\nreport: %s\n", filepath.Join(cfg.Dir, jepsen.MatrixTable), filepath.Join(cfg.Dir, jepsen.MatrixIndex))
	return nil
}
