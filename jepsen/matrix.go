package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/raftq/raftq/chaos"
)

// The replication-mode matrix (issue 21): every mode × nemesis cell run
// on a fresh cluster, resumably, into one table beside the outcome
// ISR-NOTES §4.3 expects, with matrix.html and its plots; then each
// mode's cost from raftq bench (matrix_cost.go).

// Mode is a row of the matrix: how the test topic replicates and syncs.
type Mode struct {
	Name string `json:"name"`
	// Doc says what the mode is, for the table's legend.
	Doc   string `json:"doc"`
	Fsync string `json:"fsync"`
	// TopicConfigs and ServerArgs are added to the cell's.
	TopicConfigs map[string]string `json:"topic_configs,omitempty"`
	ServerArgs   []string          `json:"server_args,omitempty"`
	// ReplicationFactor, when set, replaces the default of 3.
	ReplicationFactor int16 `json:"replication_factor,omitempty"`
}

// isrLag is the replica lag time the ISR modes run with, below Kafka's
// 30 s so that shrinks happen inside the faults (ISR-NOTES §4.1).
const isrLag = "--replica-lag-time-max=10s"

func isrMode(name, doc string, kv ...string) Mode {
	m := Mode{Name: name, Doc: doc, Fsync: FsyncAlways, ServerArgs: []string{isrLag},
		TopicConfigs: map[string]string{"replication.mode": "isr"}}
	for i := 0; i+1 < len(kv); i += 2 {
		m.TopicConfigs[kv[i]] = kv[i+1]
	}
	return m
}

// MatrixModes are the rows of ISR-NOTES §4.1, by name. ISR modes keep the
// nodes' --fsync always, which in isr mode governs only group 0 (and
// raft WALs); their logs follow flush.messages.
var MatrixModes = []Mode{
	{Name: "r-a", Doc: "raft, fsync always", Fsync: FsyncAlways},
	{Name: "r-n", Doc: "raft, fsync never", Fsync: FsyncNever},
	isrMode("i1-n", "isr, min.insync.replicas=1, no flush (Kafka's defaults)", "min.insync.replicas", "1"),
	isrMode("i1-a", "isr, min.insync.replicas=1, flush.messages=1", "min.insync.replicas", "1", "flush.messages", "1"),
	isrMode("i2-n", "isr, min.insync.replicas=2, no flush (Kafka's recommended config)", "min.insync.replicas", "2"),
	isrMode("i2-a", "isr, min.insync.replicas=2, flush.messages=1", "min.insync.replicas", "2", "flush.messages", "1"),
	func() Mode {
		m := isrMode("i2e-n", "isr, min.insync.replicas=2, eligible leader replicas", "min.insync.replicas", "2")
		m.ServerArgs = append(m.ServerArgs, elrFlag)
		return m
	}(),
	isrMode("iu-n", "isr, min.insync.replicas=1, unclean leader election", "min.insync.replicas", "1", "unclean.leader.election.enable", "true"),
	isrMode("iu-a", "isr, min.insync.replicas=1, unclean leader election, flush.messages=1", "min.insync.replicas", "1",
		"unclean.leader.election.enable", "true", "flush.messages", "1"),
	func() Mode {
		m := isrMode("i1-n-rf2", "isr RF 2, min.insync.replicas=1, no flush (f+1 against raft RF 3)", "min.insync.replicas", "1")
		m.ReplicationFactor = 2
		return m
	}(),
}

// Nemesis is a column of the matrix: the faults of a cell.
type Nemesis struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
	// Nodes is the cluster size the cell runs on.
	Nodes int `json:"nodes"`
	// Kinds, Targets, PowerTargets and Shapes make a random schedule;
	// Script names a shipped script instead.
	Kinds        []chaos.Kind   `json:"kinds,omitempty"`
	Targets      []chaos.Target `json:"targets,omitempty"`
	PowerTargets []chaos.Target `json:"power_targets,omitempty"`
	Shapes       []chaos.Shape  `json:"shapes,omitempty"`
	Script       string         `json:"script,omitempty"`
}

