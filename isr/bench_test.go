package isr

import (
	"context"
	"sync"
	"testing"

	"github.com/raftq/raftq/partition"
)

// BenchmarkCluster_AcksAll measures acks=all appends of 1 KiB records on
// an RF 3 in-memory cluster (real logs, no fsync), from 16 producers: the
// ISR path's own cost without TCP or the Kafka layer.
func BenchmarkCluster_AcksAll(b *testing.B) {
	b.Run("flush=never", func(b *testing.B) { benchAcksAll(b, FlushPolicy{}) })
	b.Run("flush.messages=1", func(b *testing.B) { benchAcksAll(b, FlushPolicy{Messages: 1}) })
}

func benchAcksAll(b *testing.B, flush FlushPolicy) {
	c := newTestCluster(b, 3, map[string]string{"min.insync.replicas": "2"})
	for _, n := range c.running() {
		n.p.SetFlush(flush)
	}
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	p := c.node(1).p
	val := string(make([]byte, 1024))
	batch := testBatch(-1, 0, val, val, val, val, val, val, val, val)
	info, err := partition.ValidateBatch(batch, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= b.N {
					mu.Unlock()
					return
				}
				next++
				a, err := p.Append(append([]byte(nil), batch...), info, true)
				mu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := a.Committed(context.Background()); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*8)/b.Elapsed().Seconds(), "records/s")
}
