package main

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"
)

// benchResult is what raftq bench reports.
type benchResult struct {
	Records int64 `json:"records"`
	Failed  int64 `json:"failed"`
	// Unanswered counts the records neither acknowledged nor failed when
	// --drain-timeout ran out after the run: their outcome is unknown.
	Unanswered  int64   `json:"unanswered,omitempty"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_sec"`
	MBPerS      float64 `json:"mb_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	P999ms      float64 `json:"p999_ms"`
	MaxMs       float64 `json:"max_ms"`
	RecordSize  int     `json:"record_size"`
	Acks        string  `json:"acks"`
	Compression string  `json:"compression"`
	TargetRate  float64 `json:"target_rate,omitempty"`
	// WarmupS and WarmupRecords, with --warmup, say what the figures
	// above leave out: the run's first seconds and the records sent then.
	WarmupS       float64 `json:"warmup_s,omitempty"`
	WarmupRecords int64   `json:"warmup_records,omitempty"`
	// Keys and TombstoneRatio, with --keys, say how the records were
	// keyed: uniformly over Keys distinct keys, that share of them
	// tombstones (counted at RecordSize in MBPerS all the same).
	Keys           int     `json:"keys,omitempty"`
	TombstoneRatio float64 `json:"tombstone_ratio,omitempty"`
	// Requests and the Request figures time the Produce requests sent
	// after the warm-up and answered (roundTrips; none with acks=0).
	Requests     int64   `json:"requests"`
	RequestP50ms float64 `json:"request_p50_ms"`
	RequestP99ms float64 `json:"request_p99_ms"`
	RequestMaxMs float64 `json:"request_max_ms"`
	// Setup is what the run was against (benchSetup): brokers, their
	// raftq settings, the topic's partitions, replication factor and mode.
	Setup map[string]string `json:"setup,omitempty"`
	// The transaction figures, with --txn-records: transactions of
	// TxnRecords records over TxnPartitions partitions, committed (the
	// records above are theirs) or not (failed, or unanswered when the
	// drain ended; Failed and Unanswered count their records), and the
	// commit latency, from a transaction's begin to its commit
	// acknowledged.
	TxnRecords     int     `json:"txn_records,omitempty"`
	TxnPartitions  int32   `json:"txn_partitions,omitempty"`
	Transactions   int64   `json:"transactions,omitempty"`
	FailedTxns     int64   `json:"failed_transactions,omitempty"`
	UnansweredTxns int64   `json:"unanswered_transactions,omitempty"`
	TxnsPerS       float64 `json:"transactions_per_sec,omitempty"`
	CommitP50ms    float64 `json:"commit_p50_ms,omitempty"`
	CommitP99ms    float64 `json:"commit_p99_ms,omitempty"`
	CommitMaxMs    float64 `json:"commit_max_ms,omitempty"`
	// Intervals, with --interval, splits the run by send time, so that a
	// stall (a leader change, a slow disk) shows when it happened.
	Intervals []benchInterval `json:"intervals,omitempty"`
}

// benchInterval is one slice of a run, by the records' send time.
type benchInterval struct {
	StartS float64 `json:"start_s"`
	Acked  int     `json:"acked"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

type benchFlags struct {
	topic      string
	partitions int32
	rf         int16
	size       int
	records    int64
	duration   time.Duration
	rate       float64
	producers  int
	jsonOut    bool
	compress   string
	interval   time.Duration
	warmup     time.Duration
	drain      time.Duration
	keys       *benchKeys // --keys (nil: records without keys)
	// txnRecords, with --txn-records, makes the run transactional:
	// transactions of that many records over txnPartitions partitions.
	txnRecords    int
	txnPartitions int32
	txnBackoff    time.Duration // kgo.ConcurrentTransactionsBackoff
}

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench", "")
	cf := bindClientFlags(e, fs)
	pf := bindProducerFlags(fs)
	b := &benchFlags{}
	fs.StringVar(&b.topic, "topic", "raftq-bench", "topic to produce to (created if missing)")
	fs.Int32Var(&b.partitions, "partitions", 6, "partitions when creating the topic")
	fs.Int16Var(&b.rf, "replication-factor", 3, "replication factor when creating the topic")
	configs := fs.StringArrayP("config", "c", nil, "topic config key=value when creating the topic (repeatable; an existing topic keeps its own), e.g. segment.bytes=1048576")
	fs.IntVar(&b.size, "record-size", 100, "value bytes per record")
	fs.Int64Var(&b.records, "records", 0, "records to send (0: run for --duration)")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "how long to run when --records is 0")
	fs.Float64Var(&b.rate, "rate", 0, "records/s to offer (0: as fast as the cluster takes them)")
	fs.IntVar(&b.producers, "producers", 1, "concurrent producer clients")
	fs.BoolVar(&b.jsonOut, "json", false, "print the result as JSON")
	fs.StringVar(&b.compress, "compression", "none", "batch compression: none, snappy, lz4 or zstd (values are random, so it saves little)")
	fs.DurationVar(&b.interval, "interval", 0, "also report latency per interval of send time (e.g. 1s), to see when a stall happened")
	fs.DurationVar(&b.warmup, "warmup", 0, "produce for this long first, at the same rate, without counting it (client start-up, connections, producer id); the run then measures --duration")
	keys := fs.Int("keys", 0, "key each record with one of this many distinct keys, drawn uniformly (0: no keys); with -c cleanup.policy=compact, to benchmark compaction")
	tombstones := fs.Float64("tombstone-ratio", 0, "with --keys, send this share of the records as tombstones (null values)")
	seed := fs.Uint64("seed", 1, "seed of the key draws (each producer draws its own stream from it)")
	fs.IntVar(&b.txnRecords, "txn-records", 0, "produce in transactions of this many records each (0: no transactions): begin, produce, commit, one transaction at a time per producer (each producer its own transactional id); reports transactions/s and commit latency, begin to commit acknowledged")
	fs.Int32Var(&b.txnPartitions, "txn-partitions", 1, "with --txn-records, spread each transaction's records over this many partitions (0 to N-1, in turn)")
	fs.DurationVar(&b.txnBackoff, "txn-backoff", 20*time.Millisecond, "with --txn-records, how long the client waits before asking again when the coordinator answers CONCURRENT_TRANSACTIONS (the previous transaction's markers still being written; kgo's ConcurrentTransactionsBackoff, 20ms by default as in kgo)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkTxnFlags(b, pf, func(name string) bool { return fs.Changed(name) }); err != nil {
		return err
	}
	bk, err := newBenchKeys(*keys, *tombstones, *seed)
	if err != nil {
		return err
	}
	b.keys = bk
	if b.producers < 1 || b.size < 0 || b.interval < 0 || b.warmup < 0 {
		return usageError{errors.New("--producers must be positive, --record-size, --interval and --warmup non-negative")}
	}
	if b.warmup > 0 && b.records > 0 {
		return usageError{errors.New("--warmup needs a run by --duration, not --records")}
	}
	cfgs, err := parseTopicConfigs(*configs)
	if err != nil {
		return err
	}
	opts, err := pf.opts()
	if err != nil {
		return err
	}
	codec, err := compressionOpt(b.compress)
	if err != nil {
		return err
	}
	if err := ensureTopic(ctx, cf, b.topic, b.partitions, b.rf, cfgs); err != nil {
		return err
	}
	b.drain = pf.drain
	setup, err := benchSetup(ctx, cf, b.topic)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil { // the figures still stand; only their setup is partial
		fmt.Fprintf(e.stderr, "raftq bench: %v; the result names only part of its setup\n", err)
	}
	run := bench
	if b.txnRecords > 0 {
		if err := checkTxnPartitions(b, setup); err != nil {
			return err
		}
		run = benchTxn
	}
	res, err := run(ctx, e, cf, append(opts, codec), b)
	if err != nil {
		return err
	}
	res.Setup = setup
	res.Acks, res.Compression = pf.acks, b.compress
	if b.keys != nil {
		res.Keys, res.TombstoneRatio = b.keys.n, b.keys.tombstones
	}
	if err := printBench(e, res, b.jsonOut); err != nil {
		return err
	}
	if res.Unanswered > 0 {
		return unansweredError(res.Unanswered, b.drain)
	}
	return nil
}