func kills(name, doc string, nodes int, t ...chaos.Target) Nemesis {
	return Nemesis{Name: name, Doc: doc, Nodes: nodes, Kinds: []chaos.Kind{chaos.KindKill}, Targets: t}
}

// MatrixNemeses are the columns of ISR-NOTES §4.2, by name.
var MatrixNemeses = []Nemesis{
	kills("k1", "kill -9 one node (sometimes a partition leader)", 3, chaos.TargetOne, chaos.TargetLeader),
	kills("kmin", "kill -9 a minority (2 of 5)", 5, chaos.TargetMinority),
	kills("kmaj", "kill -9 a majority", 3, chaos.TargetMajority),
	kills("kall", "kill -9 every node", 3, chaos.TargetAll),
	{Name: "pall", Doc: "power loss of every node", Nodes: 3, Kinds: []chaos.Kind{chaos.KindLoseUnfsynced}, PowerTargets: []chaos.Target{chaos.TargetAll}},
	{Name: "p1", Doc: "power loss of a partition leader", Nodes: 3, Kinds: []chaos.Kind{chaos.KindLoseUnfsynced}, PowerTargets: []chaos.Target{chaos.TargetLeader}},
	{Name: "il", Doc: "isolate a partition leader", Nodes: 3, Kinds: []chaos.Kind{chaos.KindPartition}, Shapes: []chaos.Shape{chaos.ShapeIsolateLeader}},
	{Name: "pz", Doc: "pause a partition leader or one node", Nodes: 3, Kinds: []chaos.Kind{chaos.KindPause}, Targets: []chaos.Target{chaos.TargetLeader, chaos.TargetOne}},
	{Name: "lrs", Doc: "last replica standing (script)", Nodes: 5, Script: "last-replica-standing"},
	{Name: "unc", Doc: "unclean election (script)", Nodes: 5, Script: "unclean-election"},
}

// MatrixExpected is ISR-NOTES §4.3's expected outcome of each cell (ok:
// no loss; U: acks=all unavailable during the fault; W: writable where
// r-a is not; L: acknowledged writes lost; L?: loss needs a coincidence).
// The notes' footnotes explain each.
var MatrixExpected = map[string]map[string]string{
	"r-a":      {"k1": "ok", "kmin": "U", "kmaj": "U", "kall": "U", "pall": "U, ok", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "ok", "unc": "n/a"},
	"r-n":      {"k1": "ok", "kmin": "U", "kmaj": "U", "kall": "U", "pall": "L", "p1": "L?", "il": "ok", "pz": "ok", "lrs": "ok", "unc": "n/a"},
	"i1-n":     {"k1": "ok", "kmin": "W", "kmaj": "U", "kall": "U", "pall": "L", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "L", "unc": "U, ok"},
	"i1-a":     {"k1": "ok", "kmin": "W", "kmaj": "U", "kall": "U", "pall": "ok", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "ok", "unc": "U, ok"},
	"i2-n":     {"k1": "ok", "kmin": "U", "kmaj": "U", "kall": "U", "pall": "L", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "L, U", "unc": "U, ok"},
	"i2-a":     {"k1": "ok", "kmin": "U", "kmaj": "U", "kall": "U", "pall": "ok", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "ok, U", "unc": "U, ok"},
	"i2e-n":    {"k1": "ok", "kmin": "U", "kmaj": "U", "kall": "U", "pall": "L", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "ok, U", "unc": "U, ok"},
	"iu-n":     {"k1": "ok", "kmin": "W", "kmaj": "U", "kall": "L?", "pall": "L", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "L", "unc": "L"},
	"iu-a":     {"k1": "ok", "kmin": "W", "kmaj": "U", "kall": "L?", "pall": "L?", "p1": "ok", "il": "ok", "pz": "ok", "lrs": "L", "unc": "L"},
	"i1-n-rf2": {},
}

