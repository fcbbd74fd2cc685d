package broker

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// isrPartition returns partition p of topic as node from's metadata has
// it, once that metadata holds the topic (CreateTopics may have been
// answered by another node).
func (c *testCluster) isrPartition(from uint64, topic string, p int32) coordinator.Partition {
	c.t.Helper()
	var out coordinator.Partition
	eventually(c.t, fmt.Sprintf("node %d to see %s-%d", from, topic, p), func() bool {
		t := c.nodes[from].Metadata().Topics[topic]
		if t == nil || int(p) >= len(t.Partitions) {
			return false
		}
		out = t.Partitions[p]
		return true
	})
	return out
}

// With min.insync.replicas=2 and RF 2, losing the follower shrinks the
// ISR to the leader alone: acks=all is refused before the append with
// NOT_ENOUGH_REPLICAS while acks=1 still writes; once the follower is
// back and caught up it rejoins the ISR and acks=all writes again.
func TestISR_BelowMinISRRefusesAcksAll(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createISRTopic(t, cl, "below", 1, 2, 2)
	leader := c.isrLeader(t, 1, "below", 0)
	follower := c.isrPartition(leader, "below", 0).Replicas[0]
	if follower == leader {
		follower = c.isrPartition(leader, "below", 0).Replicas[1]
	}
	// kgo sends a produce request with its client's acks, whatever the
	// request says: a client per acks.
	acks1 := c.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	produce := func(acks int16, v string) (int16, int64) {
		t.Helper()
		via := cl
		if acks == 1 {
			via = acks1
		}
		return produceCode(requestFrom[*kmsg.ProduceResponse](t, via, int32(leader), produceRequest("below", 0, acks, testBatch(t, -1, 0, 0, v))))
	}
	eventually(t, "the leader to take acks=all with the full ISR", func() bool {
		code, _ := produce(-1, "a") // NOT_LEADER until it has taken its role
		return code == 0
	})
	c.stop(follower)
	eventually(t, "the ISR to shrink to the leader", func() bool {
		return slices.Equal(c.isrPartition(leader, "below", 0).ISR, []uint64{leader})
	})
	eventually(t, "the leader to take the shrunk ISR", func() bool {
		return len(c.nodes[leader].replicaFor("below", 0).lead.describe().ISR) == 1
	})
	m := c.nodes[leader].metrics
	if got := underReplicatedGauge(t, c.nodes[leader], "isr"); got != 1 {
		t.Errorf(`raftq_under_replicated_partitions{mode="isr"} = %v on the leader of the shrunk ISR, want 1`, got)
	}
	if got := counterValue(t, m.isrChanges.WithLabelValues("shrink")); got < 1 {
		t.Errorf(`raftq_isr_changes_total{direction="shrink"} = %v, want at least 1`, got)
	}
	if code, _ := produce(-1, "refused"); code != kerr.NotEnoughReplicas.Code {
		t.Errorf("acks=all below min.insync.replicas: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	end := c.nodes[leader].replicaFor("below", 0).data.repl.Log().EndOffset()
	if code, off := produce(1, "b"); code != 0 || off != end {
		t.Errorf("acks=1 below min.insync.replicas: %v at %d, want offset %d, the log end", kerr.ErrorForCode(code), off, end)
	}
	c.start(follower)
	eventually(t, "the follower to rejoin the ISR", func() bool {
		return len(c.isrPartition(leader, "below", 0).ISR) == 2
	})
	eventually(t, "acks=all to write again", func() bool {
		code, _ := produce(-1, "c")
		return code == 0
	})
	eventually(t, "the leader to count the expansion and no under-replication", func() bool {
		return counterValue(t, m.isrChanges.WithLabelValues("expand")) >= 1 && underReplicatedGauge(t, c.nodes[leader], "isr") == 0
	})
	if n := histCount(t, c.nodes[follower].metrics.followerFetch.WithLabelValues("ok")); n == 0 {
		t.Error("the follower timed no fetch (raftq_isr_follower_fetch_seconds)")
	}
	vals := []string{}
	for _, r := range consumeAll(t, c, "below", 0, int(end)+2) {
		vals = append(vals, string(r.Value))
	}
	a, b, cc := slices.Index(vals, "a"), slices.Index(vals, "b"), slices.Index(vals, "c")
	if a < 0 || b <= a || cc <= b || slices.Contains(vals, "refused") {
		t.Errorf("the log holds %q, want a, b, then c, and never the refused batch", vals)
	}
}

// DeleteRecords on an ISR topic moves the leader's log start, and every
// follower follows it as it fetches; retention.bytes does the same from
// the leader's retention loop.
func TestISR_DeleteRecordsAndRetention(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.RetentionCheckInterval = 100 * time.Millisecond })
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createISRTopic(t, cl, "dr", 1, 3, 2)
	produceSync(t, cl, "dr", 0, "a", "b", "c", "d", "e")
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 3})
	if drs, err := kadm.NewClient(cl).DeleteRecords(testCtx(t), offs); err != nil || drs.Error() != nil {
		t.Fatalf("delete records: %v %v", err, drs.Error())
	}
	c.everyLog(t, "every replica to move its log start to 3", "dr", 0, func(l *partition.Log) bool { return l.StartOffset() == 3 })
	if recs := consumeFrom(t, c, "dr", 0, 3, 2); string(recs[0].Value) != "d" || recs[0].Offset != 3 {
		t.Errorf("first record from the new start is %q at %d, want d at 3", recs[0].Value, recs[0].Offset)
	}

	// Small segments and retention.bytes of one segment: the leader drops
	// whole old segments, and the followers follow its log start.
	seg, keep := "1024", "1024"
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{
		{Name: "segment.bytes", Value: &seg}, {Name: "retention.bytes", Value: &keep}}, "dr"); err != nil {
		t.Fatal(err)
	}
	c.everyLog(t, "every replica to take the new segment size", "dr", 0, func(l *partition.Log) bool { return l.Limits().SegmentBytes == 1024 })
	for i := range 60 {
		produceSync(t, cl, "dr", 0, fmt.Sprintf("%060d", i)) // a batch each, several to a segment
	}
	c.everyLog(t, "retention to move every replica's log start past 30", "dr", 0, func(l *partition.Log) bool { return l.StartOffset() > 30 })
}

