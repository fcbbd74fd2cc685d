package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/raftq/raftq/internal/floor"
)

// floorResult is what raftq floor reports.
type floorResult struct {
	Nodes       int       `json:"nodes"`
	Partitions  int       `json:"partitions"`
	Rate        float64   `json:"target_rate"`
	RecordSize  int       `json:"record_size"`
	Seconds     float64   `json:"seconds"`
	WarmupS     float64   `json:"warmup_s"`
	Batches     int       `json:"batches"`
	Committed   int       `json:"committed"`
	P50ms       float64   `json:"p50_ms"`
	P99ms       float64   `json:"p99_ms"`
	P999ms      float64   `json:"p999_ms"`
	MaxMs       float64   `json:"max_ms"`
	MaxLagMs    float64   `json:"generator_max_lag_ms"`
	ElapsedS    float64   `json:"elapsed_s"`
	Prealloc    int64     `json:"prealloc_bytes"`
	Tmpfs       bool      `json:"tmpfs"`
	Flushes     []int64   `json:"flushes"`
	FlushMeanMs []float64 `json:"flush_mean_ms"`
	Bytes       []int64   `json:"bytes"`
}

// runFloor measures the least a replicated, fsynced commit costs on this
// disk and these cores, with no raft and no Kafka (package floor), so that
// raftq bench's figures can be read against it.
func runFloor(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "floor", "")
	var cfg floor.Config
	dir := fs.String("data-dir", "", "put the nodes' files here, on the disk to measure (default: a temp dir, removed after)")
	fs.IntVar(&cfg.Nodes, "nodes", 3, "replicas (odd); a batch commits on a majority")
	fs.IntVar(&cfg.Partitions, "partitions", 6, "partitions, leaders spread over the nodes; each sends a batch every millisecond")
	fs.Float64Var(&cfg.Rate, "rate", 150000, "records/s offered (at least one record per partition and millisecond is sent)")
	fs.IntVar(&cfg.RecordBytes, "record-size", 100, "bytes each record takes in the log")
	fs.DurationVar(&cfg.Duration, "duration", 12*time.Second, "how long to measure")
	fs.DurationVar(&cfg.Warmup, "warmup", 3*time.Second, "run this long first, uncounted")
	fs.Int64Var(&cfg.Prealloc, "prealloc", -1, "bytes fallocated per node file up front, as etcd's WAL preallocates segments (0: a growing file; default: what the run writes)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.Nodes < 1 || cfg.Partitions < 1 || cfg.RecordBytes < 1 {
		return usageError{fmt.Errorf("--nodes %d, --partitions %d, --record-size %d: want each at least 1", cfg.Nodes, cfg.Partitions, cfg.RecordBytes)}
	}
	if cfg.Prealloc == -1 {
		cfg.Prealloc = runBytes(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	d, cleanup, err := floorDir(*dir)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.Dir = d
	r, err := floor.Run(ctx, cfg)
	if err != nil {
		return err
	}
	out := newFloorResult(cfg, r)
	out.Tmpfs = onTmpfs(d)
	return printFloor(e, out, *jsonOut)
}

// runBytes is about what each node's file takes in a run: every record
// of the warm-up and the duration, at least one a batch, and a margin.
func runBytes(cfg floor.Config) int64 {
	perS := max(cfg.Rate, float64(1000*cfg.Partitions))
	return int64(perS*(cfg.Warmup+cfg.Duration).Seconds()*float64(cfg.RecordBytes)*1.05) + 1<<20
}

// onTmpfs reports whether dir is on tmpfs, where fdatasync costs nothing.
func onTmpfs(dir string) bool {
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == tmpfsMagic
}

// floorDir makes a fresh directory for the run's files, inside dir if
// given, and returns a function that removes it.
func floorDir(dir string) (string, func(), error) {
	d, err := os.MkdirTemp(dir, "raftq-floor-")
	if err != nil {
		return "", nil, fmt.Errorf("make the floor's directory: %w", err)
	}
	return d, func() { os.RemoveAll(d) }, nil
}

func newFloorResult(cfg floor.Config, r floor.Result) floorResult {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	out := floorResult{
		Nodes: cfg.Nodes, Partitions: cfg.Partitions, Rate: cfg.Rate, RecordSize: cfg.RecordBytes,
		Seconds: cfg.Duration.Seconds(), WarmupS: cfg.Warmup.Seconds(),
		Batches: r.Batches, Committed: r.Committed,
		P50ms: ms(r.P50), P99ms: ms(r.P99), P999ms: ms(r.P999), MaxMs: ms(r.Max),
		MaxLagMs: ms(r.MaxLag), ElapsedS: r.Elapsed.Seconds(), Prealloc: cfg.Prealloc,
	}
	for _, n := range r.Nodes {
		out.Flushes = append(out.Flushes, n.Flushes)
		out.FlushMeanMs = append(out.FlushMeanMs, ms(n.MeanFlush))
		out.Bytes = append(out.Bytes, n.Bytes)
	}
	return out
}

func secs(s float64) string { return time.Duration(s * float64(time.Second)).String() }

func printFloor(e *env, r floorResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(e.stdout, "%d nodes, %d partitions, %.0f records/s of %d B for %s after a %s warm-up\n",
		r.Nodes, r.Partitions, r.Rate, r.RecordSize, secs(r.Seconds), secs(r.WarmupS))
	fmt.Fprintf(e.stdout, "%d of %d batches committed: commit p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms (generator behind by %.2f ms at most)\n",
		r.Committed, r.Batches, r.P50ms, r.P99ms, r.P999ms, r.MaxMs, r.MaxLagMs)
	for i := range r.Flushes {
		fmt.Fprintf(e.stdout, "node %d: %d flushes (write and fdatasync), mean %.3f ms, %d bytes\n", i+1, r.Flushes[i], r.FlushMeanMs[i], r.Bytes[i])
	}
	for i, b := range r.Bytes {
		if r.Prealloc > 0 && b > r.Prealloc {
			fmt.Fprintf(e.stdout, "note: node %d wrote past its %d preallocated bytes, and its later fdatasyncs also wrote the file's size\n", i+1, r.Prealloc)
			break
		}
	}
	if r.Tmpfs {
		fmt.Fprintln(e.stdout, "note: the data dir is on tmpfs, where fdatasync costs nothing; pass --data-dir on the disk to measure")
	}
	if r.Committed < r.Batches {
		return fmt.Errorf("%d batches did not commit", r.Batches-r.Committed)
	}
	return nil
}
