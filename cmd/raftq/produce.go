package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
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
	fs := newFlags(e, "produce", "TOPIC")
	cf := bindClientFlags(e, fs)
	pf := bindProducerFlags(fs)
	key := fs.String("key", "", "record key")
	headerFlags := fs.StringArray("header", nil, "record header key=value, given to every record (repeatable)")
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
	headers, err := parseHeaders(*headerFlags)
	if err != nil {
		return err
	}
	opts, err := pf.opts()
	if err != nil {
		return err
	}
	dials := &dialWatch{}
	cl, err := cf.connect(ctx, append(opts, kgo.DefaultProduceTopic(fs.Arg(0)), kgo.AllowAutoTopicCreation(), kgo.WithHooks(dials))...)
	if err != nil {
		return err
	}
	mk := func(v []byte) *kgo.Record {
		r := &kgo.Record{Value: v, Partition: pf.partition, Headers: headers}
		if *key != "" {
			r.Key = []byte(*key)
		}
		return r
	}
	if *rateFlag > 0 {
		return produceLoad(ctx, e, cl, mk, loadSpec{*rateFlag, *count, *duration, *size, pf.drain}, dials)
	}
	if err := produceLines(ctx, e, cl, mk, pf.drain); err != nil {
		return noTopic(fs.Arg(0), err)
	}
	return nil
}

// parseHeaders reads --header flags. The records share the slice: the
// client only reads it.
func parseHeaders(kvs []string) ([]kgo.RecordHeader, error) {
	var hs []kgo.RecordHeader
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--header %q: want key=value", kv)}
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs, nil
}

// produceLines sends each stdin line as a record, until the input or
// Ctrl-C ends, and fails on the first error.
func produceLines(ctx context.Context, e *env, cl *kgo.Client, mk func([]byte) *kgo.Record, drain time.Duration) error {
	w := newSendWindow(ctx, drain, cl, drainNote(e, ctx))
	var t tally
	var firstErr error
	var mu sync.Mutex
	in := readLines(e.stdin)
	var scanErr error
read:
	for ctx.Err() == nil { // select picks at random when a line is ready too
		select {
		case <-ctx.Done():
			break read
		case l, ok := <-in:
			if !ok {
				break read
			}
			if l.err != nil {
				scanErr = l.err
				break read
			}
			w.produce(mk(l.b), func(err error) {
				if failed := t.count(err); failed != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, failed)
					mu.Unlock()
				}
			})
		}
	}
	w.close()
	if scanErr != nil {
		return scanErr
	}
	fmt.Fprintf(e.stderr, "produced %s\n", count(t.ok.Load(), "record"))
	if n := t.unanswered.Load(); n > 0 {
		return unansweredError(n, drain)
	}
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// tally counts a producer's records by how they ended.
type tally struct{ ok, failed, unanswered atomic.Int64 }

// count notes one record's outcome and returns err if the record failed
// (was answered with an error).
func (t *tally) count(err error) error {
	switch {
	case err == nil:
		t.ok.Add(1)
	case unanswered(err):
		t.unanswered.Add(1)
	default:
		t.failed.Add(1)
		return err
	}
	return nil
}

// line is one line of input, or the error that ended the input.
type line struct {
	b   []byte
	err error
}

// readLines reads r line by line on a goroutine of its own, so that
// Ctrl-C ends a producer waiting on a terminal at once: the goroutine,
// blocked in the read, ends with the process.
func readLines(r io.Reader) <-chan line {
	out := make(chan line) // no read-ahead: a line may be 16 MiB
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			out <- line{b: append([]byte(nil), sc.Bytes()...)}
		}
		if err := sc.Err(); err != nil {
			out <- line{err: err}
		}
	}()
	return out
}

// drainNote tells the user, once, what a command that stopped sending
// still waits for, and how to stop waiting: the first Ctrl-C ends the
// sending and the second quits, so a drain that the input's end began
// takes two.
func drainNote(e *env, interrupt context.Context) func(left time.Duration) {
	var once sync.Once
	return func(left time.Duration) {
		once.Do(func() {
			quit := "Ctrl-C twice to quit"
			if interrupt.Err() != nil {
				quit = "Ctrl-C again to quit"
			}
			fmt.Fprintf(e.stderr, "\nwaiting up to %s more for the answers still outstanding (--drain-timeout; %s)\n", left.Round(time.Second), quit)
		})
	}
}

// unansweredError reports records whose answers did not come before the
// drain ended: they may or may not be in the log.
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
func produceLoad(ctx context.Context, e *env, cl *kgo.Client, mk func([]byte) *kgo.Record, l loadSpec, dials *dialWatch) error {
	sendCtx := ctx
	if l.duration > 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithTimeout(ctx, l.duration)
		defer cancel()
	}
	lim := rate.NewLimiter(rate.Limit(l.perSec), max(1, int(l.perSec/100)))
	w := newSendWindow(sendCtx, l.drain, cl, drainNote(e, ctx))
	var t tally
	value := make([]byte, l.size)
	done := make(chan struct{})
	go progress(e, &t.ok, &t.failed, l.size, dials, done)
	for i := int64(0); l.count == 0 || i < l.count; i++ {
		if lim.Wait(sendCtx) != nil {
			break
		}
		w.produce(mk(value), func(err error) { t.count(err) })
	}
	w.close()
	close(done)
	fmt.Fprintf(e.stderr, "\nproduced %s, %d failed\n", count(t.ok.Load(), "record"), t.failed.Load())
	if n := t.unanswered.Load(); n > 0 {
		return unansweredError(n, l.drain)
	}
	return nil
}

func progress(e *env, ok, failed *atomic.Int64, size int, dials *dialWatch, done <-chan struct{}) {
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
		down := ""
		if err := dials.failing(); n == last && err != "" {
			down = "  no broker reachable: " + err
		}
		fmt.Fprintf(e.stderr, "\r%6.0fs  %d records  %d/s  %.2f MB/s  %d failed%s   ",
			time.Since(start).Seconds(), n, n-last, float64((n-last)*int64(size))/1e6, failed.Load(), down)
		last = n
	}
}

// dialWatch remembers how the client's last dial ended, so that a
// progress line stuck at no records can say the brokers went away.
type dialWatch struct{ last atomic.Pointer[string] }

var _ kgo.HookBrokerConnect = (*dialWatch)(nil)

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (d *dialWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	d.last.Store(&msg)
}

// failing is the last dial's error, or "" if it succeeded.
func (d *dialWatch) failing() string {
	if p := d.last.Load(); p != nil {
		return *p
	}
	return ""
}