// consumeFrom reads want records of topic partition p from offset at.
func consumeFrom(t *testing.T, c *testCluster, topic string, p int32, at int64, want int) []*kgo.Record {
	t.Helper()
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(at)}}))
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// Leader balance gives an ISR partition back to its preferred replica by
// a preferred election in group 0, once that replica is back in the ISR.
func TestISR_LeaderBalanceElectsThePreferredReplica(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaderBalanceInterval = 200 * time.Millisecond })
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createISRTopic(t, cl, "bal", 1, 3, 1)
	preferred := c.isrPartition(1, "bal", 0).Replicas[0]
	other := preferred%3 + 1
	if got := c.isrLeader(t, other, "bal", 0); got != preferred {
		t.Fatalf("node %d leads a new partition, want its preferred replica %d", got, preferred)
	}
	produceSync(t, cl, "bal", 0, "a")
	c.stop(preferred)
	eventually(t, "another replica to lead", func() bool {
		l := c.isrPartition(other, "bal", 0).Leader
		return l != 0 && l != preferred
	})
	produceSync(t, cl, "bal", 0, "b")
	c.start(preferred)
	eventually(t, "the preferred replica to lead again", func() bool {
		p := c.isrPartition(other, "bal", 0)
		return p.Leader == preferred && slices.Contains(p.ISR, preferred)
	})
	produceSync(t, cl, "bal", 0, "c")
	for i, r := range consumeAll(t, c, "bal", 0, 3) {
		if want := []string{"a", "b", "c"}[i]; string(r.Value) != want || r.Offset != int64(i) {
			t.Errorf("record %d is %q at %d, want %q", i, r.Value, r.Offset, want)
		}
	}
}

