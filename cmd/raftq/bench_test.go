package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"

	"github.com/raftq/raftq/chaos"
)

// --interval splits the latencies by when each record was sent, so that a
// stall shows in the second it happened, while the run's percentiles
// still cover every record.
func TestBenchIntervals(t *testing.T) {
	start := time.Unix(1000, 0)
	l := &latencies{start: start}
	for i := range 100 { // second 0: 100 records of 1 ms
		l.add(start.Add(time.Duration(i)*time.Millisecond), time.Millisecond)
	}
	l.add(start.Add(1500*time.Millisecond), 2*time.Second) // second 1: one stalled record
	for i := range 10 {                                    // second 2: 10 records of 3 ms
		l.add(start.Add(2*time.Second+time.Duration(i)*time.Millisecond), 3*time.Millisecond)
	}
	res := l.result(3*time.Second, &benchFlags{size: 100, interval: time.Second})
	if res.Records != 111 || res.MaxMs != 2000 {
		t.Errorf("run: %d records, max %.0f ms; want 111 and 2000", res.Records, res.MaxMs)
	}
	want := []benchInterval{
		{StartS: 0, Acked: 100, P50ms: 1, P99ms: 1, MaxMs: 1},
		{StartS: 1, Acked: 1, P50ms: 2000, P99ms: 2000, MaxMs: 2000},
		{StartS: 2, Acked: 10, P50ms: 3, P99ms: 3, MaxMs: 3},
	}
	if len(res.Intervals) != len(want) {
		t.Fatalf("intervals %+v, want %+v", res.Intervals, want)
	}
	for i, iv := range res.Intervals {
		if iv != want[i] {
			t.Errorf("interval %d: %+v, want %+v", i, iv, want[i])
		}
	}
	if res := l.result(3*time.Second, &benchFlags{size: 100}); res.Intervals != nil {
		t.Errorf("intervals without --interval: %+v", res.Intervals)
	}
}

// The bench waits on its rate limiter once per millisecond's worth of
// records, never more than the burst, and per record when unlimited or slow.
func TestBenchLimiterStep(t *testing.T) {
	for _, c := range []struct {
		lim  *rate.Limiter
		want int
	}{
		{nil, 1},
		{rate.NewLimiter(150000, 3000), 150},
		{rate.NewLimiter(150000, 20), 20},
		{rate.NewLimiter(10, 1), 1},
	} {
		if got := limiterStep(c.lim); got != c.want {
			t.Errorf("limiterStep(%v) = %d, want %d", c.lim, got, c.want)
		}
	}
}

// --warmup sends from the start but counts only what was sent after it,
// in the percentiles, the records and the rate; it needs a timed run.
func TestBenchWarmup(t *testing.T) {
	start := time.Unix(1000, 0)
	l := &latencies{start: start.Add(2 * time.Second)}
	for i := range 5 { // warm-up: slow records from a cold client
		l.add(start.Add(time.Duration(i)*time.Millisecond), time.Second)
	}
	for i := range 10 {
		l.add(start.Add(2*time.Second+time.Duration(i)*time.Millisecond), time.Millisecond)
	}
	l.record(start, errors.New("no leader yet"))                // a warm-up failure
	l.record(start.Add(3*time.Second), errors.New("timed out")) // counted
	res := l.result(time.Second, &benchFlags{size: 100, warmup: 2 * time.Second})
	if res.Failed != 1 {
		t.Errorf("%d failures counted, want 1 (not the warm-up's)", res.Failed)
	}
	if res.Records != 10 || res.MaxMs != 1 || res.RecordsPerS != 10 || res.WarmupRecords != 5 || res.WarmupS != 2 {
		t.Errorf("records %d, max %v ms, %v records/s, warm-up %d records in %vs; want 10, 1, 10, 5 in 2s",
			res.Records, res.MaxMs, res.RecordsPerS, res.WarmupRecords, res.WarmupS)
	}
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	for _, bad := range [][]string{{"--warmup", "1s", "--records", "10"}, {"--warmup", "-1s"}} {
		if code := run(context.Background(), e, append([]string{"bench", "--brokers", "127.0.0.1:1"}, bad...)); code != 2 {
			t.Errorf("raftq bench %v: exit %d, want 2 (usage)", bad, code)
		}
	}
}

