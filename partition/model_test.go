package partition

import (
	"github.com/raftq/raftq/internal/vfs"

	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The model test drives a Log with random operations and checks every
// answer against a plain in-memory model: a list of batches, a start, a
// high watermark, and what the last sync made durable. Crashes go through
// vfs.Mem, so unsynced bytes are dropped, cut, zeroed or scrambled.

type modelBatch struct {
	base, last int64
	data       []byte  // as stored: stamped
	times      []int64 // record timestamps
}

type logModel struct {
	batches     []modelBatch // every batch, including those below start
	start, hw   int64
	durableEnd  int64 // crash-proof end: the last Sync, Close or Truncate
	durableFrom int64 // crash-proof lower bound of the start
}

func (m *logModel) end() int64 {
	if n := len(m.batches); n > 0 {
		return m.batches[n-1].last + 1
	}
	return m.start
}

// batchAt returns the index of the batch holding offset, or len if none.
func (m *logModel) batchAt(offset int64) int {
	for i, b := range m.batches {
		if b.last >= offset {
			return i
		}
	}
	return len(m.batches)
}

// cut drops batches at or above offset (a batch boundary).
func (m *logModel) cut(offset int64) {
	m.batches = m.batches[:m.batchAt(offset)]
}

type modelRun struct {
	t     *testing.T
	rng   *rand.Rand
	dir   string
	cfg   Config
	fs    *vfs.Mem
	clock *fakeClock
	l     *Log
	m     logModel
	ts    int64
	trace []string
}

var (
	modelSeeds = flag.Int("model.seeds", 8, "model test: number of seeds to run")
	modelSeed  = flag.Int("model.seed", -1, "model test: run only this seed")
	modelOps   = flag.Int("model.ops", 300, "model test: operations per seed")
)

func TestLog_MatchesModel(t *testing.T) {
	first, n := 0, *modelSeeds
	if testing.Short() {
		n = min(n, 2)
	}
	if *modelSeed >= 0 {
		first, n = *modelSeed, 1
	}
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runModel(t, uint64(seed), *modelOps)
		})
	}
}

func runModel(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	r := &modelRun{t: t, rng: rng, dir: t.TempDir(), fs: vfs.NewMem(), clock: newFakeClock(), ts: 1_700_000_000_000}
	r.cfg = testConfig()
	r.cfg.MaxBatchBytes = 2 << 10
	r.cfg.SegmentBytes = []int64{2 << 10, 4 << 10, 16 << 10}[rng.IntN(3)]
	r.cfg.IndexIntervalBytes = []int{64, 512, 4096}[rng.IntN(3)]
	r.cfg.SegmentAge = time.Hour
	r.cfg.RetentionBytes = int64(rng.IntN(20 << 10))
	r.cfg.RetentionAge = 0
	r.cfg.FS, r.cfg.Clock = r.fs, r.clock.Now
	r.reopen()
	defer func() {
		if t.Failed() {
			t.Logf("replay: go test ./partition -run TestLog_MatchesModel -model.seed %d -model.ops %d -v", seed, ops)
			t.Logf("config %+v; last ops:\n%s", r.cfg, r.lastOps(25))
		}
		r.l.Close()
	}()
	for i := 0; i < ops && !t.Failed(); i++ {
		r.step()
		r.checkBounds()
		if i%25 == 0 {
			r.checkAll()
		}
	}
	r.checkAll()
}

func (r *modelRun) logf(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
}

func (r *modelRun) lastOps(n int) string {
	var b bytes.Buffer
	for _, s := range r.trace[max(0, len(r.trace)-n):] {
		fmt.Fprintln(&b, s)
	}
	return b.String()
}

func (r *modelRun) step() {
	switch x := r.rng.IntN(100); {
	case x < 40:
		r.append()
	case x < 58:
		r.read()
	case x < 66:
		r.setHW()
	case x < 71:
		r.sync()
	case x < 75:
		r.truncate()
	case x < 79:
		r.advanceStart()
	case x < 82:
		r.retention()
	case x < 85:
		r.roll()
	case x < 90:
		r.listOffsets()
	case x < 93:
		r.closeReopen()
	case x < 97:
		r.crash()
	case x < 99:
		r.clock.Advance(time.Duration(r.rng.IntN(90)) * time.Minute)
		r.logf("clock +")
	default:
		r.reset()
	}
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf(format, args...)
}

func (r *modelRun) reopen() {
	l, err := Open(r.dir, r.cfg)
	if err != nil {
		r.fatalf("Open: %v", err)
	}
	r.l = l
}

func (r *modelRun) append() {
	b, times := randomBatch(r.t, r.rng, 6, 150, r.ts)
	r.ts += int64(r.rng.IntN(50))
	epoch := int32(r.rng.IntN(5))
	base, last, err := r.l.Append(b, epoch)
	r.logf("append %d records -> [%d, %d] %v", len(times), base, last, err)
	if err != nil || base != r.m.end() || last != base+int64(len(times))-1 {
		r.fatalf("Append = [%d, %d], %v; want base %d", base, last, err, r.m.end())
	}
	r.m.batches = append(r.m.batches, modelBatch{base: base, last: last, data: stamped(b, base, epoch), times: times})
}