func ensureTopic(ctx context.Context, cf *clientFlags, topic string, parts int32, rf int16, cfgs map[string]*string) error {
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.CreateTopic(ctx, parts, rf, cfgs, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create bench topic %s: %w", topic, errMsg(err, res.ErrMessage))
	}
	return nil
}

// bench runs the producers and gathers per-record latency, measured from
// the Produce call to its acknowledgement.
func bench(ctx context.Context, e *env, cf *clientFlags, opts []kgo.Opt, b *benchFlags) (benchResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if b.records == 0 {
		runCtx, cancel = context.WithTimeout(ctx, b.warmup+b.duration)
		defer cancel()
	}
	var lim *rate.Limiter
	if b.rate > 0 {
		// A 20 ms burst lets the offered rate hold when the scheduler is late.
		lim = rate.NewLimiter(rate.Limit(b.rate), max(1, int(b.rate/50)))
	}
	var sent atomic.Int64
	lat := &latencies{start: time.Now().Add(b.warmup)}
	trips := &roundTrips{start: lat.start}
	note := drainNote(e, ctx)
	var wg sync.WaitGroup
	for range b.producers {
		cl, err := cf.client(append(opts, kgo.DefaultProduceTopic(b.topic), kgo.MaxBufferedRecords(1<<16), kgo.WithHooks(trips))...)
		if err != nil {
			cancel()
			wg.Wait()
			return benchResult{}, err
		}
		w := newSendWindow(runCtx, b.drain, cl, note)
		wg.Go(func() {
			produceBench(runCtx, w, b, lim, &sent, lat)
			w.close()
		})
	}
	wg.Wait()
	elapsed := max(time.Since(lat.start), time.Millisecond) // a run cut short in its warm-up counts nothing
	res := lat.result(elapsed, b)
	trips.fill(&res)
	return res, nil
}