// A block, once allocated, is never copied or grown, so a long run
// allocates 512 KiB at a time rather than doubling one slice into tens of
// MiB in the middle of a GC cycle; the values come back in order.
func TestBlocks_AddNeverMoves(t *testing.T) {
	var b blocks[int64]
	b.add(0)
	first := &b.bs[0][0]
	n := 3*blockLen + 5
	for i := 1; i < n; i++ {
		b.add(int64(i))
	}
	if len(b.bs) != 4 || &b.bs[0][0] != first || b.len() != n {
		t.Fatalf("%d blocks of %d values, first moved %v; want 4 of %d, the first in place", len(b.bs), b.len(), &b.bs[0][0] != first, n)
	}
	for i, blk := range b.bs {
		if cap(blk) != blockLen {
			t.Errorf("block %d: cap %d, want %d", i, cap(blk), blockLen)
		}
	}
	next := int64(0)
	b.each(func(v int64) {
		if v != next {
			t.Fatalf("value %d where %d was added", v, next)
		}
		next++
	})
}

// Latencies over several blocks give the same figures as over one.
func TestLatencies_ResultAcrossBlocks(t *testing.T) {
	start := time.Unix(1000, 0)
	l := &latencies{start: start}
	n := 2*blockLen + 7
	for i := range n {
		l.add(start.Add(time.Duration(i)*time.Microsecond), time.Duration(1+i%100)*time.Millisecond)
	}
	res := l.result(time.Second, &benchFlags{size: 100, interval: time.Second})
	if res.Records != int64(n) || res.MaxMs != 100 || res.P50ms != 50 || len(res.Intervals) != 1 || res.Intervals[0].Acked != n {
		t.Errorf("records %d, max %v, p50 %v, intervals %+v; want %d, 100, 50, one of %d", res.Records, res.MaxMs, res.P50ms, res.Intervals, n, n)
	}
}

// Only answered Produce requests written after the warm-up count as
// round trips: not other APIs, not failed ones, not acks=0 writes (kgo
// reports those with nothing read), not the warm-up's.
func TestRoundTrips_OnBrokerE2E(t *testing.T) {
	r := &roundTrips{start: time.Now().Add(-time.Second)}
	ok := kgo.BrokerE2E{BytesWritten: 100, BytesRead: 50, TimeToWrite: time.Millisecond, TimeToRead: 2 * time.Millisecond}
	r.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Produce), ok)
	r.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Metadata), ok)
	failed := ok
	failed.ReadErr = errors.New("connection reset")
	r.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Produce), failed)
	acks0 := kgo.BrokerE2E{BytesWritten: 100, TimeToWrite: time.Millisecond}
	r.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Produce), acks0)
	warm := ok
	warm.ReadWait = 2 * time.Second // written before start
	r.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Produce), warm)
	var res benchResult
	r.fill(&res)
	if res.Requests != 1 || res.RequestP50ms != 3 || res.RequestMaxMs != 3 {
		t.Errorf("%d requests, p50 %v ms, max %v ms; want the one answered Produce request of 3 ms", res.Requests, res.RequestP50ms, res.RequestMaxMs)
	}
}

// The brokers' raftq settings come out as one value when they agree and
// as "mixed" with each value when they do not ("?" where a broker did not
// report the key); a broker that did not answer and other configs stay
// out, and the line lists them in key order.
func TestBenchSetup_RaftqSettings(t *testing.T) {
	broker := func(name string, kv ...string) kadm.ResourceConfig {
		rc := kadm.ResourceConfig{Name: name}
		for i := 0; i < len(kv); i += 2 {
			v := kv[i+1]
			rc.Configs = append(rc.Configs, kadm.Config{Key: kv[i], Value: &v})
		}
		return rc
	}
	down := broker("4", "raftq.fsync", "never")
	down.Err = errors.New("no answer")
	got := raftqSettings(kadm.ResourceConfigs{
		broker("1", "raftq.fsync", "always", "raftq.wal", "shared", "broker.id", "1", "raftq.async.writes", "false"),
		broker("2", "raftq.fsync", "always", "raftq.wal", "group", "broker.id", "2"),
		broker("3", "raftq.fsync", "always", "raftq.wal", "shared", "broker.id", "3"),
		down,
	})
	want := map[string]string{"raftq.fsync": "always", "raftq.wal": "mixed: group,shared", "raftq.async.writes": "mixed: ?,false"}
	if !maps.Equal(got, want) {
		t.Errorf("raftqSettings = %v, want %v", got, want)
	}
	if line := setupLine(map[string]string{"brokers": "3", "raftq.wal": "shared", "topic.partitions": "6"}); line != "brokers=3 raftq.wal=shared topic.partitions=6" {
		t.Errorf("setupLine = %q", line)
	}
}