// MatrixConfig describes a matrix run.
type MatrixConfig struct {
	// Base is every cell's run; each cell sets its nodes, fsync, topic
	// configs, server args, faults, seed and report directory.
	Base RaftqConfig
	// Modes and Nemeses are the rows and columns, Seeds the runs of each
	// cell.
	Modes   []Mode
	Nemeses []Nemesis
	Seeds   []uint64
	// Dir holds one report directory per cell run
	// (<mode>/<nemesis>/seed-<n>) and the table (matrix.md, matrix.json,
	// matrix.html and its plots).
	// A cell run whose results.json is there already is not run again.
	Dir string
	// Progress, if set, is told before each cell run: which of how many,
	// the time so far and an estimate of the time left.
	Progress func(p MatrixProgress)
	// CellDone, if set, is told of each cell run when it is done (not of
	// those skipped).
	CellDone func(c MatrixCell)
	// Run runs one cell (RunRaftq when nil; tests put a fake here).
	Run func(ctx context.Context, cfg RaftqConfig) (*RaftqOutcome, error)
	// Cost is the cost phase after the cells: one row per mode in
	// <Dir>/cost/<mode>.json, measured once; none when Cost.Bench is nil.
	Cost CostConfig
	// CostDone, if set, is told of each mode's cost row when it is
	// measured (not of those skipped).
	CostDone func(r CostRow)
}

// MatrixResult is a matrix run's outcome: every cell run and every
// mode's cost row, those of earlier runs included.
type MatrixResult struct {
	Cells []MatrixCell
	Cost  []CostRow
}

// MatrixProgress is where a matrix run is.
type MatrixProgress struct {
	// Cost is set in the cost phase, where Cell and Cells count modes
	// and Name is the mode's.
	Cost        bool
	Cell, Cells int
	Name        string // "r-a/k1/seed-1"
	Skipped     bool   // done by an earlier run
	Elapsed     time.Duration
	Left        time.Duration // estimate from the phase's runs so far; 0 before the first
}

// String is the progress line: "cell 3/20 r-a/k1/seed-1, 2m10s elapsed,
// about 12m left", or in the cost phase "cost 2/10 r-n, ...".
func (p MatrixProgress) String() string {
	kind := "cell"
	if p.Cost {
		kind = "cost"
	}
	s := fmt.Sprintf("%s %d/%d %s", kind, p.Cell, p.Cells, p.Name)
	if p.Skipped {
		return s + ": done before, skipped"
	}
	s += fmt.Sprintf(", %s elapsed", p.Elapsed.Round(time.Second))
	if p.Left > 0 {
		s += fmt.Sprintf(", about %s left", p.Left.Round(time.Second))
	}
	return s
}

// MatrixCell is one cell run's outcome.
type MatrixCell struct {
	Mode     string    `json:"mode"`
	Nemesis  string    `json:"nemesis"`
	Seed     uint64    `json:"seed"`
	Dir      string    `json:"dir"`
	Verdict  Verdict   `json:"verdict"`
	Measures *Measures `json:"measures,omitempty"`
	Setup    *Setup    `json:"setup,omitempty"`
	Expected string    `json:"expected,omitempty"`
	// Crashes counts node exits the harness did not cause.
	Crashes int    `json:"crashes,omitempty"`
	Err     string `json:"error,omitempty"`
}

// Matrix files in MatrixConfig.Dir (matrix.json holds the cells,
// cost.json the cost rows), and MatrixCellFile in each cell's report
// directory (the cell's outcome, its run error included, for a resumed
// matrix).
const (
	MatrixTable    = "matrix.md"
	MatrixJSON     = "matrix.json"
	MatrixCostJSON = "cost.json"
	MatrixCellFile = "cell.json"
)

// FindModes and FindNemeses look names up in MatrixModes and
// MatrixNemeses.
func FindModes(names []string) ([]Mode, error) {
	return find(MatrixModes, names, func(m Mode) string { return m.Name })
}

// FindNemeses looks names up in MatrixNemeses.
func FindNemeses(names []string) ([]Nemesis, error) {
	return find(MatrixNemeses, names, func(n Nemesis) string { return n.Name })
}

