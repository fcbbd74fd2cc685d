package broker

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/periodic"
	"github.com/raftq/raftq/partition"
)

// The log cleaner compacts the logs of topics with cleanup.policy compact
// (or compact,delete) on every replica, leader or follower, as Kafka's
// does: each replica cleans its own log up to its high watermark, and
// cleaning is deterministic (partition.Log.Clean), so replicas that
// clean the same range write the same bytes. One goroutine per node
// cleans one partition at a time, every LogCleanerBackoff, within
// LogCleanerIOBytesPerSec.

// compacted reports whether t's cleanup.policy includes compact.
func compacted(t *coordinator.Topic) bool {
	return strings.Contains(t.Config("cleanup.policy"), "compact")
}

// deletes reports whether t's cleanup.policy includes delete (retention).
func deletes(t *coordinator.Topic) bool {
	return strings.Contains(t.Config("cleanup.policy"), "delete")
}

// cleaner is the node's log cleaner state, for metrics.
type cleaner struct {
	limit *rate.Limiter // nil: unbounded

	mu   sync.Mutex
	last map[uint64]cleanerPartition // by group
}

type cleanerPartition struct {
	topic     string
	partition int32
	at        time.Time // last cleaning
	dirty     float64   // dirty ratio seen at the last pass
	size      int64     // log bytes at the last pass
}

func newCleaner(bytesPerSec float64) *cleaner {
	c := &cleaner{last: map[uint64]cleanerPartition{}}
	if bytesPerSec > 0 {
		c.limit = rate.NewLimiter(rate.Limit(bytesPerSec), int(min(bytesPerSec, 64<<20)))
	}
	return c
}

// throttle waits until n more bytes of cleaner I/O are allowed.
func (c *cleaner) throttle(ctx context.Context) func(int) {
	if c.limit == nil {
		return nil
	}
	return func(n int) {
		for n > 0 {
			step := min(n, c.limit.Burst())
			if c.limit.WaitN(ctx, step) != nil {
				return
			}
			n -= step
		}
	}
}

// cleanerLoop runs the cleaner until the node closes.
func (n *Node) cleanerLoop(ctx context.Context) {
	periodic.Every(ctx, n.cfg.LogCleanerBackoff, func() {
		view := n.meta.View()
		for _, r := range n.replicaList() {
			if ctx.Err() != nil {
				return
			}
			ref, ok := view.PartitionByGroup(r.gid)
			if ok && r.data != nil && compacted(ref.Topic) {
				n.cleanReplica(ctx, r, ref.Topic)
			}
		}
	})
}

// cleanReplica cleans one replica's log by its topic's configs.
func (n *Node) cleanReplica(ctx context.Context, r *replica, t *coordinator.Topic) {
	l := r.data.repl.Log()
	cfg := partition.CleanConfig{
		UpTo:              l.HighWatermark(),
		Now:               time.Now(),
		MinCleanableRatio: configFloat(t, "min.cleanable.dirty.ratio", 0.5),
		MinCompactionLag:  msDuration(t.ConfigInt("min.compaction.lag.ms")),
		MaxCompactionLag:  msDuration(t.ConfigInt("max.compaction.lag.ms")),
		DeleteRetention:   msDuration(t.ConfigInt("delete.retention.ms")),
		Throttle:          n.cleaner.throttle(ctx),
	}
	start := time.Now()
	st, err := l.Clean(cfg)
	if err != nil {
		n.log.Warn("log cleaner", "topic", r.topic, "partition", r.index, "err", err)
		n.metrics.cleanerErrors.Inc()
		return
	}
	n.cleaner.note(r, st, l.Size())
	if !st.Cleaned {
		return
	}
	n.metrics.cleanerRuns.Inc()
	n.metrics.cleanerReclaimed.Add(float64(st.BytesBefore - st.BytesAfter))
	n.log.Info("log cleaned", "topic", r.topic, "partition", r.index, "segments", st.Segments,
		"bytes_before", st.BytesBefore, "bytes_after", st.BytesAfter, "records_dropped", st.RecordsDropped, "took", time.Since(start))
}

func (c *cleaner) note(r *replica, st partition.CleanStats, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.last[r.gid]
	p.topic, p.partition, p.dirty, p.size = r.topic, r.index, st.DirtyRatio, size
	if st.Cleaned {
		p.at, p.dirty = time.Now(), 0
	}
	c.last[r.gid] = p
}

// collect exports each partition's cleanable bytes and the time since its
// last cleaning.
func (c *cleaner) collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for _, p := range c.last {
		labels := []string{p.topic, strconv.Itoa(int(p.partition))}
		ch <- prometheus.MustNewConstMetric(descCleanable, prometheus.GaugeValue, p.dirty*float64(p.size), labels...)
		if !p.at.IsZero() {
			ch <- prometheus.MustNewConstMetric(descSinceCleaned, prometheus.GaugeValue, now.Sub(p.at).Seconds(), labels...)
		}
	}
}

var (
	descCleanable = prometheus.NewDesc("raftq_log_cleanable_bytes",
		"Bytes of a compacted partition's log not cleaned yet (its dirty share), as the cleaner last saw it.", []string{"topic", "partition"}, nil)
	descSinceCleaned = prometheus.NewDesc("raftq_log_cleaner_seconds_since_cleaned",
		"Seconds since the cleaner last rewrote a compacted partition's log here.", []string{"topic", "partition"}, nil)
)

type cleanerCollector struct{ c *cleaner }

func (cc cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCleanable
	ch <- descSinceCleaned
}
func (cc cleanerCollector) Collect(ch chan<- prometheus.Metric) { cc.c.collect(ch) }

// registerCleaner exports the cleaner's counters and gauges.
func (m *metrics) registerCleaner(c *cleaner) {
	m.cleanerRuns = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftq_log_cleaner_runs_total", Help: "Cleanings that rewrote a compacted partition's log."})
	m.cleanerReclaimed = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftq_log_cleaner_reclaimed_bytes_total", Help: "Bytes the log cleaner removed."})
	m.cleanerErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftq_log_cleaner_errors_total", Help: "Cleanings that stopped on an error (a corrupt batch, a full disk); the log stays readable."})
	m.reg.MustRegister(m.cleanerRuns, m.cleanerReclaimed, m.cleanerErrors, cleanerCollector{c})
}

func configFloat(t *coordinator.Topic, key string, def float64) float64 {
	f, err := strconv.ParseFloat(t.Config(key), 64)
	if err != nil {
		return def
	}
	return f
}