func produceBench(ctx context.Context, w *sendWindow, b *benchFlags, lim *rate.Limiter, sent *atomic.Int64, lat *latencies) {
	values := newValuePool(b.size)
	keys := b.keys.stream()
	step := limiterStep(lim)
	for ctx.Err() == nil {
		if lim != nil && lim.WaitN(ctx, step) != nil {
			return
		}
		for range step {
			if b.records > 0 && sent.Add(1) > b.records {
				return
			}
			rec := &kgo.Record{Value: values.next()}
			keys.fill(rec)
			began := time.Now()
			w.produce(rec, func(err error) {
				lat.record(began, err)
			})
		}
	}
}

// limiterStep is how many records a producer sends per wait on the
// limiter: a millisecond's worth. Waiting per record would wake the
// producer every few microseconds at high rates, and those timer wake-ups
// cost the client more CPU than the records (taken from the cluster under
// test when both share a machine).
func limiterStep(lim *rate.Limiter) int {
	if lim == nil {
		return 1
	}
	return max(1, min(lim.Burst(), int(float64(lim.Limit())/1000)))
}

// valuePool hands out record values cut from random bytes, so that
// neither compression nor the disk sees cheap, repetitive data.
type valuePool struct {
	buf  []byte
	size int
	off  int
}

func newValuePool(size int) *valuePool {
	buf := make([]byte, max(1<<20, 4*size))
	_, _ = crand.Read(buf)
	return &valuePool{buf: buf, size: size}
}

func (p *valuePool) next() []byte {
	if p.off+p.size > len(p.buf) {
		p.off = 0
	}
	v := p.buf[p.off : p.off+p.size : p.off+p.size]
	p.off += 1 + p.size/2 // overlapping windows still differ
	return v
}

func compressionOpt(name string) (kgo.Opt, error) {
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	c, ok := codecs[name]
	if !ok {
		return nil, usageError{fmt.Errorf("--compression %q: want none, snappy, lz4 or zstd", name)}
	}
	return kgo.ProducerBatchCompression(c), nil
}

// latencies collects every acknowledged record's latency; those sent
// before start (the warm-up) are only counted.
type latencies struct {
	start      time.Time
	mu         sync.Mutex
	samples    blocks[sample]
	warm       int64 // acknowledged in the warm-up
	failed     int64 // failed after it
	unanswered int64 // after it, still unanswered when the drain ended
}

// sample is one acknowledged record: when it was sent, from start, and
// how long its acknowledgement took, in nanoseconds.
type sample struct{ at, ns int64 }

