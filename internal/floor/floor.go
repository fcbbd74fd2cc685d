package floor

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// Config describes one measurement.
type Config struct {
	// Dir holds one file per node (node-N.log), which Run creates: Dir
	// must exist and hold no such file.
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
	// appends to a file that grows. NodeResult.Bytes says whether a run
	// outgrew it.
	Prealloc int64
}

// Result is what a measurement found. Latencies run from the moment a
// batch was due to go, on a fixed schedule, to its commit, over the
// batches due after the warm-up; a generator that falls behind adds its
// delay to theirs rather than hiding it.
type Result struct {
	Batches   int // due after the warm-up
	Committed int // of those, committed by the end
	P50       time.Duration
	P99       time.Duration
	P999      time.Duration
	Max       time.Duration
	// MaxLag is the furthest the generator fell behind its schedule.
	MaxLag time.Duration
	// Elapsed is the whole run, warm-up and drain included.
	Elapsed time.Duration
	Nodes   []NodeResult
}

// NodeResult is one node's log over the whole run: its flushes (each a
// write and an fdatasync, timed together) and the bytes in it.
type NodeResult struct {
	Flushes   int64
	MeanFlush time.Duration
	Bytes     int64
}

// tick is how often every partition's leader sends a batch.
const tick = time.Millisecond

// drain is how long Run waits for the last batches to commit.
const drain = 5 * time.Second

// maxRun bounds a run's warm-up and duration together.
const maxRun = time.Hour

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
	case math.IsNaN(c.Rate) || c.Rate <= 0 || c.Rate > math.MaxInt32:
		return fmt.Errorf("floor: rate %g: want records a second above 0 and at most %d", c.Rate, math.MaxInt32)
	case c.RecordBytes < 1:
		return fmt.Errorf("floor: record bytes %d: want at least 1", c.RecordBytes)
	case c.maxBatch() > maxFrame:
		return fmt.Errorf("floor: batches of up to %d bytes (rate %g, %d partitions, %d-byte records): want at most %d", c.maxBatch(), c.Rate, c.Partitions, c.RecordBytes, maxFrame)
	case c.Warmup < 0:
		return fmt.Errorf("floor: warm-up %s: want zero or more", c.Warmup)
	case c.Duration < tick || c.Duration > maxRun || c.Warmup > maxRun-c.Duration:
		return fmt.Errorf("floor: duration %s after a warm-up of %s: want at least %s, and at most %s together", c.Duration, c.Warmup, tick, maxRun)
	case c.Prealloc < 0:
		return fmt.Errorf("floor: preallocation %d: want zero or more bytes", c.Prealloc)
	}
	return nil
}

// maxBatch bounds the bytes of one batch (recordsAt).
func (c *Config) maxBatch() int64 {
	perTick := int64(math.Ceil(c.Rate/1000)) + 1
	return (perTick/int64(c.Partitions) + 1) * int64(c.RecordBytes)
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
	began := time.Now()
	ticks := int((cfg.Warmup + cfg.Duration) / tick)
	lat := make([]atomic.Int64, ticks*cfg.Partitions)
	sent, lag := c.generate(ctx, cfg, ticks, lat)
	c.await(ctx)
	elapsed := time.Since(began)
	err = c.shutdown()
	if err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	warm := int(cfg.Warmup/tick) * cfg.Partitions
	r := c.result(lat[warm:sent])
	r.MaxLag, r.Elapsed = lag, elapsed
	return r, nil
}

// generate sends a batch per partition and tick, tick k due at (k+1)
// ticks after the start, catching up on ticks that a late wake-up missed.
// It returns how many slots of lat it used and how far it fell behind.
func (c *cluster) generate(ctx context.Context, cfg Config, ticks int, lat []atomic.Int64) (int, time.Duration) {
	payload := randomBytes(cfg.maxBatch())
	t := time.NewTicker(tick)
	defer t.Stop()
	began := time.Now()
	sent := 0
	var lag time.Duration
	for next := 0; next < ticks; {
		select {
		case <-ctx.Done():
			return sent, lag
		case <-c.stop:
			return sent, lag
		case <-t.C:
		}
		for due := int(time.Since(began) / tick); next < ticks && next < due; next++ {
			at := began.Add(time.Duration(next+1) * tick)
			lag = max(lag, time.Since(at))
			for p := range cfg.Partitions {
				n := recordsAt(cfg.Rate, next, p, cfg.Partitions)
				c.send(p%cfg.Nodes, at, payload[:n*cfg.RecordBytes], &lat[sent])
				sent++
			}
		}
	}
	return sent, lag
}

// randomBytes is what batches carry: random, so that nothing below
// (compression, deduplication) finds it cheaper than real records.
func randomBytes(n int64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{})
	r.Read(b)
	return b
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
// an empty slot is a batch that never committed. The flushers must have
// stopped.
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
		at := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] } // as raftq bench ranks
		r.P50, r.P99, r.P999, r.Max = at(0.5), at(0.99), at(0.999), lat[len(lat)-1]
	}
	for _, n := range c.nodes {
		nr := NodeResult{Flushes: n.flushes, Bytes: n.off}
		if n.flushes > 0 {
			nr.MeanFlush = time.Duration(n.flushNanos / n.flushes)
		}
		r.Nodes = append(r.Nodes, nr)
	}
	return r
}
