package floor

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Config describes one measurement.
type Config struct {
	// Dir holds one file per node; it must exist.
	Dir string
	// Nodes is the number of replicas, odd; 0 means 3.
	Nodes int
	// Partitions have their leaders spread over the nodes; 0 means 6.
	Partitions int
	// Rate is the records a second offered, over all partitions.
	Rate float64
	// RecordBytes is what one record takes in the log; 0 means 100.
	RecordBytes int
	// Warmup runs at the same rate before Duration, uncounted.
	Warmup, Duration time.Duration
	// Prealloc is the bytes fallocated for each node's file up front; 0
	// appends to a file that grows.
	Prealloc int64
}

// Result is what a measurement found. Latencies run from a batch's send
// to its commit, over the batches sent after the warm-up.
type Result struct {
	Batches   int // sent after the warm-up
	Committed int // of those, committed by the end
	P50       time.Duration
	P99       time.Duration
	P999      time.Duration
	Max       time.Duration
	Nodes     []NodeResult
}

// NodeResult is one node's fdatasyncs over the whole run.
type NodeResult struct {
	Syncs    int64
	MeanSync time.Duration
}

// tick is how often every partition's leader sends a batch.
const tick = time.Millisecond

// drain is how long Run waits for the last batches to commit.
const drain = 5 * time.Second

// Validate fills in the defaults and reports a config that Run would
// refuse.
func (c *Config) Validate() error {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Partitions == 0 {
		c.Partitions = 6
	}
	if c.RecordBytes == 0 {
		c.RecordBytes = 100
	}
	switch {
	case c.Nodes < 1 || c.Nodes%2 == 0:
		return fmt.Errorf("floor: %d nodes: want an odd number", c.Nodes)
	case c.Partitions < 1:
		return fmt.Errorf("floor: %d partitions: want at least 1", c.Partitions)
	case c.Rate <= 0:
		return fmt.Errorf("floor: rate %g: want records a second above 0", c.Rate)
	case c.RecordBytes < 1:
		return fmt.Errorf("floor: record bytes %d: want at least 1", c.RecordBytes)
	case c.Duration <= 0 || c.Warmup < 0:
		return fmt.Errorf("floor: duration %s, warm-up %s: want a positive duration", c.Duration, c.Warmup)
	}
	return nil
}

// Run measures until the warm-up and duration have passed, the context
// ends, or a write or connection fails.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	c, err := start(cfg)
	if err != nil {
		return Result{}, err
	}
	ticks := int((cfg.Warmup + cfg.Duration) / tick)
	lat := make([]atomic.Int64, ticks*cfg.Partitions)
	sent := c.generate(ctx, cfg, ticks, lat)
	c.await(ctx)
	err = c.shutdown()
	if err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	warm := int(cfg.Warmup/tick) * cfg.Partitions
	return c.result(lat[warm:sent]), nil
}

// generate sends a batch per partition and tick, catching up on ticks
// that a late wake-up missed, and returns how many slots of lat it used.
func (c *cluster) generate(ctx context.Context, cfg Config, ticks int, lat []atomic.Int64) int {
	t := time.NewTicker(tick)
	defer t.Stop()
	began := time.Now()
	sent := 0
	for next := 0; next < ticks; {
		select {
		case <-ctx.Done():
			return sent
		case <-c.stop:
			return sent
		case <-t.C:
		}
		for due := int(time.Since(began) / tick); next < ticks && next <= due; next++ {
			for p := range cfg.Partitions {
				n := recordsAt(cfg.Rate, next, p, cfg.Partitions)
				data := make([]byte, n*cfg.RecordBytes)
				c.send(p%cfg.Nodes, data, &lat[sent])
				sent++
			}
		}
	}
	return sent
}

// recordsAt is how many of tick's records go to partition p: the ticks
// share rate evenly, and a tick's records spread over the partitions with
// the remainder rotating, so every batch holds at least one record at
// rates of one a millisecond or more.
func recordsAt(rate float64, tickNo, p, partitions int) int {
	perTick := int(rate*float64(tickNo+1)/1000) - int(rate*float64(tickNo)/1000)
	n := perTick / partitions
	if (p-tickNo%partitions+partitions)%partitions < perTick%partitions {
		n++
	}
	return max(n, 1)
}

// await waits until every replica has every batch sent, for the drain
// time at most, or until the context ends or the run fails.
func (c *cluster) await(ctx context.Context) {
	t := time.NewTicker(tick)
	defer t.Stop()
	deadline := time.Now().Add(drain)
	for c.outstanding.Load() > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-c.stop:
			return
		case <-t.C:
		}
	}
}

// result turns the latency slots of the measured batches into a Result;
// an empty slot is a batch that never committed.
func (c *cluster) result(slots []atomic.Int64) Result {
	r := Result{Batches: len(slots)}
	lat := make([]time.Duration, 0, len(slots))
	for i := range slots {
		if v := slots[i].Load(); v > 0 {
			lat = append(lat, time.Duration(v))
		}
	}
	r.Committed = len(lat)
	slices.Sort(lat)
	if len(lat) > 0 {
		at := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		r.P50, r.P99, r.P999, r.Max = at(0.5), at(0.99), at(0.999), lat[len(lat)-1]
	}
	for _, n := range c.nodes {
		nr := NodeResult{Syncs: n.syncs.Load()}
		if nr.Syncs > 0 {
			nr.MeanSync = time.Duration(n.syncNanos.Load() / nr.Syncs)
		}
		r.Nodes = append(r.Nodes, nr)
	}
	return r
}