func (r *modelRun) read() {
	offset := r.m.start - 1 + r.rng.Int64N(r.m.end()-r.m.start+3)
	maxBytes := r.rng.IntN(5000)
	upTo := r.m.start + r.rng.Int64N(r.m.end()-r.m.start+2)
	got, err := r.l.Read(offset, maxBytes, upTo)
	r.logf("read %d max %d upTo %d -> %d bytes %v", offset, maxBytes, upTo, len(got), err)
	if offset < r.m.start || offset > r.m.end() {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			r.fatalf("Read(%d) outside [%d, %d] = %v, want out of range", offset, r.m.start, r.m.end(), err)
		}
		return
	}
	if err != nil {
		r.fatalf("Read(%d, %d, %d): %v", offset, maxBytes, upTo, err)
	}
	if want := r.expectRead(offset, maxBytes, upTo); !bytes.Equal(got, want) {
		r.fatalf("Read(%d, %d, %d) returned %d bytes, model says %d", offset, maxBytes, upTo, len(got), len(want))
	}
}

// expectRead applies Read's rules to the model, with segment boundaries
// taken from the log (they depend on sizes and the clock, not on the model).
func (r *modelRun) expectRead(offset int64, maxBytes int, upTo int64) []byte {
	i := r.m.batchAt(offset)
	if i == len(r.m.batches) {
		return nil
	}
	segEnd := r.segmentEnd(r.m.batches[i].base)
	var out []byte
	for j := i; j < len(r.m.batches); j++ {
		b := r.m.batches[j]
		if b.last >= upTo || b.base >= segEnd || (j > i && len(out)+len(b.data) > maxBytes) {
			break
		}
		out = append(out, b.data...)
	}
	return out
}

func (r *modelRun) segmentEnd(base int64) int64 {
	for _, s := range r.l.Segments() {
		if s.Base <= base && base < s.Next {
			return s.Next
		}
	}
	r.fatalf("no segment holds batch %d: %+v", base, r.l.Segments())
	return 0
}

// boundary picks a random batch boundary in [lo, end].
func (r *modelRun) boundary(lo int64) int64 {
	var cands []int64
	for _, b := range r.m.batches {
		if b.base >= lo {
			cands = append(cands, b.base)
		}
	}
	cands = append(cands, r.m.end())
	return cands[r.rng.IntN(len(cands))]
}

func (r *modelRun) setHW() {
	hw := r.boundary(r.m.start)
	r.logf("hw %d", hw)
	if err := r.l.SetHighWatermark(hw); err != nil {
		r.fatalf("SetHighWatermark(%d): %v", hw, err)
	}
	r.m.hw = hw
}

// sync calls Sync or, half the time, SyncData, which makes the batches
// as durable but leaves the start to the next Sync.
func (r *modelRun) sync() {
	if r.rng.IntN(2) == 0 {
		r.logf("sync data")
		if err := r.l.SyncData(); err != nil {
			r.fatalf("SyncData: %v", err)
		}
		r.m.durableEnd = r.m.end()
		return
	}
	r.logf("sync")
	if err := r.l.Sync(); err != nil {
		r.fatalf("Sync: %v", err)
	}
	r.m.durableEnd, r.m.durableFrom = r.m.end(), r.m.start
}

func (r *modelRun) truncate() {
	offset := r.m.start - 1 + r.rng.Int64N(r.m.end()-r.m.start+3)
	got, err := r.l.Truncate(offset)
	r.logf("truncate %d -> %d %v", offset, got, err)
	if offset < r.m.start && offset < r.m.end() {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			r.fatalf("Truncate(%d) below start %d = %v", offset, r.m.start, err)
		}
		return
	}
	want := r.m.end()
	if i := r.m.batchAt(offset); offset < r.m.end() {
		want = r.m.batches[i].base
	}
	if err != nil || got != want {
		r.fatalf("Truncate(%d) = %d, %v; want %d", offset, got, err, want)
	}
	r.m.cut(want)
	r.m.start = min(r.m.start, want)
	r.m.hw = min(r.m.hw, want)
	r.m.durableEnd = min(r.m.durableEnd, want)
	r.m.durableFrom = min(r.m.durableFrom, want)
}

func (r *modelRun) advanceStart() {
	offset := r.m.start + r.rng.Int64N(r.m.end()-r.m.start+2)
	err := r.l.AdvanceStart(offset)
	r.logf("advance start %d %v", offset, err)
	if offset > r.m.end() {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			r.fatalf("AdvanceStart(%d) past end %d = %v", offset, r.m.end(), err)
		}
		return
	}
	if err != nil {
		r.fatalf("AdvanceStart(%d): %v", offset, err)
	}
	r.m.start = max(r.m.start, offset)
	r.m.hw = max(r.m.hw, r.m.start)
}

