package broker

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/partition"
)

// These run ISR-mode topics (replication.mode=isr) on in-process
// clusters: group 0 elects, followers fetch from the leader.

func createISRTopic(t testing.TB, cl *kgo.Client, name string, parts int32, rf int16, minISR int) {
	t.Helper()
	mode, min := coordinator.ModeISR, fmt.Sprint(minISR)
	res, err := kadm.NewClient(cl).CreateTopic(testCtx(t), parts, rf,
		map[string]*string{"replication.mode": &mode, "min.insync.replicas": &min}, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create ISR topic %s: %v (%s)", name, err, res.ErrMessage)
	}
}

// isrLeader returns the node group 0 elected for topic partition p, once
// one is, as node 'from' sees it.
func (c *testCluster) isrLeader(t testing.TB, from uint64, topic string, p int32) uint64 {
	t.Helper()
	var leader uint64
	eventually(t, fmt.Sprintf("a leader of %s-%d", topic, p), func() bool {
		tp, ok := c.nodes[from].Metadata().Topics[topic]
		if !ok {
			return false
		}
		leader = tp.Partitions[p].Leader
		return leader != 0 && c.nodes[leader] != nil
	})
	return leader
}

// An ISR topic takes acks=all writes with the leader's offsets, every
// replica holds them below its high watermark, consumers read them back,
// and /v1/status reports the mode, the leader epoch and the ISR.
func TestISR_ProduceConsume(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createISRTopic(t, cl, "i", 1, 3, 2)
	var vals []string
	for i := range 50 {
		vals = append(vals, fmt.Sprintf("v%d", i))
	}
	for i, o := range produceSync(t, cl, "i", 0, vals...) {
		if o != int64(i) {
			t.Fatalf("record %d got offset %d", i, o)
		}
	}
	for i, r := range consumeAll(t, c, "i", 0, len(vals)) {
		if string(r.Value) != vals[i] || r.Offset != int64(i) {
			t.Fatalf("record %d is %q at %d, want %q at %d", i, r.Value, r.Offset, vals[i], i)
		}
	}
	c.everyLog(t, "every replica to hold the 50 records below its high watermark", "i", 0, func(l *partition.Log) bool {
		return l.HighWatermark() == 50
	})
	leader := c.isrLeader(t, 1, "i", 0)
	var ps PartitionStatus
	for _, p := range c.nodes[leader].Status().Partitions {
		if p.Topic == "i" {
			ps = p
		}
	}
	if ps.Mode != coordinator.ModeISR || ps.Role != "leader" || ps.Leader != leader || len(ps.ISR) != 3 || len(ps.Followers) != 2 {
		t.Errorf("leader's status %+v, want mode isr, role leader, leader %d, an ISR of 3 and 2 followers", ps, leader)
	}
}

// acked is a record the producer had acknowledged, in ack order.
type acked struct {
	value  string
	offset int64
}

// Killing an ISR partition's leader mid-load (min.insync.replicas=2, RF
// 3, acks=all, an idempotent producer) loses no acknowledged record:
// group 0 fences the dead node and elects from the ISR, the producer
// carries on with the new leader, and every acknowledged record is read
// back exactly once, at its acknowledged offset, in order.
func TestISR_LeaderKilledMidLoad(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("kill"), kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(2000),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	createISRTopic(t, cl, "kill", 1, 3, 2)
	victim := c.isrLeader(t, 1, "kill", 0)

	var mu sync.Mutex
	var acks []acked
	var failed []error
	ackedN := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}
	ctx := testCtx(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("r%d", i)
			cl.Produce(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acks = append(acks, acked{string(r.Value), r.Offset})
			})
			if i%50 == 49 {
				time.Sleep(time.Millisecond) // a steady load, not a flood of buffered records
			}
		}
	}()
	eventually(t, "500 records acknowledged before the kill", func() bool { return ackedN() >= 500 })
	before := ackedN()
	t.Logf("closing node %d, the leader, after %d acknowledged records", victim, before)
	c.stop(victim)
	survivor := uint64(1)
	if victim == 1 {
		survivor = 2
	}
	eventually(t, "500 more records acknowledged after the kill", func() bool { return ackedN() >= before+500 })
	close(stop)
	<-done
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if next := c.isrLeader(t, survivor, "kill", 0); next == victim {
		t.Fatalf("node %d still leads after it closed", victim)
	}
	if isr := c.nodes[survivor].Metadata().Topics["kill"].Partitions[0].ISR; slices.Contains(isr, victim) || len(isr) != 2 {
		t.Errorf("ISR %v after node %d closed, want the 2 others", isr, victim)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("%d records failed (first: %v): the producer should have carried on with the new leader", len(failed), failed[0])
	}
	last := acks[len(acks)-1].offset
	recs := consumeAll(t, c, "kill", 0, int(last)+1)
	checkAcked(t, recs, acks)
}

// checkAcked checks that every acknowledged record is in recs exactly
// once, at the offset it was acknowledged with, and in ack order.
func checkAcked(t *testing.T, recs []*kgo.Record, acks []acked) {
	t.Helper()
	at := map[string][]int64{}
	for _, r := range recs {
		at[string(r.Value)] = append(at[string(r.Value)], r.Offset)
	}
	prev := int64(-1)
	for _, a := range acks {
		offs := at[a.value]
		switch {
		case len(offs) != 1:
			t.Fatalf("acknowledged record %q at %d is in the log %d times (at %v)", a.value, a.offset, len(offs), offs)
		case offs[0] != a.offset:
			t.Fatalf("acknowledged record %q at %d is in the log at %d", a.value, a.offset, offs[0])
		case a.offset <= prev:
			t.Fatalf("acknowledged record %q at %d follows one at %d", a.value, a.offset, prev)
		}
		prev = a.offset
	}
	if !slices.IsSortedFunc(recs, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) }) {
		t.Error("the log is not in offset order")
	}
	t.Logf("%d acknowledged records read back once each, in order, from %d in the log", len(acks), len(recs))
}
