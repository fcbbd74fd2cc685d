package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/logging"
)

// The matrix's cost phase (issue 21): after the cells, every mode's
// records/s at 100 B and 1 KiB and its latency at a fixed rate, measured
// with raftq bench on a fresh cluster of the same size for every mode.
//
// The loads are defined here, not by the command that runs them: the
// protocol (record sizes, producers, rate, fresh topics, order) belongs
// to the matrix and its tests, while CostConfig.Bench, which the command
// fills with raftq bench, only runs one load. The jepsen package stays
// free of cmd/raftq, and a test can check every load a mode gets.

// The loads of a mode's cost phase, by CostLoad.Name, in the order they
// run: 100 B and 1 KiB records at full speed, then 100 B records offered
// at CostConfig.Rate for the latency.
const (
	CostSmall = "100B"
	CostLarge = "1KiB"
	CostFixed = "rate"
)

// CostDir is the directory in MatrixConfig.Dir that holds each mode's
// cost row (<mode>.json) and its cluster's logs (<mode>/cluster).
const CostDir = "cost"

// DialFunc reaches an address where a cluster's nodes live (see
// chaos.Cluster.DialContext); a Kafka client takes it as kgo.Dialer.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// CostLoad is one load of a mode's cost phase, as raftq bench runs it:
// create Topic, produce to it, and delete it after (the disk then holds
// one load's records, not every load's).
type CostLoad struct {
	Name              string            `json:"name"`
	Topic             string            `json:"topic"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	TopicConfigs      map[string]string `json:"topic_configs,omitempty"`
	RecordSize        int               `json:"record_size"`
	Producers         int               `json:"producers"`
	// Rate is the records/s offered, all producers together; 0 is as
	// fast as the cluster takes them.
	Rate float64 `json:"rate,omitempty"`
	// Duration is measured after Warmup, which produces at the same rate
	// uncounted.
	Duration time.Duration `json:"duration"`
	Warmup   time.Duration `json:"warmup"`
	// Brokers and Dial reach the cluster.
	Brokers []string `json:"-"`
	Dial    DialFunc `json:"-"`
}

// CostFigures is what a load measured: raftq bench's figures (acks=all,
// idempotent producers) and the setup it names.
type CostFigures struct {
	Records     int64   `json:"records"`
	Failed      int64   `json:"failed"`
	Unanswered  int64   `json:"unanswered,omitempty"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_sec"`
	MBPerS      float64 `json:"mb_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	P999ms      float64 `json:"p999_ms"`
	MaxMs       float64 `json:"max_ms"`
	// Setup is raftq bench's: brokers, their raftq settings, the topic's
	// partitions, replication factor and mode, and the durability.
	Setup map[string]string `json:"setup,omitempty"`
}

// CostMeasure is a load and its figures, or why it has none.
type CostMeasure struct {
	Load    CostLoad     `json:"load"`
	Figures *CostFigures `json:"figures,omitempty"`
	Err     string       `json:"error,omitempty"`
}

// CostRow is one mode's cost phase.
type CostRow struct {
	Mode  string `json:"mode"`
	Nodes int    `json:"nodes"`
	// Dir holds the cluster's logs, relative to the matrix directory.
	Dir   string        `json:"dir"`
	Loads []CostMeasure `json:"loads"`
	// Crashes counts node exits the harness did not cause.
	Crashes int `json:"crashes,omitempty"`
	// Err is why the cluster did not start or stop cleanly.
	Err string `json:"error,omitempty"`
}

// CostCluster is a running cluster of a cost phase.
type CostCluster struct {
	Brokers []string
	Dial    DialFunc
	// Close stops the cluster, and returns the node exits the harness
	// did not cause.
	Close func() ([]chaos.Exit, error)
}

// CostConfig describes the matrix's cost phase.
type CostConfig struct {
	// Bench runs one load (the command fills it with raftq bench); nil
	// runs no cost phase, and the report shows the rows of earlier runs.
	Bench func(ctx context.Context, l CostLoad) (CostFigures, error)
	// Nodes is the cluster size, the same for every mode so that the
	// rows compare.
	Nodes int
	// Partitions of each load's topic; Producers at full speed (the
	// fixed-rate load has one, as the hand-run comparison of
	// BENCHMARKS.md did, so its latency is not that of a queue).
	Partitions int32
	Producers  int
	// Rate is the fixed-rate load's records/s: one every mode sustains,
	// or its latency is that of a queue in the client.
	Rate float64
	// Duration and Warmup are each load's.
	Duration, Warmup time.Duration
	// Start starts a mode's cluster (nil: real raftq server processes
	// in a network namespace; tests put a fake here).
	Start func(ctx context.Context, cfg RaftqConfig) (*CostCluster, error)
}

// DefaultCostConfig returns 3 nodes, 6 partitions, 4 producers at full
// speed and 50,000 records/s of 100 B for the latency, which the
// slowest mode (raft with fsync always, about a million records/s of
// 100 B at full speed on two cores) holds with room; 10 s per load
// after a 3 s warm-up.
func DefaultCostConfig() CostConfig {
	return CostConfig{Nodes: 3, Partitions: 6, Producers: 4, Rate: 50000, Duration: 10 * time.Second, Warmup: 3 * time.Second}
}

// Validate reports a bad setting.
func (c CostConfig) Validate() error {
	switch {
	case c.Nodes < 1 || c.Partitions < 1 || c.Producers < 1:
		return fmt.Errorf("cost phase: %d nodes, %d partitions, %d producers, want at least 1 of each: %w", c.Nodes, c.Partitions, c.Producers, ErrBadConfig)
	case c.Rate <= 0:
		return fmt.Errorf("cost phase: rate %g, want a positive records/s: %w", c.Rate, ErrBadConfig)
	case c.Duration <= 0 || c.Warmup < 0:
		return fmt.Errorf("cost phase: duration %s, warm-up %s: %w", c.Duration, c.Warmup, ErrBadConfig)
	}
	return nil
}

// CostLoads are the loads of mode m's cost phase, in order, each on a
// fresh topic with the mode's topic configs and replication factor (3,
// or fewer with fewer nodes, unless the mode says).
func CostLoads(c CostConfig, base RaftqConfig, m Mode) []CostLoad {
	cfgs := maps.Clone(base.Run.Workload.TopicConfigs)
	if cfgs == nil {
		cfgs = map[string]string{}
	}
	maps.Copy(cfgs, m.TopicConfigs)
	rf := int16(min(3, c.Nodes))
	if m.ReplicationFactor > 0 {
		rf = m.ReplicationFactor
	}
	load := func(name, topic string, size, producers int, rate float64) CostLoad {
		return CostLoad{Name: name, Topic: topic, Partitions: c.Partitions, ReplicationFactor: rf, TopicConfigs: maps.Clone(cfgs),
			RecordSize: size, Producers: producers, Rate: rate, Duration: c.Duration, Warmup: c.Warmup}
	}
	return []CostLoad{
		load(CostSmall, "cost-100b", 100, c.Producers, 0),
		load(CostLarge, "cost-1kib", 1024, c.Producers, 0),
		load(CostFixed, "cost-rate", 100, 1, c.Rate),
	}
}

// CostClusterConfig is the cluster of mode m's cost phase: base's
// binary, server args and timeouts with the mode's fsync and server
// args, on nodes nodes, its logs in dir. It has no faults and no lazyfs,
// whose fsync is far cheaper than the disk's and would flatter the
// modes that fsync.
func CostClusterConfig(base RaftqConfig, m Mode, nodes int, dir string) (RaftqConfig, error) {
	c := base
	c.Nodes, c.Fsync = nodes, m.Fsync
	c.ServerArgs = append(slices.Clone(base.ServerArgs), m.ServerArgs...)
	c.Run.ReportDir = dir
	c.Schedule.Kinds, c.Script = nil, nil
	c.LazyFS, c.Writeback, c.KeepData = false, 0, false
	return c, c.Validate()
}

// startCostCluster starts cfg's cluster of real raftq server processes
// in a network namespace; Close stops it and removes its data.
func startCostCluster(ctx context.Context, cfg RaftqConfig) (*CostCluster, error) {
	if err := prerequisites(false); err != nil {
		return nil, err
	}
	c, err := startRaftq(ctx, cfg, logging.Discard(cfg.Logger))
	if err != nil {
		return nil, err
	}
	cc := &CostCluster{Dial: c.DialContext}
	for _, n := range c.Nodes() {
		cc.Brokers = append(cc.Brokers, n.KafkaAddr())
	}
	cc.Close = func() ([]chaos.Exit, error) {
		crashes := c.Crashes()
		err := c.Close()
		for _, n := range c.Nodes() {
			os.RemoveAll(n.Dir)
		}
		return crashes, err
	}
	return cc, nil
}

// costPath is where mode's cost row is kept.
func costPath(dir, mode string) string { return filepath.Join(dir, CostDir, mode+".json") }

// readCostRow reads a cost row kept by an earlier run.
func readCostRow(path string) (CostRow, error) {
	var r CostRow
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Done says whether the row was measured through: the cluster ran
// cleanly and every load has figures.
func (r CostRow) Done() bool {
	if r.Err != "" || r.Crashes > 0 || len(r.Loads) == 0 {
		return false
	}
	for _, l := range r.Loads {
		if l.Figures == nil {
			return false
		}
	}
	return true
}

// DoneAs says whether the row is done with exactly the loads want: a
// resumed matrix measures a mode again when its row is not, so that one
// table never mixes rows of other durations, rates or producers (a
// --quick run's beside a full one's in the same directory).
func (r CostRow) DoneAs(want []CostLoad) bool {
	return r.Done() && slices.EqualFunc(r.Loads, want, func(m CostMeasure, w CostLoad) bool { return sameLoad(m.Load, w) })
}

// sameLoad compares what a load measured, not how it reached the cluster.
func sameLoad(a, b CostLoad) bool {
	return a.Name == b.Name && a.Topic == b.Topic && a.Partitions == b.Partitions && a.ReplicationFactor == b.ReplicationFactor &&
		a.RecordSize == b.RecordSize && a.Producers == b.Producers && a.Rate == b.Rate && a.Duration == b.Duration &&
		a.Warmup == b.Warmup && maps.Equal(a.TopicConfigs, b.TopicConfigs)
}

// Measure returns the measure of the load named name, or nil.
func (r CostRow) Measure(name string) *CostMeasure {
	for i := range r.Loads {
		if r.Loads[i].Load.Name == name {
			return &r.Loads[i]
		}
	}
	return nil
}

// Figures returns the figures of the load named name, or nil.
func (r CostRow) Figures(name string) *CostFigures {
	if m := r.Measure(name); m != nil {
		return m.Figures
	}
	return nil
}

// Setup is the setup raftq bench named for the row's first load that
// ran, or nil.
func (r CostRow) Setup() map[string]string {
	for _, l := range r.Loads {
		if l.Figures != nil && len(l.Figures.Setup) > 0 {
			return l.Figures.Setup
		}
	}
	return nil
}

// runCosts runs the cost phase of every mode not already measured in
// cfg.Dir and returns every mode's row, those of earlier runs included.
// A mode that fails is recorded with its error and does not stop the
// phase; canceling ctx does. Without cfg.Cost.Bench it only reads the
// rows of earlier runs.
func runCosts(ctx context.Context, cfg MatrixConfig, began time.Time) ([]CostRow, error) {
	if cfg.Cost.Bench == nil {
		return keptCosts(cfg.Dir, cfg.Modes), nil
	}
	var rows []CostRow
	var est estimate
	for i, m := range cfg.Modes {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		path := costPath(cfg.Dir, m.Name)
		p := MatrixProgress{Cost: true, Cell: i + 1, Cells: len(cfg.Modes), Name: m.Name, Elapsed: time.Since(began)}
		if kept, err := readCostRow(path); err == nil && kept.DoneAs(CostLoads(cfg.Cost, cfg.Base, m)) {
			p.Skipped = true
			report(cfg.Progress, p)
			rows = append(rows, kept)
			continue
		}
		p.Left = est.left(len(cfg.Modes) - i)
		report(cfg.Progress, p)
		start := time.Now()
		row := runCost(ctx, cfg, m)
		if err := ctx.Err(); err != nil { // a row cut short is measured again
			return rows, err
		}
		if err := writeJSON(path, row); err != nil && row.Err == "" {
			row.Err = err.Error()
		}
		if cfg.CostDone != nil {
			cfg.CostDone(row)
		}
		est.add(time.Since(start))
		rows = append(rows, row)
	}
	return rows, nil
}

// keptCosts reads the rows of earlier runs, done or not.
func keptCosts(dir string, modes []Mode) []CostRow {
	var rows []CostRow
	for _, m := range modes {
		if r, err := readCostRow(costPath(dir, m.Name)); err == nil {
			rows = append(rows, r)
		}
	}
	return rows
}

// runCost measures mode m: its cluster, then every load in turn. A load
// that fails is recorded and the next one runs.
func runCost(ctx context.Context, cfg MatrixConfig, m Mode) CostRow {
	cc := cfg.Cost
	row := CostRow{Mode: m.Name, Nodes: cc.Nodes, Dir: filepath.ToSlash(filepath.Join(CostDir, m.Name))}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, CostDir), 0o755); err != nil {
		row.Err = fmt.Sprintf("cost dir: %s", err)
		return row
	}
	rc, err := CostClusterConfig(cfg.Base, m, cc.Nodes, filepath.Join(cfg.Dir, row.Dir))
	if err != nil {
		row.Err = err.Error()
		return row
	}
	start := cc.Start
	if start == nil {
		start = startCostCluster
	}
	cl, err := start(ctx, rc)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	for _, l := range CostLoads(cc, cfg.Base, m) {
		if ctx.Err() != nil {
			break
		}
		l.Brokers, l.Dial = cl.Brokers, cl.Dial
		row.Loads = append(row.Loads, measureLoad(ctx, cc.Bench, l))
	}
	crashes, err := cl.Close()
	row.Crashes = len(crashes)
	if err != nil {
		row.Err = fmt.Sprintf("stop cluster: %s", err)
	}
	return row
}

// measureLoad runs one load.
func measureLoad(ctx context.Context, bench func(context.Context, CostLoad) (CostFigures, error), l CostLoad) CostMeasure {
	m := CostMeasure{Load: l}
	f, err := bench(ctx, l)
	if err != nil {
		m.Err = err.Error()
		return m
	}
	m.Figures = &f
	return m
}

// estimate is the time left, from the runs so far.
type estimate struct {
	ran    int
	ranFor time.Duration
}

func (e *estimate) add(d time.Duration) { e.ran, e.ranFor = e.ran+1, e.ranFor+d }

// left is the time n more runs take, 0 before the first.
func (e *estimate) left(n int) time.Duration {
	if e.ran == 0 {
		return 0
	}
	return e.ranFor / time.Duration(e.ran) * time.Duration(n)
}