func (l *latencies) add(sent time.Time, d time.Duration) {
	at := sent.Sub(l.start)
	l.mu.Lock()
	defer l.mu.Unlock()
	if at < 0 {
		l.warm++
		return
	}
	l.samples.add(sample{at: int64(at), ns: int64(d)})
}

// record notes a record sent at began as acknowledged now (err nil),
// unanswered when the drain ended (sendWindow), or failed; one sent in the
// warm-up counts as none of these.
func (l *latencies) record(began time.Time, err error) {
	if err == nil {
		l.add(began, time.Since(began))
		return
	}
	if began.Before(l.start) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if unanswered(err) {
		l.unanswered++
	} else {
		l.failed++
	}
}

// intervals splits the latencies by send time; l.mu held.
func (l *latencies) intervals(every time.Duration) []benchInterval {
	var buckets [][]int64
	l.samples.each(func(s sample) {
		k := int(s.at / int64(every))
		for len(buckets) <= k {
			buckets = append(buckets, nil)
		}
		buckets[k] = append(buckets[k], s.ns)
	})
	out := make([]benchInterval, len(buckets))
	for k, ns := range buckets {
		slices.Sort(ns)
		out[k] = benchInterval{StartS: (time.Duration(k) * every).Seconds(), Acked: len(ns),
			P50ms: percentile(ns, 0.50), P99ms: percentile(ns, 0.99), MaxMs: percentile(ns, 1)}
	}
	return out
}

// percentile of sorted nanoseconds, in milliseconds.
func percentile(sorted []int64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	return float64(sorted[min(n-1, int(p*float64(n)))]) / 1e6
}

func (l *latencies) result(elapsed time.Duration, b *benchFlags) benchResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	var iv []benchInterval
	if b.interval > 0 {
		iv = l.intervals(b.interval)
	}
	ns := sortedValues(&l.samples, func(s sample) int64 { return s.ns })
	n := int64(len(ns))
	pct := func(p float64) float64 { return percentile(ns, p) }
	secs := elapsed.Seconds()
	return benchResult{
		Intervals: iv,
		Records:   n, Failed: l.failed, Unanswered: l.unanswered, Seconds: secs,
		RecordsPerS: float64(n) / secs, MBPerS: float64(n) * float64(b.size) / secs / 1e6,
		P50ms: pct(0.50), P99ms: pct(0.99), P999ms: pct(0.999), MaxMs: pct(1),
		RecordSize: b.size, TargetRate: b.rate,
		WarmupS: b.warmup.Seconds(), WarmupRecords: l.warm,
	}
}

func printBench(e *env, r benchResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(r)
	}
	if r.TxnRecords > 0 {
		printTxnBench(e, r)
	} else {
		fmt.Fprintf(e.stdout, "%d records of %d B in %.1fs (acks=%s, compression=%s): %.0f records/s, %.1f MB/s, %d failed\n",
			r.Records, r.RecordSize, r.Seconds, r.Acks, r.Compression, r.RecordsPerS, r.MBPerS, r.Failed)
		fmt.Fprintf(e.stdout, "latency p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms\n", r.P50ms, r.P99ms, r.P999ms, r.MaxMs)
	}
	if r.Keys > 0 {
		fmt.Fprintf(e.stdout, "keys: %d distinct, drawn uniformly; %.1f%% tombstones\n", r.Keys, 100*r.TombstoneRatio)
	}
	if r.Unanswered > 0 {
		fmt.Fprintf(e.stdout, "%d records still unanswered when the drain timed out (not counted above)\n", r.Unanswered)
	}
	if r.Requests > 0 {
		fmt.Fprintf(e.stdout, "%d produce requests: round trip p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", r.Requests, r.RequestP50ms, r.RequestP99ms, r.RequestMaxMs)
	}
	if len(r.Setup) > 0 {
		fmt.Fprintf(e.stdout, "setup: %s\n", setupLine(r.Setup))
	}
	if r.WarmupS > 0 {
		fmt.Fprintf(e.stdout, "after a %.1fs warm-up (%d records, not counted above)\n", r.WarmupS, r.WarmupRecords)
	}
	for _, iv := range r.Intervals {
		fmt.Fprintf(e.stdout, "  sent at %6.1fs: %8d acked  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", iv.StartS, iv.Acked, iv.P50ms, iv.P99ms, iv.MaxMs)
	}
	return nil
}
