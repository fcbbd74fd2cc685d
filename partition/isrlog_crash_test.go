package partition

import (
	"github.com/raftq/raftq/internal/vfs"

	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// crashNow is what an ISR crash test's crash point panics with, to stop
// the replica exactly there.
type crashNow struct{}

// isrCrashPoints are the points an ISR crash test stops at: the ISR
// checkpoint and truncation steps and the Log's own below them.
var isrCrashPoints = []string{
	"isr-checkpoint-tmp-written", "isr-truncated", "sync-segment", "sync-dir",
	"checkpoint-tmp-written", "truncate-checkpointed", "truncate-segment-removed",
	"roll-segment-created", "append-prefix-written",
}

// isrCrashRun drives one ISRLog on a vfs.Mem through random leader and
// follower appends, leader changes, checkpoints and truncations, crashes
// it (at a named point or between calls), and checks what reopens.
type isrCrashRun struct {
	t      *testing.T
	rng    *rand.Rand
	fs     *vfs.Mem
	dir    string
	r      *ISRLog
	target string
	left   int
	// durableEnd is an offset the log must keep through a crash: it was
	// synced by a Checkpoint and not truncated since.
	durableEnd int64
	// ledEpoch is the epoch of the last BecomeLeader that returned, -1
	// once a truncation may have cut its start.
	ledEpoch, ledStart int64
}

func (c *isrCrashRun) config(crashing bool) Config {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes, cfg.IndexIntervalBytes = 2<<10, 1<<10, 256
	cfg.FS = c.fs
	if crashing {
		cfg.crashPoint = func(name string) {
			if name == c.target {
				if c.left--; c.left == 0 {
					panic(crashNow{})
				}
			}
		}
	}
	return cfg
}

func (c *isrCrashRun) open(crashing bool) {
	r, err := OpenISRLog(ISRLogConfig{Dir: c.dir, Log: c.config(crashing)})
	if err != nil {
		c.t.Fatalf("OpenISRLog: %v", err)
	}
	c.r = r
}

func TestISRLog_CrashRecovery(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		c := &isrCrashRun{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 11)), fs: vfs.NewMem(), dir: t.TempDir(), ledEpoch: -1}
		for round := range 5 {
			c.target = "" // armed once open: recovery's own crashes are the Log's tests'
			c.open(true)
			c.target, c.left = isrCrashPoints[c.rng.IntN(len(isrCrashPoints))], 1+c.rng.IntN(4)
			c.runUntilCrash(30 + c.rng.IntN(60))
			abandon(c.r.log)
			c.fs.Crash(c.rng)
			c.open(false)
			c.verify(fmt.Sprintf("seed %d round %d (crash at %s)", seed, round, c.target))
			if err := c.r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// runUntilCrash runs steps operations or until a crash point fires.
func (c *isrCrashRun) runUntilCrash(steps int) {
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

func (c *isrCrashRun) step() {
	r := c.r
	switch n := c.rng.IntN(20); {
	case n < 10 || r.LatestEpoch() < 0:
		if r.LatestEpoch() < 0 {
			c.becomeLeader()
		}
		c.produce()
	case n < 13:
		c.followerAppend()
	case n < 15:
		c.becomeLeader()
	case n < 17:
		if err := r.Checkpoint(); err != nil {
			c.t.Fatal(err)
		}
		c.durableEnd = r.EndOffset()
	default:
		off := r.Log().StartOffset() + c.rng.Int64N(r.EndOffset()-r.Log().StartOffset()+1)
		// A crash inside TruncateTo may leave the cut done or not.
		cut, drop := c.cutFor(off), off
		if cut < r.EndOffset() {
			c.durableEnd = min(c.durableEnd, cut)
			drop = cut
		}
		// Epochs starting at the cut go; at or past the LEO, those
		// starting at off or later (forgetEpochsFrom), an epoch just led
		// with no batch yet included.
		if c.ledStart >= drop {
			c.ledEpoch = -1
		}
		if err := r.TruncateTo(off); err != nil {
			c.t.Fatal(err)
		}
	}
}

// cutFor returns where TruncateTo(off) cuts: the base of the batch
// holding off, or the end.
func (c *isrCrashRun) cutFor(off int64) int64 {
	cut := c.r.EndOffset()
	err := c.r.Log().ScanBatches(off, off+1, func(info BatchInfo) error {
		cut = min(cut, info.BaseOffset)
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return cut
}

func (c *isrCrashRun) becomeLeader() {
	e := c.r.LatestEpoch() + 1
	if err := c.r.BecomeLeader(e); err != nil {
		c.t.Fatal(err)
	}
	c.ledEpoch, c.ledStart = int64(e), c.r.EndOffset()
	c.durableEnd = c.r.EndOffset()
}

// produce appends an idempotent batch: usually the next in sequence,
// sometimes a retry of one in the window (which must be a duplicate).
func (c *isrCrashRun) produce() {
	pid := int64(1 + c.rng.IntN(3))
	st, seq := c.r.Producer(pid), int32(0)
	var epoch int16
	if st != nil {
		epoch = st.Epoch
	}
	if c.rng.IntN(8) == 0 { // a marker, sometimes of a bumped epoch
		m := ControlBatch(pid, epoch+int16(c.rng.IntN(2)), c.rng.IntN(2) == 0, 0, 1000)
		mustProduce(c.t, c.r, m, c.r.LatestEpoch())
		return
	}
	if st != nil && len(st.Batches) > 0 {
		seq = st.Batches[len(st.Batches)-1].LastSeq + 1
		if c.rng.IntN(5) == 0 {
			b := st.Batches[c.rng.IntN(len(st.Batches))]
			res := produce(c.t, c.r, idemBatch(c.t, pid, epoch, b.FirstSeq, valuesFor(int(b.LastSeq-b.FirstSeq)+1)...), c.r.LatestEpoch())
			if !res.Duplicate || res.Base != b.BaseOffset || res.Last != b.LastOffset {
				c.t.Fatalf("retry of %+v: %+v", b, res)
			}
			return
		}
	}
	if pid != 1 { // producers 2 and 3 are transactional, 1 is not
		mustProduce(c.t, c.r, txnBatch(c.t, pid, epoch, seq, valuesFor(1+c.rng.IntN(4))...), c.r.LatestEpoch())
		return
	}
	mustProduce(c.t, c.r, idemBatch(c.t, pid, epoch, seq, valuesFor(1+c.rng.IntN(4))...), c.r.LatestEpoch())
}

// followerAppend appends a batch as if fetched from another leader, of
// the current epoch or a newer one.
func (c *isrCrashRun) followerAppend() {
	pid := int64(4 + c.rng.IntN(2))
	b := idemBatch(c.t, pid, 0, c.rng.Int32N(1000), valuesFor(1+c.rng.IntN(3))...)
	epoch := max(c.r.LatestEpoch(), 0) + c.rng.Int32N(2)
	if err := c.r.AppendFollower(stamped(b, c.r.EndOffset(), epoch)); err != nil {
		c.t.Fatal(err)
	}
}

func valuesFor(n int) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = fmt.Sprintf("value-%d", i)
	}
	return v
}

// verify checks a reopened replica against its own log: what was synced
// is there, the producers are what a replay of the whole log gives, and
// the epochs agree with the batches' stamps and with the last epoch led.
func (c *isrCrashRun) verify(when string) {
	t, r := c.t, c.r
	t.Helper()
	if end := r.EndOffset(); end < c.durableEnd {
		t.Fatalf("%s: log ends at %d, below the synced %d", when, end, c.durableEnd)
	}
	c.durableEnd = r.EndOffset() // recovery synced what it kept
	if got, want := r.producers, replayProducers(t, r.Log()); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: producers\n%s\nwant (replayed)\n%s", when, dumpProducers(got), dumpProducers(want))
	}
	if got, want := viewTxns(r.Log()), replayTxnView(t, r.Log()); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: transactions %+v, want (replayed) %+v", when, got, want)
	}
	checkEpochsAgainstLog(t, when, r)
	if c.ledEpoch >= 0 && int64(r.LatestEpoch()) < c.ledEpoch {
		t.Fatalf("%s: latest epoch %d after reopening, but epoch %d was led (durably at %d)", when, r.LatestEpoch(), c.ledEpoch, c.ledStart)
	}
	if hw := r.HighWatermark(); hw != r.Log().StartOffset() {
		t.Fatalf("%s: high watermark %d after reopening, want the start", when, hw)
	}
}