// The setup names the effective durability: a raft topic's is the nodes'
// --fsync, an isr topic's its flush configs (--fsync does not govern it).
func TestDurability(t *testing.T) {
	never := flushNever
	for _, c := range []struct {
		cfgs  map[string]string
		fsync string
		want  string
	}{
		{map[string]string{"replication.mode": "raft", "flush.messages": never}, "always", "raft:fsync-always"},
		{map[string]string{"replication.mode": "raft"}, "never", "raft:fsync-never"},
		{nil, "", "raft:fsync-unknown"},
		{map[string]string{"replication.mode": "raft"}, "mixed: always,never", "raft:fsync-mixed:always,never"},
		{map[string]string{"replication.mode": "isr", "flush.messages": never, "flush.ms": never}, "always", "isr:flush-never(kafka-default)"},
		{map[string]string{"replication.mode": "isr", "flush.messages": "1", "flush.ms": never}, "never", "isr:flush.messages=1"},
		{map[string]string{"replication.mode": "isr", "flush.messages": "100", "flush.ms": "1000"}, "always", "isr:flush.messages=100,flush.ms=1000"},
	} {
		if got := durability(c.cfgs, c.fsync); got != c.want {
			t.Errorf("durability(%v, %q) = %q, want %q", c.cfgs, c.fsync, got, c.want)
		}
	}
	isr := topicReplication(map[string]string{"replication.mode": "isr", "min.insync.replicas": "2", "unclean.leader.election.enable": "false", "retention.ms": "1"})
	if len(isr) != 3 || isr["topic.min.insync.replicas"] != "2" || isr["topic.unclean.leader.election.enable"] != "false" {
		t.Errorf("an isr topic's setup %v", isr)
	}
	if raft := topicReplication(map[string]string{"replication.mode": "raft", "min.insync.replicas": "1"}); len(raft) != 1 {
		t.Errorf("a raft topic's setup %v, want its mode alone", raft)
	}
}

// --keys draws each record's key uniformly from that many, padded to one
// width, with --tombstone-ratio of the values null; each producer has
// its own stream of --seed, the same on every run. Bad flags are usage
// errors.
func TestBenchKeys(t *testing.T) {
	for _, bad := range []struct {
		n     int
		ratio float64
	}{{-1, 0}, {10, 1.5}, {10, -0.1}, {0, 0.5}} {
		var ue usageError
		if _, err := newBenchKeys(bad.n, bad.ratio, 1); !errors.As(err, &ue) {
			t.Errorf("--keys %d --tombstone-ratio %g: %v, want a usage error", bad.n, bad.ratio, err)
		}
	}
	none, err := newBenchKeys(0, 0, 1)
	if err != nil || none != nil {
		t.Fatalf("no --keys: %v %v", none, err)
	}
	rec := &kgo.Record{Value: []byte("v")}
	none.stream().fill(rec)
	if rec.Key != nil || rec.Value == nil {
		t.Errorf("without --keys the record became %+v", rec)
	}

	draw := func(k *benchKeys, s *keyStream, n int) (keys []string, tombstones int) {
		for range n {
			rec := &kgo.Record{Value: []byte("v")}
			s.fill(rec)
			if len(rec.Key) != k.width {
				t.Fatalf("key %q, want %d digits", rec.Key, k.width)
			}
			keys = append(keys, string(rec.Key))
			if rec.Value == nil {
				tombstones++
			}
		}
		return keys, tombstones
	}
	k, err := newBenchKeys(1000, 0.25, 7)
	if err != nil {
		t.Fatal(err)
	}
	first, second := k.stream(), k.stream()
	a, tomb := draw(k, first, 100_000)
	counts := map[string]int{}
	for _, key := range a {
		counts[key]++
	}
	if len(counts) != 1000 || counts["000"] == 0 || counts["999"] == 0 {
		t.Errorf("%d distinct keys drawn (000: %d, 999: %d), want all 1000", len(counts), counts["000"], counts["999"])
	}
	for key, c := range counts {
		if c < 60 || c > 140 { // 100 expected; a uniform draw stays well inside
			t.Errorf("key %s drawn %d times of 100000, want about 100", key, c)
		}
	}
	if tomb < 24_000 || tomb > 26_000 {
		t.Errorf("%d tombstones of 100000, want about 25000", tomb)
	}
	b, _ := draw(k, second, 100)
	again, _ := newBenchKeys(1000, 0.25, 7)
	c, _ := draw(again, again.stream(), 100)
	if slices.Equal(a[:100], b) || !slices.Equal(a[:100], c) {
		t.Errorf("streams: the second producer's equals the first's: %v; the same seed repeats them: %v", slices.Equal(a[:100], b), slices.Equal(a[:100], c))
	}
}