func find[T any](all []T, names []string, name func(T) string) ([]T, error) {
	var out []T
	for _, n := range names {
		i := slices.IndexFunc(all, func(x T) bool { return name(x) == n })
		if i < 0 {
			var known []string
			for _, x := range all {
				known = append(known, name(x))
			}
			return nil, fmt.Errorf("%q is not one of %s: %w", n, strings.Join(known, ", "), ErrBadConfig)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// scriptTail is how long a scripted cell runs past its script's last
// step at least: the workload's time to see the healed cluster.
const scriptTail = 5 * time.Second

// CellConfig is the run of one cell: base with the mode's and the
// nemesis' settings, the seed, and its report directory. A scripted cell
// runs for at least its script's length plus scriptTail.
func CellConfig(base RaftqConfig, m Mode, n Nemesis, seed uint64, dir string) (RaftqConfig, error) {
	c := base
	c.Nodes, c.Fsync = n.Nodes, m.Fsync
	c.ServerArgs = append(slices.Clone(base.ServerArgs), m.ServerArgs...)
	c.Run.ReportDir = dir
	w := &c.Run.Workload
	w.TopicConfigs = map[string]string{}
	for k, v := range base.Run.Workload.TopicConfigs {
		w.TopicConfigs[k] = v
	}
	for k, v := range m.TopicConfigs {
		w.TopicConfigs[k] = v
	}
	w.ReplicationFactor = int16(min(3, c.Nodes))
	if m.ReplicationFactor > 0 {
		w.ReplicationFactor = m.ReplicationFactor
	}
	w.Seed = seed
	c.Schedule.Seed = seed
	c.Script = nil
	if n.Script != "" {
		s, err := LoadScript(n.Script)
		if err != nil {
			return c, err
		}
		c.Script, c.Schedule.Kinds = &s, nil
		w.Duration = max(w.Duration, s.End()+scriptTail)
	} else {
		c.Schedule.Kinds = slices.Clone(n.Kinds)
		if len(n.Targets) > 0 {
			c.Schedule.Targets = slices.Clone(n.Targets)
		}
		if len(n.PowerTargets) > 0 {
			c.Schedule.PowerTargets = slices.Clone(n.PowerTargets)
		}
		if len(n.Shapes) > 0 {
			c.Schedule.Shapes = slices.Clone(n.Shapes)
		}
	}
	return c, c.Validate()
}

// RunMatrix runs every mode × nemesis × seed cell not already in
// cfg.Dir, each on a fresh cluster, then the cost phase of every mode
// not already measured, and writes matrix.md, matrix.json, cost.json and
// matrix.html over every cell and row, those of earlier runs included. A
// cell or mode that fails to run is recorded with its error and does not
// stop the matrix; canceling ctx does.
func RunMatrix(ctx context.Context, cfg MatrixConfig) (MatrixResult, error) {
	if err := cfg.validate(); err != nil {
		return MatrixResult{}, err
	}
	began := time.Now()
	var res MatrixResult
	var err error
	if res.Cells, err = runCells(ctx, cfg, began); err != nil {
		return res, err
	}
	if res.Cost, err = runCosts(ctx, cfg, began); err != nil {
		return res, err
	}
	return res, writeMatrix(cfg.Dir, cfg.Modes, cfg.Nemeses, res)
}

// validate reports a matrix with nothing to run.
func (cfg MatrixConfig) validate() error {
	switch {
	case cfg.Dir == "" || len(cfg.Modes) == 0:
		return fmt.Errorf("matrix needs a directory and modes: %w", ErrBadConfig)
	case len(cfg.Nemeses) > 0 && len(cfg.Seeds) == 0:
		return fmt.Errorf("matrix needs seeds for its nemeses: %w", ErrBadConfig)
	case len(cfg.Nemeses) == 0 && cfg.Cost.Bench == nil:
		return fmt.Errorf("matrix needs nemeses or a cost phase: %w", ErrBadConfig)
	case cfg.Cost.Bench != nil:
		return cfg.Cost.Validate()
	}
	return nil
}

// runCells runs every cell not already in cfg.Dir and returns them all.
func runCells(ctx context.Context, cfg MatrixConfig, began time.Time) ([]MatrixCell, error) {
	run := cfg.Run
	if run == nil {
		run = RunRaftq
	}
	total := len(cfg.Modes) * len(cfg.Nemeses) * len(cfg.Seeds)
	var cells []MatrixCell
	var est estimate
	for _, m := range cfg.Modes {
		for _, n := range cfg.Nemeses {
			for _, seed := range cfg.Seeds {
				if err := ctx.Err(); err != nil {
					return cells, err
				}
				name := fmt.Sprintf("%s/%s/seed-%d", m.Name, n.Name, seed)
				cell := MatrixCell{Mode: m.Name, Nemesis: n.Name, Seed: seed, Dir: name, Expected: MatrixExpected[m.Name][n.Name]}
				dir := filepath.Join(cfg.Dir, name)
				p := MatrixProgress{Cell: len(cells) + 1, Cells: total, Name: name, Elapsed: time.Since(began)}
				if res, err := readResults(dir); err == nil {
					cell.fill(res)
					cell.Crashes, cell.Err = readCellNotes(dir)
					p.Skipped = true
					report(cfg.Progress, p)
					cells = append(cells, cell)
					continue
				}
				p.Left = est.left(total - len(cells))
				report(cfg.Progress, p)
				start := time.Now()
				cell.run(ctx, run, cfg.Base, m, n, seed, dir)
				if err := writeJSON(filepath.Join(dir, MatrixCellFile), cell); err != nil && cell.Err == "" {
					cell.Err = err.Error()
				}
				if cfg.CellDone != nil {
					cfg.CellDone(cell)
				}
				est.add(time.Since(start))
				cells = append(cells, cell)
			}
		}
	}
	return cells, nil
}

func report(f func(MatrixProgress), p MatrixProgress) {
	if f != nil {
		f(p)
	}
}

func (c *MatrixCell) run(ctx context.Context, run func(context.Context, RaftqConfig) (*RaftqOutcome, error), base RaftqConfig, m Mode, n Nemesis, seed uint64, dir string) {
	rc, err := CellConfig(base, m, n, seed, dir)
	if err != nil {
		c.Err = err.Error()
		return
	}
	out, err := run(ctx, rc)
	if err != nil {
		c.Err = err.Error()
	}
	if out != nil {
		c.Crashes = len(out.Crashes)
		if out.Results != nil {
			c.fill(out.Results)
		}
	}
}

// readCellNotes reads what results.json lacks from a cell run's
// cell.json: its node crashes and run error.
func readCellNotes(dir string) (crashes int, runErr string) {
	b, err := os.ReadFile(filepath.Join(dir, MatrixCellFile))
	if err != nil {
		return 0, ""
	}
	var c MatrixCell
	if json.Unmarshal(b, &c) != nil {
		return 0, ""
	}
	return c.Crashes, c.Err
}

func (c *MatrixCell) fill(r *Results) {
	c.Verdict, c.Measures, c.Setup = r.Verdict, &r.Measures, r.Setup
}

// readResults reads a cell's results.json.
func readResults(dir string) (*Results, error) {
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ResultsFile), err)
	}
	return &r, nil
}

