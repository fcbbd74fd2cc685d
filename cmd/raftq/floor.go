package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	Fsyncs      []int64   `json:"fsyncs"`
	FsyncMeanMs []float64 `json:"fsync_mean_ms"`
}

// runFloor measures the least a replicated, fsynced commit costs on this
// disk and these cores, with no raft and no Kafka (package floor), so that
// raftq bench's figures can be read against it.
func runFloor(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "floor")
	var cfg floor.Config
	dir := fs.String("data-dir", "", "put the nodes' files here, on the disk to measure (default: a temp dir, removed after)")
	fs.IntVar(&cfg.Nodes, "nodes", 3, "replicas (odd); a batch commits on a majority")
	fs.IntVar(&cfg.Partitions, "partitions", 6, "partitions, leaders spread over the nodes; each sends a batch every millisecond")
	fs.Float64Var(&cfg.Rate, "rate", 150000, "records/s offered (at least one record per partition and millisecond is sent)")
	fs.IntVar(&cfg.RecordBytes, "record-size", 100, "bytes each record takes in the log")
	fs.DurationVar(&cfg.Duration, "duration", 12*time.Second, "how long to measure")
	fs.DurationVar(&cfg.Warmup, "warmup", 3*time.Second, "run this long first, uncounted")
	fs.Int64Var(&cfg.Prealloc, "prealloc", 256<<20, "bytes fallocated per node file up front, as etcd's WAL preallocates segments (0: a growing file)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := parse(fs, args); err != nil {
		return err
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
	return printFloor(e, newFloorResult(cfg, r), *jsonOut)
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
	}
	for _, n := range r.Nodes {
		out.Fsyncs = append(out.Fsyncs, n.Syncs)
		out.FsyncMeanMs = append(out.FsyncMeanMs, ms(n.MeanSync))
	}
	return out
}

func printFloor(e *env, r floorResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(e.stdout, "%d nodes, %d partitions, %.0f records/s of %d B for %.1fs after a %.1fs warm-up\n",
		r.Nodes, r.Partitions, r.Rate, r.RecordSize, r.Seconds, r.WarmupS)
	fmt.Fprintf(e.stdout, "%d of %d batches committed: commit p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms\n",
		r.Committed, r.Batches, r.P50ms, r.P99ms, r.P999ms, r.MaxMs)
	for i := range r.Fsyncs {
		fmt.Fprintf(e.stdout, "node %d: %d fdatasyncs, mean %.3f ms\n", i+1, r.Fsyncs[i], r.FsyncMeanMs[i])
	}
	if r.Committed < r.Batches {
		return fmt.Errorf("%d batches did not commit", r.Batches-r.Committed)
	}
	return nil
}