// A transactional run (--txn-records) needs acks=all, an idempotent
// producer and whole transactions; --txn-partitions needs --txn-records,
// and record-run flags (--rate, --keys, --interval) are refused: all
// usage errors, found before any broker is asked.
func TestBenchTxnFlags(t *testing.T) {
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	for _, bad := range [][]string{
		{"--txn-records", "-1"},
		{"--txn-partitions", "2"},
		{"--txn-backoff", "5ms"},
		{"--txn-records", "10", "--txn-backoff", "0s"},
		{"--txn-records", "10", "--txn-partitions", "0"},
		{"--txn-records", "10", "--records", "15"},
		{"--txn-records", "10", "--acks", "1"},
		{"--txn-records", "10", "--idempotent=false"},
		{"--txn-records", "10", "--rate", "100"},
		{"--txn-records", "10", "--keys", "5"},
		{"--txn-records", "10", "--interval", "1s"},
	} {
		if code := run(context.Background(), e, append([]string{"bench", "--brokers", "127.0.0.1:1"}, bad...)); code != 2 {
			t.Errorf("raftq bench %v: exit %d, want 2 (usage)", bad, code)
		}
	}
}

// benchTxnRun runs a short transactional `raftq bench` against c (from
// TestE2E_Bench, on its cluster): three transactions of 100 records over
// three partitions, from two producers. It must report them committed,
// and a read_committed consumer must find exactly their 300 records: the
// partitions' end offsets then hold those and one marker per transaction
// and partition, nothing else.
func benchTxnRun(t *testing.T, c *chaos.Cluster) {
	bs := strings.Join(seeds(c), ",")
	const txns, per, parts = 3, 100, 3
	out := cli(t, 0, "", "bench", "--topic", "txn", "--partitions", strconv.Itoa(parts), "--records", strconv.Itoa(txns*per),
		"--txn-records", strconv.Itoa(per), "--txn-partitions", strconv.Itoa(parts), "--producers", "2", "--json", "-b", bs)
	var res benchResult
	if err := json.Unmarshal([]byte(out.stdout), &res); err != nil {
		t.Fatalf("bench --txn-records --json printed %q: %v", out.stdout, err)
	}
	if res.Transactions != txns || res.Records != txns*per || res.FailedTxns != 0 || res.Failed != 0 ||
		res.TxnRecords != per || res.TxnPartitions != parts || res.TxnsPerS <= 0 || res.CommitP50ms <= 0 || res.CommitMaxMs < res.CommitP99ms {
		t.Errorf("bench --txn-records: %+v; want %d transactions of %d records over %d partitions, none failed, commit latencies timed", res, txns, per, parts)
	}
	// More partitions than the topic has is a usage error.
	cli(t, 2, "", "bench", "--topic", "txn", "--records", "100", "--txn-records", "100", "--txn-partitions", "4", "-b", bs)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := e2eClient(t, c, kgo.ConsumeTopics("txn"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	read := 0
	for read < txns*per {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read %d records of the bench's %d before the deadline", read, txns*per)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		read += fs.NumRecords()
	}
	want := int64(txns*per + txns*parts)
	waitFor(t, 30*time.Second, "the bench topic's end offsets", func(ctx context.Context) bool {
		var sum int64
		for p := range int32(parts) {
			sum += endOffset(ctx, t, cl, "txn", p).Offset
		}
		if sum > want {
			t.Fatalf("topic txn's end offsets sum to %d: more than %d records and %d markers", sum, txns*per, txns*parts)
		}
		return sum == want
	})
}