// Measured classifies a cell's outcome the way MatrixExpected does: L
// when an acknowledged write was lost, else U when a fault stopped
// acks=all writes for most of its length (unavailable), else ok; "error"
// when the run produced no results.
func (c MatrixCell) Measured() string {
	switch {
	case c.Measures == nil:
		return "error"
	case c.Measures.Loss > 0:
		return "L"
	case c.unavailable():
		return "U"
	}
	return "ok"
}

// stallFloor is the shortest failover that counts as unavailability
// rather than a failover blip: longer than an election and a client's
// request timeout (5 s in jepsen) together.
const stallFloor = 5 * time.Second

// unavailable reports whether some fault, overlapped or not, kept a
// partition from taking an ok send for at least half the fault's window
// and at least stallFloor, or until the end. It is judged by time, not by
// the share of ok sends: a send to a stopped partition blocks its worker
// for the op timeout while a healthy one takes milliseconds, so counted
// sends under-weight an outage by orders of magnitude.
func (c MatrixCell) unavailable() bool {
	for _, f := range c.Measures.Faults {
		if f.FailoverNs < 0 {
			return true
		}
		if d := time.Duration(f.FailoverNs); d >= stallFloor && 2*f.FailoverNs >= f.EndNs-f.StartNs {
			return true
		}
	}
	return false
}

