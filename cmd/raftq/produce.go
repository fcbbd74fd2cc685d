package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"
)

// producerFlags are the producer settings shared by produce and bench.
type producerFlags struct {
	acks       string
	idempotent bool
	linger     time.Duration
	partition  int32
	drain      time.Duration
}

func bindProducerFlags(fs *pflag.FlagSet) *producerFlags {
	p := &producerFlags{}
	fs.StringVar(&p.acks, "acks", "all", "all, 1 or 0")
	fs.BoolVar(&p.idempotent, "idempotent", true, "idempotent producer (needs --acks all)")
	fs.DurationVar(&p.linger, "linger", 0, "how long the client waits to fill a batch")
	fs.Int32Var(&p.partition, "partition", -1, "send every record to this partition (default: by key, else sticky)")
	fs.DurationVar(&p.drain, "drain-timeout", 30*time.Second, "once the last record is sent, how long to wait for the records still unanswered (the client retries each until then); those left are reported, and the exit status is 1")
	return p
}

func (p *producerFlags) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch p.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		return nil, usageError{fmt.Errorf("--acks %q: want all, 1 or 0", p.acks)}
	}
	if p.drain <= 0 {
		return nil, usageError{fmt.Errorf("--drain-timeout %s: want a positive duration", p.drain)}
	}
	if !p.idempotent || p.acks != "all" && p.acks != "-1" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	opts = append(opts, kgo.ProducerLinger(p.linger))
	if p.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts, nil
}

func runProduce(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "produce")
	cf := bindClientFlags(fs)
	pf := bindProducerFlags(fs)
	key := fs.String("key", "", "record key")
	rateFlag := fs.Float64("rate", 0, "generate load at this many records/s instead of reading stdin")
	count := fs.Int64("count", 0, "with --rate: stop after this many records (0: until --duration or Ctrl-C)")
	duration := fs.Duration("duration", 0, "with --rate: stop after this long")
	size := fs.Int("size", 100, "with --rate: value size in bytes")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one topic")}
	}
	opts, err := pf.opts()
	if err != nil {
		return err
	}
	cl, err := cf.client(append(opts, kgo.DefaultProduceTopic(fs.Arg(0)), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		return err
	}
	defer cl.Close()
	mk := func(v []byte) *kgo.Record {
		r := &kgo.Record{Value: v, Partition: pf.partition}
		if *key != "" {
			r.Key = []byte(*key)
		}
		return r
	}
	if *rateFlag > 0 {
		return produceLoad(ctx, e, cl, mk, loadSpec{*rateFlag, *count, *duration, *size, pf.drain})
	}
	return produceLines(ctx, e, cl, mk, pf.drain)
}

// produceLines sends each stdin line as a record and fails on the first
// error.
func produceLines(ctx context.Context, e *env, cl *kgo.Client, mk func([]byte) *kgo.Record, drainFor time.Duration) error {
	sc := bufio.NewScanner(e.stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var n atomic.Int64
	var firstErr error
	var mu sync.Mutex
	for sc.Scan() {
		v := append([]byte(nil), sc.Bytes()...)
		cl.Produce(ctx, mk(v), func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
				return
			}
			n.Add(1)
		})
	}
	left := drain(cl, drainFor)
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "produced %d records\n", n.Load())
	if left > 0 {
		return unansweredError(left, drainFor)
	}
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// drain waits up to d for the records cl still holds to be answered
// (acknowledged or failed) and returns how many were not. kgo retries a
// record until the cluster answers it, so a client whose cluster stopped
// answering would otherwise wait for ever. Ctrl-C ends the sending, not
// this wait: it is bounded anyway.
func drain(cl *kgo.Client, d time.Duration) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if cl.Flush(ctx) == nil {
		return 0
	}
	return cl.BufferedProduceRecords()
}

// unansweredError reports records drain gave up on: they may or may not
// be in the log.
func unansweredError(n int64, d time.Duration) error {
	return fmt.Errorf("%d records still unanswered %s after the last was sent (--drain-timeout): whether they were written is unknown", n, d)
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// loadSpec is what produce --rate generates.
type loadSpec struct {
	perSec   float64
	count    int64         // 0: no limit
	duration time.Duration // 0: until Ctrl-C
	size     int
	drain    time.Duration
}

// produceLoad sends generated records at a steady rate with a progress
// line every second.
func produceLoad(ctx context.Context, e *env, cl *kgo.Client, mk func([]byte) *kgo.Record, l loadSpec) error {
	sendCtx := ctx
	if l.duration > 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithTimeout(ctx, l.duration)
		defer cancel()
	}
	lim := rate.NewLimiter(rate.Limit(l.perSec), max(1, int(l.perSec/100)))
	var ok, failed atomic.Int64
	value := make([]byte, l.size)
	done := make(chan struct{})
	go progress(e, &ok, &failed, l.size, done)
	for i := int64(0); l.count == 0 || i < l.count; i++ {
		if lim.Wait(sendCtx) != nil {
			break
		}
		cl.Produce(context.Background(), mk(value), func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			ok.Add(1)
		})
	}
	left := drain(cl, l.drain)
	close(done)
	fmt.Fprintf(e.stderr, "\nproduced %d records, %d failed\n", ok.Load(), failed.Load())
	if left > 0 {
		return unansweredError(left, l.drain)
	}
	return nil
}

func progress(e *env, ok, failed *atomic.Int64, size int, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start, last := time.Now(), int64(0)
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		n := ok.Load()
		fmt.Fprintf(e.stderr, "\r%6.0fs  %d records  %d/s  %.2f MB/s  %d failed   ",
			time.Since(start).Seconds(), n, n-last, float64((n-last)*int64(size))/1e6, failed.Load())
		last = n
	}
}