// replayProducers rebuilds producer state from every batch in the log.
func replayProducers(t testing.TB, l *Log) map[int64]*ProducerState {
	t.Helper()
	out := map[int64]*ProducerState{}
	err := l.ScanBatches(l.StartOffset(), l.EndOffset(), func(info BatchInfo) error {
		if info.Idempotent() {
			out[info.ProducerID] = recordProducer(out[info.ProducerID], info, info.BaseOffset, info.BaseOffset+int64(info.LastOffsetDelta), 0)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dumpProducers(m map[int64]*ProducerState) string {
	s := ""
	for pid, st := range m {
		s += fmt.Sprintf("  %d: %+v\n", pid, *st)
	}
	return s
}

// checkEpochsAgainstLog checks that the epoch starts rise in both epoch
// and offset, lie within the log, and that every batch carries the epoch
// in force at its base.
func checkEpochsAgainstLog(t testing.TB, when string, r *ISRLog) {
	t.Helper()
	epochs := r.Epochs()
	for i, e := range epochs {
		if e.StartOffset > r.EndOffset() || (i > 0 && (e.Epoch <= epochs[i-1].Epoch || e.StartOffset <= epochs[i-1].StartOffset)) {
			t.Fatalf("%s: epochs %v not increasing within [.., %d]", when, epochs, r.EndOffset())
		}
	}
	err := r.Log().ScanBatches(r.Log().StartOffset(), r.EndOffset(), func(info BatchInfo) error {
		inForce := int32(-1)
		for _, e := range epochs {
			if e.StartOffset <= info.BaseOffset {
				inForce = e.Epoch
			}
		}
		if inForce != info.LeaderEpoch {
			return fmt.Errorf("batch at %d has epoch %d, the cache %v says %d", info.BaseOffset, info.LeaderEpoch, epochs, inForce)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// replayTxnView rebuilds the transaction state of a log that starts at 0
// from every batch in it, as a log that never crashed, truncated or
// reopened would hold it (the high watermark taken as it is).
func replayTxnView(t testing.TB, l *Log) txnView {
	t.Helper()
	if l.StartOffset() != 0 {
		t.Fatalf("replayTxnView needs the whole log; it starts at %d", l.StartOffset())
	}
	ts := newTxnState(nil)
	var aborted []AbortedTxn
	for off := int64(0); off < l.EndOffset(); {
		for _, b := range splitBatches(t, mustRead(t, l, off, 1<<20, l.EndOffset())) {
			info, err := ParseBatchHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			off = info.BaseOffset + int64(info.LastOffsetDelta) + 1
			if !isTxnBatch(info) {
				continue
			}
			var m ControlMarker
			if info.Control() {
				if m, err = ParseControlBatch(b); err != nil {
					t.Fatal(err)
				}
			}
			if a, _ := ts.apply(info, info.BaseOffset, m); a != nil {
				aborted = append(aborted, *a)
			}
		}
	}
	return txnView{LSO: min(l.HighWatermark(), ts.first), Ongoing: ts.list(), Aborted: aborted}
}
