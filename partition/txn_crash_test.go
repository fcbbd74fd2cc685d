package partition

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/raftq/raftq/internal/vfs"
)

// txnCrashPoints are the Log's crash points a transaction crash run stops
// at: the ones around the files that carry transaction state.
var txnCrashPoints = []string{
	"sync-segment", "sync-dir", "checkpoint-tmp-written", "truncate-checkpointed",
	"truncate-segment-removed", "roll-indexes-written", "roll-segment-created",
	"advance-segment-removed",
}

// txnModelBatch is one single-record batch of the model: plain ('p'),
// transactional data ('d'), or a COMMIT ('c') or ABORT ('a') marker.
type txnModelBatch struct {
	kind byte
	pid  int64
}

// txnCrashRun drives a Log on a vfs.Mem through transactional appends
// from interleaved producers, commits and aborts (some without a
// transaction), syncs, rolls, truncations, start moves and reopens,
// crashes it, and checks the recovered LSO, open transactions and aborted
// index against a model replaying every batch the log holds.
type txnCrashRun struct {
	t       *testing.T
	rng     *rand.Rand
	fs      *vfs.Mem
	dir     string
	l       *Log
	target  string
	left    int
	batches []txnModelBatch // by offset, the ones below the start too
	durable int64           // synced and not truncated since
}

func (c *txnCrashRun) config() Config {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes, cfg.IndexIntervalBytes = 1<<10, 1<<10, 256
	cfg.FS = c.fs
	cfg.crashPoint = func(name string) {
		if c.target != "" && name == c.target {
			if c.left--; c.left == 0 {
				panic(crashNow{})
			}
		}
	}
	return cfg
}

func (c *txnCrashRun) open() {
	c.target = ""
	l, err := Open(c.dir, c.config())
	if err != nil {
		c.t.Fatalf("Open: %v", err)
	}
	c.l = l
}

func TestLog_TransactionsCrashRecovery(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		c := &txnCrashRun{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 26)), fs: vfs.NewMem(), dir: "/p"}
		c.open()
		for round := range 6 {
			c.target, c.left = txnCrashPoints[c.rng.IntN(len(txnCrashPoints))], 1+c.rng.IntN(3)
			c.runUntilCrash(40 + c.rng.IntN(60))
			abandon(c.l)
			c.fs.Crash(c.rng)
			c.open()
			c.verify(fmt.Sprintf("seed %d round %d (crash at %s)", seed, round, c.target))
		}
		if err := c.l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *txnCrashRun) runUntilCrash(steps int) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(crashNow); !ok {
				panic(p)
			}
		}
	}()
	for range steps {
		c.step()
	}
}

func (c *txnCrashRun) step() {
	l, t := c.l, c.t
	switch n := c.rng.IntN(100); {
	case n < 70:
		c.append()
	case n < 80:
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		c.durable = l.EndOffset()
		if err := l.SetHighWatermark(c.durable); err != nil {
			t.Fatal(err)
		}
	case n < 85:
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	case n < 90:
		start, end := l.StartOffset(), l.EndOffset()
		at := start + c.rng.Int64N(end-start+1)
		if _, err := l.Truncate(at); err != nil {
			t.Fatal(err)
		}
		c.batches = c.batches[:at]
		c.durable = min(c.durable, at)
	case n < 95:
		start, end := l.StartOffset(), l.EndOffset()
		if err := l.AdvanceStart(start + c.rng.Int64N(end-start+1)); err != nil {
			t.Fatal(err)
		}
	default:
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		c.durable = int64(len(c.batches))
		c.open()
		c.verify("clean reopen")
	}
}

func (c *txnCrashRun) append() {
	pid := 1 + c.rng.Int64N(3)
	var b []byte
	m := txnModelBatch{pid: pid}
	switch n := c.rng.IntN(20); {
	case n < 4:
		m.kind, b = 'p', plainBatch(c.t, "plain")
	case n < 13:
		m.kind, b = 'd', txnBatch(c.t, pid, 0, 0, "txn")
	case n < 17:
		m.kind, b = 'a', abortMarker(pid, 0)
	default:
		m.kind, b = 'c', commitMarker(pid, 0)
	}
	base, _ := mustAppend(c.t, c.l, b, 0)
	if base != int64(len(c.batches)) {
		c.t.Fatalf("appended at %d, model end %d", base, len(c.batches))
	}
	c.batches = append(c.batches, m)
}

// modelTxns replays the model's batches: the transactions open at the
// end and the aborted ones, in marker order.
func modelTxns(bs []txnModelBatch) (open map[int64]int64, aborted []AbortedTxn) {
	open = map[int64]int64{}
	for off, b := range bs {
		o := int64(off)
		first, ok := open[b.pid]
		switch {
		case b.kind == 'd' && !ok:
			open[b.pid] = o
		case (b.kind == 'a' || b.kind == 'c') && ok:
			delete(open, b.pid)
			if b.kind == 'a' {
				lso := o + 1
				for _, f := range open {
					lso = min(lso, f)
				}
				aborted = append(aborted, AbortedTxn{ProducerID: b.pid, FirstOffset: first, LastOffset: o, LastStableOffset: lso})
			}
		}
	}
	return open, aborted
}

func (c *txnCrashRun) verify(when string) {
	t, l := c.t, c.l
	end, start := l.EndOffset(), l.StartOffset()
	if end < c.durable || end > int64(len(c.batches)) {
		t.Fatalf("%s: recovered end %d, durable %d, appended %d", when, end, c.durable, len(c.batches))
	}
	c.batches, c.durable = c.batches[:end], end
	if err := l.SetHighWatermark(end); err != nil {
		t.Fatal(err)
	}
	open, aborted := modelTxns(c.batches)
	var wantOpen []OngoingTxn
	first := int64(math.MaxInt64)
	for pid, f := range open {
		wantOpen = append(wantOpen, OngoingTxn{ProducerID: pid, FirstOffset: f})
		first = min(first, f)
	}
	slices.SortFunc(wantOpen, func(a, b OngoingTxn) int { return compareInt64(a.FirstOffset, b.FirstOffset) })
	if got := l.OngoingTransactions(); !reflect.DeepEqual(got, wantOpen) {
		t.Fatalf("%s: open transactions %+v, model %+v (log [%d, %d))", when, got, wantOpen, start, end)
	}
	var wantAborted []AbortedTxn
	for _, a := range aborted {
		if a.LastOffset >= start {
			wantAborted = append(wantAborted, a)
		}
	}
	if got := l.AbortedTransactions(start, end); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("%s: aborted %+v, model %+v (log [%d, %d))", when, got, wantAborted, start, end)
	}
	if got, want := l.LastStableOffset(), min(end, max(first, start)); got != want {
		t.Fatalf("%s: LSO %d, model %d (log [%d, %d))", when, got, want, start, end)
	}
}