// longestFailover is the longest failover of the cell's faults,
// overlapped ones included, or "never recovered".
func (c MatrixCell) longestFailover() string {
	var longest time.Duration
	for _, f := range c.Measures.Faults {
		if f.FailoverNs < 0 {
			return "never recovered"
		}
		longest = max(longest, time.Duration(f.FailoverNs))
	}
	return longest.Round(10 * time.Millisecond).String()
}

// Disagrees lists how a measured cell contradicts its expected outcome:
// on loss (LossDisagrees) and on availability (AvailabilityDisagrees),
// one line each; empty when they agree or nothing was expected.
func (c MatrixCell) Disagrees() string {
	var out []string
	for _, d := range []string{c.LossDisagrees(), c.AvailabilityDisagrees()} {
		if d != "" {
			out = append(out, d)
		}
	}
	return strings.Join(out, "; ")
}

// AvailabilityDisagrees says how a cell's availability contradicts its
// expected outcome: U expected (acks=all unavailable for the fault) and
// no fault stopped writes for most of its length (unavailable), or none
// expected (ok, W) and one did. Cells that lost writes, or expect them
// (L may come with either), are judged on loss only.
func (c MatrixCell) AvailabilityDisagrees() string {
	exp, got := c.Expected, c.Measured()
	if exp == "" || exp == "n/a" || got == "error" || got == "L" || strings.Contains(exp, "L") {
		return ""
	}
	longest := c.longestFailover()
	switch wantU := strings.Contains(exp, "U"); {
	case wantU && got != "U":
		return fmt.Sprintf("%s/%s seed %d: expected %s, but no fault stopped writes for most of its length (longest failover %s)",
			c.Mode, c.Nemesis, c.Seed, exp, longest)
	case !wantU && got == "U":
		return fmt.Sprintf("%s/%s seed %d: expected %s, but a fault stopped writes for most of its length (longest failover %s)",
			c.Mode, c.Nemesis, c.Seed, exp, longest)
	}
	return ""
}

// LossDisagrees says how a measured cell contradicts its expected outcome
// on loss, the claim the matrix exists to check: a loss where none was
// expected, or none where one was (L; L? needs a coincidence and is not
// a disagreement either way). Empty when they agree or nothing was
// expected.
func (c MatrixCell) LossDisagrees() string {
	exp, got := c.Expected, c.Measured()
	if exp == "" || exp == "n/a" || got == "error" || strings.Contains(exp, "L?") {
		return ""
	}
	wantLoss := strings.Contains(exp, "L")
	switch {
	case wantLoss && got != "L":
		return fmt.Sprintf("%s/%s seed %d: expected %s, measured no loss", c.Mode, c.Nemesis, c.Seed, exp)
	case !wantLoss && got == "L":
		return fmt.Sprintf("%s/%s seed %d: expected %s, measured a loss of %.0f per million acknowledged", c.Mode, c.Nemesis, c.Seed, exp, c.Measures.LossPerMillion)
	}
	return ""
}

// String is the cell's name and its table text.
func (c MatrixCell) String() string {
	s := fmt.Sprintf("%s/%s/seed-%d: %s", c.Mode, c.Nemesis, c.Seed, c.cellText())
	if c.Err != "" {
		s += "; " + firstLine(c.Err)
	}
	return s
}

