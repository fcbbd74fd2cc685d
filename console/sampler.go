package console

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"
)

// sample is one reading of this node: each local replica's high
// watermark and the records it has returned to fetches.
type sample struct {
	at  time.Time
	hw  map[tp]int64
	out map[tp]float64
}

// rates is a partition's or topic's produce and fetch rates, records/s:
// the latest and the series of the kept samples (for a sparkline). Known
// is false where this node has no samples of it.
type rates struct {
	Known          bool
	Produce, Fetch float64
	ProduceSeries  []float64
	FetchSeries    []float64
}

// asked notes a request and starts the sampler if it is not running.
func (c *Console) asked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastAsked = time.Now()
	if c.sampling || c.closed {
		return
	}
	c.sampling = true
	go c.sampleLoop()
}

func (c *Console) sampleLoop() {
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	failed := 0 // readings in a row that failed: the node is gone
	if !c.sampleOnce() {
		failed++
	}
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.mu.Lock()
		idle := c.cfg.IdleStop > 0 && time.Since(c.lastAsked) > c.cfg.IdleStop || failed >= stopAfterFailures
		if idle {
			c.sampling = false
			c.samples = nil // a gap would read as a rate over it
		}
		c.mu.Unlock()
		if idle {
			return
		}
		if c.sampleOnce() {
			failed = 0
		} else {
			failed++
		}
	}
}

// stopAfterFailures stops a sampler whose node stopped answering; the
// next page starts it again.
const stopAfterFailures = 3

func (c *Console) sampleOnce() bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.NodeTimeout)
	defer cancel()
	_, admin := c.cfg.Addrs()
	st, _, err := c.fetchStatus(ctx, admin)
	if err != nil {
		return false
	}
	s := sample{at: time.Now(), hw: map[tp]int64{}}
	for _, p := range st.Partitions {
		s.hw[tp{p.Topic, p.Partition}] = p.HighWatermark
	}
	if b, err := c.get(ctx, admin, "/metrics"); err == nil {
		s.out = recordsOut(b)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, s)
	if len(c.samples) > c.cfg.Samples {
		c.samples = c.samples[len(c.samples)-c.cfg.Samples:]
	}
	return true
}

// recordsOutMetric is broker/metrics_dashboard.go's per-partition count
// of records returned to fetches.
const recordsOutMetric = "raftq_partition_records_out_total{"

// recordsOut reads recordsOutMetric's series from Prometheus text. Topic
// names (Kafka's [a-zA-Z0-9._-]) need no unescaping.
func recordsOut(b []byte) map[tp]float64 {
	out := map[tp]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, recordsOutMetric) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		var k tp
		for _, l := range strings.Split(line[len(recordsOutMetric):end], ",") {
			name, val, ok := strings.Cut(l, "=")
			if !ok {
				continue
			}
			val = strings.Trim(val, `"`)
			switch name {
			case "topic":
				k.Topic = val
			case "partition":
				p, _ := strconv.Atoi(val)
				k.Partition = int32(p)
			}
		}
		out[k] = v
	}
	return out
}

// series returns the per-interval rates of one partition over the kept
// samples, and whether this node has samples of it.
func series(samples []sample, k tp) (produce, fetch []float64, known bool) {
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dt := b.at.Sub(a.at).Seconds()
		hwA, okA := a.hw[k]
		hwB, okB := b.hw[k]
		if dt <= 0 || !okA || !okB {
			continue
		}
		known = true
		produce = append(produce, max(float64(hwB-hwA), 0)/dt)
		fetch = append(fetch, max(b.out[k]-a.out[k], 0)/dt)
	}
	return produce, fetch, known
}

// addRates fills the rates of cv's partitions and topics from this
// node's samples.
func (c *Console) addRates(cv *clusterView) {
	c.mu.Lock()
	samples := c.samples
	c.mu.Unlock()
	for ti := range cv.Topics {
		t := &cv.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			prod, fetch, known := series(samples, p.tp)
			if !known {
				continue
			}
			p.Rates = rates{Known: true, ProduceSeries: prod, FetchSeries: fetch, Produce: last(prod), Fetch: last(fetch)}
			t.Rates.Known = true
			t.Rates.ProduceSeries = addSeries(t.Rates.ProduceSeries, prod)
			t.Rates.FetchSeries = addSeries(t.Rates.FetchSeries, fetch)
		}
		t.Rates.Produce, t.Rates.Fetch = last(t.Rates.ProduceSeries), last(t.Rates.FetchSeries)
	}
}

func last(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// addSeries adds b into a, aligned at their ends (the latest sample).
func addSeries(a, b []float64) []float64 {
	if len(b) > len(a) {
		a, b = b, a
	}
	out := append([]float64(nil), a...)
	off := len(a) - len(b)
	for i, v := range b {
		out[off+i] += v
	}
	return out
}