// An ISR topic through its life: partitions added, every node restarted
// (the replicas reopen their logs and take their roles from group 0
// again), then deleted, which removes every replica.
func TestISR_TopicLifecycle(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	createISRTopic(t, cl, "life", 1, 3, 2)
	produceSync(t, cl, "life", 0, "a", "b")
	if _, err := adm.CreatePartitions(testCtx(t), 1, "life"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a leader of the new partition, in every node's metadata", func() bool {
		for _, n := range c.nodes { // the new client may ask any of them
			if tp := n.Metadata().Topics["life"]; len(tp.Partitions) != 2 || tp.Partitions[1].Leader == 0 {
				return false
			}
		}
		return true
	})
	// A new client: kgo learns new partitions only at its next refresh.
	produceSync(t, c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())), "life", 1, "x")
	c.restartAll()
	cl2 := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceSync(t, cl2, "life", 0, "c")
	produceSync(t, cl2, "life", 1, "y")
	for p, want := range [][]string{{"a", "b", "c"}, {"x", "y"}} {
		var got []string
		for _, r := range consumeAll(t, c, "life", int32(p), len(want)) {
			got = append(got, string(r.Value))
		}
		if !slices.Equal(got, want) {
			t.Errorf("partition %d after the restart holds %q, want %q", p, got, want)
		}
		c.everyLog(t, "every replica to hold the records below its high watermark", "life", int32(p), func(l *partition.Log) bool {
			return l.HighWatermark() == int64(len(want))
		})
	}
	groups := []uint64{c.isrPartition(1, "life", 0).Group, c.isrPartition(1, "life", 1).Group}
	if _, err := adm.DeleteTopics(testCtx(t), "life"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted topic's replicas and their data to go", func() bool {
		for id, n := range c.nodes {
			for _, gid := range groups {
				if n.replicaByGroup(gid) != nil {
					return false
				}
			}
			for p := range int32(2) {
				if _, err := os.Stat(n.logDir("life", p)); !errors.Is(err, os.ErrNotExist) {
					t.Logf("node %d still has %s", id, n.logDir("life", p))
					return false
				}
			}
		}
		return true
	})
}

// underReplicatedGauge reads raftq_under_replicated_partitions{mode=mode}
// from the node's registry, as a scrape would.
func underReplicatedGauge(t *testing.T, n *Node, mode string) float64 {
	t.Helper()
	mfs, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "raftq_under_replicated_partitions" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "mode" && l.GetValue() == mode {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no raftq_under_replicated_partitions{mode=%q}", mode)
	return 0
}

// An ISR topic takes compression.type and message.timestamp.type as a
// raft topic does: the leader recompresses and stamps each batch before
// it appends it, followers copy the bytes, and consumers read the append
// time.
func TestISR_LogAppendTimeAndCompression(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	mode, typ, zstd, minISR := coordinator.ModeISR, "LogAppendTime", "zstd", "2"
	res, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 3, map[string]*string{"replication.mode": &mode,
		"min.insync.replicas": &minISR, "message.timestamp.type": &typ, "compression.type": &zstd}, "isrlat")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	before := time.Now().Truncate(time.Millisecond)
	pr := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "isrlat", Value: []byte("a"), Timestamp: old},
		&kgo.Record{Topic: "isrlat", Value: []byte("b"), Timestamp: old})
	if err := pr.FirstErr(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for _, r := range consumeAll(t, c, "isrlat", 0, 2) {
		if r.Timestamp.Before(before) || r.Timestamp.After(after) || r.Attrs.TimestampType() != 1 {
			t.Errorf("record %q: timestamp %v of type %d, want the append time (type 1)", r.Value, r.Timestamp, r.Attrs.TimestampType())
		}
	}
	c.everyLog(t, "every replica to hold the batch", "isrlat", 0, func(l *partition.Log) bool { return l.HighWatermark() == 2 })
	for id, n := range c.nodes {
		if got := codecs(t, logOf(n.replicaFor("isrlat", 0)), 0); len(got) != 1 || got[0] != partition.CodecZstd {
			t.Errorf("node %d stores codecs %v, want one zstd batch", id, got)
		}
	}
}