func (r *modelRun) retention() {
	segs := r.l.Segments()
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	want := r.m.start
	for _, s := range segs[:len(segs)-1] {
		if s.Next > r.m.hw || total-s.Size < r.cfg.RetentionBytes {
			break
		}
		total -= s.Size
		want = max(want, s.Next)
	}
	got, err := r.l.ApplyRetention()
	r.logf("retention -> %d %v", got, err)
	if err != nil || got != want {
		r.fatalf("ApplyRetention = %d, %v; want %d", got, err, want)
	}
	r.m.start = want
	r.m.hw = max(r.m.hw, want)
}

func (r *modelRun) roll() {
	r.logf("roll")
	if err := r.l.Roll(); err != nil {
		r.fatalf("Roll: %v", err)
	}
}

func (r *modelRun) listOffsets() {
	q := r.ts - int64(r.rng.IntN(2000)) + 100
	off, ts, err := r.l.ListOffset(q, r.m.hw)
	r.logf("list offsets %d upTo %d -> %d, %d %v", q, r.m.hw, off, ts, err)
	wantOff, wantTS := int64(-1), int64(-1)
	for _, b := range r.m.batches {
		found := false
		for i, x := range b.times {
			if o := b.base + int64(i); o >= r.m.start && o < r.m.hw && x >= q {
				wantOff, wantTS, found = o, x, true
				break
			}
		}
		if found {
			break
		}
	}
	if err != nil || off != wantOff || ts != wantTS {
		r.fatalf("ListOffset(%d, %d) = %d, %d, %v; want %d, %d", q, r.m.hw, off, ts, err, wantOff, wantTS)
	}
}

func (r *modelRun) closeReopen() {
	r.logf("close, reopen")
	if err := r.l.Close(); err != nil {
		r.fatalf("Close: %v", err)
	}
	r.reopen()
	r.m.hw = r.m.start
	r.m.durableEnd, r.m.durableFrom = r.m.end(), r.m.start
	r.checkAll()
}

// crash abandons the log, damages everything not yet durable, reopens, and
// checks that the recovered log is a prefix of the model that keeps at
// least what was durable.
func (r *modelRun) crash() {
	abandon(r.l)
	r.fs.Crash(r.rng)
	r.reopen()
	start, end := r.l.StartOffset(), r.l.EndOffset()
	r.logf("crash -> [%d, %d) (model [%d, %d), durable end %d from %d)", start, end, r.m.start, r.m.end(), r.m.durableEnd, r.m.durableFrom)
	if start < r.m.durableFrom || start > r.m.start {
		r.fatalf("recovered start %d outside [%d, %d]", start, r.m.durableFrom, r.m.start)
	}
	if end < max(r.m.durableEnd, start) || end > r.m.end() {
		r.fatalf("recovered end %d outside [%d, %d]", end, max(r.m.durableEnd, start), r.m.end())
	}
	if i := r.m.batchAt(end); end < r.m.end() && r.m.batches[i].base != end {
		r.fatalf("recovered end %d is inside batch [%d, %d]", end, r.m.batches[i].base, r.m.batches[i].last)
	}
	r.m.cut(end)
	r.m.start, r.m.hw = start, start
	if len(r.m.batches) == 0 || start > r.m.batches[len(r.m.batches)-1].last {
		r.m.batches = nil
		r.m.start = start
	}
	r.m.durableEnd, r.m.durableFrom = min(r.m.durableEnd, end), start
	r.checkAll()
}

func (r *modelRun) reset() {
	offset := r.m.end() + r.rng.Int64N(100)
	r.logf("reset %d", offset)
	if err := r.l.Reset(offset); err != nil {
		r.fatalf("Reset(%d): %v", offset, err)
	}
	r.m = logModel{start: offset, hw: offset, durableEnd: offset, durableFrom: offset}
}

// checkBounds compares the offsets and the segment list with the model.
func (r *modelRun) checkBounds() {
	if got, want := r.l.EndOffset(), r.m.end(); got != want {
		r.fatalf("EndOffset = %d, model %d", got, want)
	}
	if got, want := r.l.StartOffset(), r.m.start; got != want {
		r.fatalf("StartOffset = %d, model %d", got, want)
	}
	if got, want := r.l.HighWatermark(), r.m.hw; got != want {
		r.fatalf("HighWatermark = %d, model %d", got, want)
	}
	segs := r.l.Segments()
	if segs[len(segs)-1].Next != r.m.end() || segs[0].Base > r.m.start {
		r.fatalf("segments %+v do not cover [%d, %d)", segs, r.m.start, r.m.end())
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].Base != segs[i-1].Next {
			r.fatalf("segment %d starts at %d, previous ends at %d", i, segs[i].Base, segs[i-1].Next)
		}
	}
}

// checkAll reads the whole log and compares it with the model's batches.
func (r *modelRun) checkAll() {
	r.checkBounds()
	var want [][]byte
	for _, b := range r.m.batches {
		if b.last >= r.m.start {
			want = append(want, b.data)
		}
	}
	if got := readAll(r.t, r.l); !equalBatches(got, want) {
		r.fatalf("log holds %d batches, model %d (or bytes differ)", len(got), len(want))
	}
}