// cellText is a table cell: verdict, loss per million, availability
// during faults, failover p50, and the expected outcome.
func (c MatrixCell) cellText() string {
	if c.Measures == nil {
		return fmt.Sprintf("error (exp. %s)", orDash(c.Expected))
	}
	m := c.Measures
	fo, _ := m.IsolatedFailovers()
	var over []int64
	for _, f := range m.Faults {
		if f.Overlapped && f.FailoverNs >= 0 {
			over = append(over, f.FailoverNs)
		}
	}
	r := func(ns int64) string { return time.Duration(ns).Round(10 * time.Millisecond).String() }
	failover := "-"
	if len(fo) > 0 {
		failover = r(percentile(fo, 50))
		if len(fo) > 1 {
			failover += " max " + r(slices.Max(fo))
		}
	}
	if len(over) > 0 {
		failover += " (overlapped faults: max " + r(slices.Max(over)) + ")"
	}
	avail := fmt.Sprintf("%.2f", m.AvailabilityFaults.Value)
	if w := m.WorstPartitionFaults; w.Partition != "" {
		avail += fmt.Sprintf(", worst partition %.2f", w.Value)
	}
	crashes := ""
	if c.Crashes > 0 {
		crashes = fmt.Sprintf(" · %d node crashes", c.Crashes)
	}
	return fmt.Sprintf("%s %s · loss/M %.0f · avail %s · failover %s%s (exp. %s)",
		c.Verdict, c.Measured(), m.LossPerMillion, avail, failover, crashes, orDash(c.Expected))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeMatrix writes the table, the cells, the cost rows, the plots and
// matrix.html.
func writeMatrix(dir string, modes []Mode, nemeses []Nemesis, res MatrixResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("matrix dir %s: %w", dir, err)
	}
	err := writeJSON(filepath.Join(dir, MatrixJSON), res.Cells)
	if len(res.Cost) > 0 {
		err = errors.Join(err, writeJSON(filepath.Join(dir, MatrixCostJSON), res.Cost))
	}
	return errors.Join(err, writeFile(filepath.Join(dir, MatrixTable), func(w io.Writer) error {
		return errors.Join(WriteMatrixTable(w, modes, nemeses, res.Cells), WriteCostTable(w, res.Cost))
	}), writeMatrixReport(dir, modes, nemeses, res))
}

// WriteMatrixTable writes the Markdown table: a row per mode, a column
// per nemesis, each cell as cellText (several seeds: one line each),
// then the legend and a line per disagreement with ISR-NOTES §4.3.
// Without nemeses (a matrix of costs alone) it writes nothing.
func WriteMatrixTable(w io.Writer, modes []Mode, nemeses []Nemesis, cells []MatrixCell) error {
	if len(nemeses) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("| mode |")
	for _, n := range nemeses {
		fmt.Fprintf(&b, " %s (%d nodes) |", n.Name, n.Nodes)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(nemeses)))
	b.WriteString("\n")
	for _, m := range modes {
		fmt.Fprintf(&b, "| %s |", m.Name)
		for _, n := range nemeses {
			var parts []string
			for _, c := range cells {
				if c.Mode == m.Name && c.Nemesis == n.Name {
					parts = append(parts, c.cellText())
				}
			}
			fmt.Fprintf(&b, " %s |", strings.Join(parts, "<br>"))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nEach cell: checkers' verdict, measured class (L: acknowledged writes lost; U: a fault kept a partition from an ok send " +
		"for half its length and at least 5 s; else ok), loss per million acknowledged (unseen + inconsistent offsets), " +
		"availability during faults (ok sends / sends, over all partitions and for the worst one), " +
		"failover p50 (and max) over the faults no other fault overlapped (and the max of those overlapped), " +
		"and ISR-NOTES §4.3's expected outcome.\n\n")
	for _, m := range modes {
		fmt.Fprintf(&b, "- %s: %s\n", m.Name, m.Doc)
	}
	for _, n := range nemeses {
		fmt.Fprintf(&b, "- %s: %s\n", n.Name, n.Doc)
	}
	if dis := disagreements(cells); len(dis) > 0 {
		b.WriteString("\n## Disagreements and failed runs\n\n")
		for _, d := range dis {
			fmt.Fprintf(&b, "- %s\n", d)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// disagreements lists each cell whose loss contradicts the expected
// outcome, and each cell run that did not go through.
func disagreements(cells []MatrixCell) []string {
	var dis []string
	for _, c := range cells {
		if d := c.Disagrees(); d != "" {
			dis = append(dis, d)
		}
		if c.Err != "" {
			dis = append(dis, fmt.Sprintf("%s/%s seed %d did not run through: %s", c.Mode, c.Nemesis, c.Seed, firstLine(c.Err)))
		}
	}
	return dis
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
