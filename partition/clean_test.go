package partition

import (
	"github.com/raftq/raftq/internal/vfs"

	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// cleanModel is every record produced, by offset, and the cleanings done.
type cleanModel struct {
	recs      map[int64]modelRec
	cleanedTo int64 // the latest CleanedTo of a cleaning that ran
}

type modelRec struct {
	key, value []byte // value nil: a tombstone
	ts         int64
}

// compactRun replays random keyed produces, cleanings, rolls and reopens
// against a log and checks it against the model after every cleaning.
type compactRun struct {
	t     testing.TB
	dir   string
	cfg   Config
	l     *Log
	rng   *rand.Rand
	model cleanModel
	ts    int64
	epoch int32
}

func newCompactRun(t testing.TB, seed uint64) *compactRun { return newCompactRunFS(t, seed, nil) }

func (r *compactRun) open() {
	l, err := Open(r.dir, r.cfg)
	if err != nil {
		r.t.Fatalf("open: %v", err)
	}
	r.l = l
	if err := l.SetHighWatermark(l.EndOffset()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *compactRun) close() {
	if err := r.l.Close(); err != nil {
		r.t.Fatal(err)
	}
}

// produce appends a batch of 1-4 records over 6 keys, some tombstones,
// sometimes compressed, and commits it.
func (r *compactRun) produce() {
	n := 1 + r.rng.IntN(4)
	recs := make([]testRecord, n)
	for i := range recs {
		r.ts += int64(r.rng.IntN(50))
		key := []byte(fmt.Sprintf("k%d", r.rng.IntN(6)))
		var val []byte
		if r.rng.IntN(5) != 0 {
			val = []byte(fmt.Sprintf("v%d", r.rng.Uint32()%1000))
		}
		recs[i] = testRecord{ts: r.ts, key: key, value: val}
	}
	spec := batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1}
	if r.rng.IntN(4) == 0 {
		spec.codec = Codec(1 + r.rng.IntN(4))
	}
	if r.rng.IntN(3) == 0 {
		spec.producerID, spec.producerEpoch, spec.baseSequence = int64(1+r.rng.IntN(2)), 0, 0
	}
	if r.rng.IntN(10) == 0 {
		r.epoch++
	}
	base, _ := mustAppend(r.t, r.l, makeBatch(r.t, spec), r.epoch)
	for i, rec := range recs {
		r.model.recs[base+int64(i)] = modelRec{key: rec.key, value: rec.value, ts: rec.ts}
	}
	if err := r.l.SetHighWatermark(r.l.EndOffset()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *compactRun) clean() {
	cfg := CleanConfig{UpTo: r.l.HighWatermark(), Now: time.UnixMilli(r.ts), DeleteRetention: time.Duration(r.rng.IntN(3)) * 200 * time.Millisecond}
	st, err := r.l.Clean(cfg)
	if err != nil {
		r.t.Fatalf("clean: %v", err)
	}
	if st.Cleaned {
		r.model.cleanedTo = st.CleanedTo
	}
	r.check("after a cleaning")
}

// stored is one record as the log holds it.
type stored struct {
	offset int64
	key    []byte
	value  []byte
	null   bool
}

// readAll returns every record in the log, checking every batch as
// recovery would and that batches chain without gaps.
func (r *compactRun) readAll() []stored {
	var out []stored
	end := r.l.EndOffset()
	next := r.l.StartOffset()
	for next < end {
		b := mustRead(r.t, r.l, next, 1<<20, end)
		if len(b) == 0 {
			r.t.Fatalf("read at %d below the end %d returned nothing", next, end)
		}
		for pos := 0; pos < len(b); {
			h, err := parseHeader(b[pos:], int64(pos))
			if err != nil {
				r.t.Fatal(err)
			}
			batch := b[pos:h.end()]
			info, err := ValidateStoredBatch(batch)
			if err != nil {
				r.t.Fatalf("stored batch at %d: %v", h.base, err)
			}
			if h.base != next && !(len(out) == 0 && h.base < next) {
				r.t.Fatalf("batch at %d follows one ending at %d: the log has a gap", h.base, next)
			}
			err = eachRecord(batch, info, func(rec record) error {
				s := stored{offset: rec.offset, key: bytes.Clone(rec.key), null: rec.tombstone}
				if !rec.tombstone {
					s.value = recordValue(r.t, rec.raw)
				}
				out = append(out, s)
				return nil
			})
			if err != nil {
				r.t.Fatal(err)
			}
			next, pos = h.next(), int(h.end())
		}
	}
	return out
}

// check compares the log with the model: each stored record is the one
// produced at its offset; every key's latest record survives (a
// tombstone may be gone); below the cleaned point each key has at most
// its latest record there.
func (r *compactRun) check(when string) {
	recs := r.readAll()
	latest := map[string]int64{}
	for off, m := range r.model.recs {
		if off >= r.l.StartOffset() && off > latest[string(m.key)]-1 {
			if cur, ok := latest[string(m.key)]; !ok || off > cur {
				latest[string(m.key)] = off
			}
		}
	}
	seen := map[int64]bool{}
	below := map[string]int{}
	for _, s := range recs {
		m, ok := r.model.recs[s.offset]
		if !ok || !bytes.Equal(m.key, s.key) || !bytes.Equal(m.value, s.value) || (m.value == nil) != s.null {
			r.t.Fatalf("%s: offset %d holds key %q value %q, produced %q %q", when, s.offset, s.key, s.value, m.key, m.value)
		}
		seen[s.offset] = true
		if s.offset < r.model.cleanedTo {
			below[string(s.key)]++
			if below[string(s.key)] > 1 {
				r.t.Fatalf("%s: key %q has two records below the cleaned point %d", when, s.key, r.model.cleanedTo)
			}
			if s.offset != r.latestBelow(s.key, r.model.cleanedTo) {
				r.t.Fatalf("%s: key %q keeps offset %d below %d, not its latest there", when, s.key, s.offset, r.model.cleanedTo)
			}
		}
	}
	for k, off := range latest {
		if !seen[off] && r.model.recs[off].value != nil {
			r.t.Fatalf("%s: the latest value of %q (offset %d) is gone", when, k, off)
		}
	}
}

func (r *compactRun) latestBelow(key []byte, end int64) int64 {
	best := int64(-1)
	for off, m := range r.model.recs {
		if off < end && bytes.Equal(m.key, key) && off > best {
			best = off
		}
	}
	return best
}

func recordValue(t testing.TB, raw []byte) []byte {
	t.Helper()
	_, k := varintAt(raw)
	r := bodyReader{b: raw[k+1:]}
	r.varint()
	r.varint()
	if kl := r.varint(); kl > 0 {
		r.b = r.b[kl:]
	}
	vl := r.varint()
	if r.err != nil || vl < 0 || vl > int64(len(r.b)) {
		t.Fatalf("record value: %v", r.err)
	}
	return bytes.Clone(r.b[:vl])
}

func varintAt(b []byte) (int64, int) {
	r := bodyReader{b: b}
	v := r.varint()
	return v, len(b) - len(r.b)
}

func (r *compactRun) step() { r.stepOp(r.rng.IntN(20)) }

func (r *compactRun) stepOp(op int) {
	switch {
	case op < 14:
		r.produce()
	case op < 17:
		r.clean()
	case op < 18:
		if err := r.l.Roll(); err != nil {
			r.t.Fatal(err)
		}
	default:
		r.close()
		r.open()
		r.check("after a reopen")
	}
}

// TestClean_Model: random keyed produces, tombstones, cleanings, rolls
// and reopens, checked against a per-key model.
func TestClean_Model(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newCompactRun(t, seed)
			defer r.close()
			for range 400 {
				r.step()
			}
			r.clean()
		})
	}
}

// A cleaning must leave the log smaller and hold one record per live
// key; the model test would also pass if Clean did nothing, so this one
// checks it did something.
func TestClean_Reclaims(t *testing.T) {
	r := newCompactRun(t, 99)
	defer r.close()
	for range 300 {
		r.produce()
	}
	before := r.l.Size()
	st, err := r.l.Clean(CleanConfig{UpTo: r.l.HighWatermark(), Now: time.UnixMilli(r.ts)})
	if err != nil || !st.Cleaned {
		t.Fatalf("clean: %+v %v", st, err)
	}
	if after := r.l.Size(); after >= before/2 {
		t.Fatalf("log %d bytes before, %d after cleaning 300 batches over 6 keys", before, after)
	}
	r.model.cleanedTo = st.CleanedTo
	r.check("after one cleaning")
}

var cleanCrashPoints = []string{"clean-written", "clean-indexes-removed", "clean-swapped", "cleaner-checkpoint-tmp-written", "sync-dir"}

// TestClean_CrashRecovery stops a cleaning at each of its steps with a
// power cut (vfs.Mem drops whatever was not durable), reopens, and checks
// that the log holds either the old or the cleaned form of every segment
// (the model checks pass, nothing synced is lost) and cleans on.
func TestClean_CrashRecovery(t *testing.T) {
	for _, point := range cleanCrashPoints {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%d", point, seed), func(t *testing.T) { runCleanCrash(t, point, seed) })
		}
	}
}

func runCleanCrash(t *testing.T, point string, seed uint64) {
	fs := vfs.NewMem()
	r := newCompactRunFS(t, seed, fs)
	for range 200 {
		r.produce()
	}
	if err := r.l.Sync(); err != nil {
		t.Fatal(err)
	}
	left := 1 + int(seed)
	r.l.cfg.crashPoint = func(name string) {
		if name == point {
			if left--; left == 0 {
				panic(crashNow{})
			}
		}
	}
	crashed := func() (crashed bool) {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(crashNow); !ok {
					panic(v)
				}
				crashed = true
			}
		}()
		r.clean()
		return false
	}()
	if !crashed {
		r.l.cfg.crashPoint = nil
		_ = r.l.Close()
	}
	fs.Crash(r.rng)
	r.open()
	r.check("after a crash at " + point)
	r.clean()
	r.close()
}

// newCompactRunFS opens a run's log on fs (nil: the OS's), with small
// segments so that cleanings rewrite many.
func newCompactRunFS(t testing.TB, seed uint64, fs FS) *compactRun {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes, cfg.IndexIntervalBytes = 1<<10, 1<<10, 128
	if fs != nil {
		cfg.FS = fs
	}
	r := &compactRun{t: t, dir: t.TempDir(), cfg: cfg, rng: rand.New(rand.NewPCG(seed, 7)),
		model: cleanModel{recs: map[int64]modelRec{}}, ts: 1_700_000_000_000}
	r.open()
	return r
}

// Two logs given the same batches clean to the same bytes, and cleaning
// a cleaned log again changes nothing: replicas that clean on their own
// stay byte-identical.
func TestClean_Deterministic(t *testing.T) {
	a, b := newCompactRun(t, 5), newCompactRun(t, 5)
	defer a.close()
	defer b.close()
	for range 300 {
		a.produce()
		b.produce()
	}
	cfg := CleanConfig{UpTo: a.l.HighWatermark(), Now: time.UnixMilli(a.ts), DeleteRetention: time.Second}
	for _, r := range []*compactRun{a, b} {
		if st, err := r.l.Clean(cfg); err != nil || !st.Cleaned {
			t.Fatalf("clean: %+v %v", st, err)
		}
	}
	if x, y := logBytes(t, a.l), logBytes(t, b.l); !bytes.Equal(x, y) {
		t.Fatalf("the two replicas differ after cleaning: %d and %d bytes, first difference at %d", len(x), len(y), firstDifference(x, y))
	}
	before := logBytes(t, a.l)
	cfg.MinCleanableRatio = 0
	if _, err := a.l.Clean(cfg); err != nil {
		t.Fatal(err)
	}
	if after := logBytes(t, a.l); !bytes.Equal(before, after) {
		t.Fatalf("cleaning a clean log changed it: %d bytes, then %d", len(before), len(after))
	}
}

func logBytes(t testing.TB, l *Log) []byte {
	t.Helper()
	var out []byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		b := mustRead(t, l, off, 1<<20, l.EndOffset())
		h, err := parseHeader(b[len(b)-lastBatchLen(t, b):], 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		off = h.next()
	}
	return out
}

// lastBatchLen is the size of the last batch in b.
func lastBatchLen(t testing.TB, b []byte) int {
	t.Helper()
	pos, last := 0, 0
	for pos < len(b) {
		h, err := parseHeader(b[pos:], int64(pos))
		if err != nil {
			t.Fatal(err)
		}
		last = int(h.size)
		pos = int(h.end())
	}
	return last
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// FuzzClean drives the compaction model with fuzzed operations.
func FuzzClean(f *testing.F) {
	f.Add([]byte{0, 0, 0, 15, 0, 0, 19, 15})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		seed := uint64(0)
		for _, b := range ops {
			seed = seed*31 + uint64(b)
		}
		r := newCompactRun(t, seed)
		defer r.close()
		for _, op := range ops {
			r.stepOp(int(op) % 20)
		}
		r.clean()
	})
}

// An ISR follower copies a cleaned leader's log batch by batch (gapped
// offset deltas, empty batches and all) and ends byte-identical, with the
// same producer state as the leader once both reopen.
func TestClean_ISRFollowerCopiesCleanedLog(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 1<<10, 1<<10
	leader := openISR(t, t.TempDir(), cfg)
	if err := leader.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 200 {
		recs := []testRecord{{ts: int64(i), key: []byte(fmt.Sprintf("k%d", rng.IntN(4))), value: []byte("v")}}
		b := makeBatch(t, batchSpec{records: recs, producerID: 9, producerEpoch: 0, baseSequence: int32(i)})
		mustProduce(t, leader, b, 1)
	}
	if _, err := leader.SetHighWatermark(leader.EndOffset()); err != nil {
		t.Fatal(err)
	}
	st, err := leader.Log().Clean(CleanConfig{UpTo: leader.HighWatermark(), Now: time.UnixMilli(1000)})
	if err != nil || !st.Cleaned || st.RecordsDropped == 0 {
		t.Fatalf("clean: %+v %v", st, err)
	}
	f := openISR(t, t.TempDir(), cfg)
	catchUp(t, f, leader)
	if a, b := logBytes(t, leader.Log()), logBytes(t, f.Log()); !bytes.Equal(a, b) {
		t.Fatalf("follower differs from the cleaned leader at byte %d", firstDifference(a, b))
	}
	if a, b := f.Producer(9), leader.Producer(9); a == nil || b == nil || a.Batches[len(a.Batches)-1] != b.Batches[len(b.Batches)-1] {
		t.Fatalf("producer 9's last batch: follower %+v, leader %+v", a, b)
	}
}

// A raft replica whose log was cleaned sends it in a snapshot; the
// follower that installs it holds the same bytes and producer state.
func TestClean_RaftSnapshotOfCleanedLog(t *testing.T) {
	leader := newReplicaHarness(t)
	leader.apply(2, nil)
	for i := range 300 {
		recs := []testRecord{{ts: int64(i), key: []byte(fmt.Sprintf("k%d", i%5)), value: make([]byte, 40)}}
		leader.produce(2, makeBatch(t, batchSpec{records: recs, producerID: 1, producerEpoch: 0, baseSequence: int32(i)}))
		if i%50 == 49 {
			if err := leader.r.Log().Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ll := leader.r.Log()
	st, err := ll.Clean(CleanConfig{UpTo: ll.HighWatermark(), Now: time.UnixMilli(1000)})
	if err != nil || !st.Cleaned || st.RecordsDropped == 0 {
		t.Fatalf("clean: %+v %v", st, err)
	}
	data, err := leader.r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(leader.index), Term: new(uint64(2))}}
	body, err := leader.r.SnapshotBody(snap)
	if err != nil {
		t.Fatal(err)
	}
	follower := newReplicaHarness(t)
	if err := follower.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	if err := follower.r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if a, b := logBytes(t, ll), logBytes(t, follower.r.Log()); !bytes.Equal(a, b) {
		t.Fatalf("the follower's log differs from the cleaned leader's at byte %d", firstDifference(a, b))
	}
	if r := follower.produce(2, makeBatch(t, batchSpec{records: []testRecord{{key: []byte("k4"), value: []byte("x")}}, producerID: 1, producerEpoch: 0, baseSequence: 299})); !r.Duplicate {
		t.Errorf("the producer's last batch did not survive cleaning and the snapshot: %+v", r)
	}
}

// A full disk during a cleaning abandons the swap: Clean fails, the
// partial .cleaned file goes, the log is as it was and takes appends.
func TestClean_FullDiskAbandonsTheSwap(t *testing.T) {
	ffs := newFaultFS()
	r := newCompactRunFS(t, 1, ffs)
	defer r.close()
	for range 200 {
		r.produce()
	}
	before := logBytes(t, r.l)
	ffs.setWrite(func(name string, p []byte, off int64) (int, error) {
		if strings.HasSuffix(name, cleanedSuffix) {
			return 0, syscall.ENOSPC
		}
		return len(p), nil
	})
	if _, err := r.l.Clean(CleanConfig{UpTo: r.l.HighWatermark(), Now: time.UnixMilli(r.ts)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("clean on a full disk: %v, want ENOSPC", err)
	}
	ffs.setWrite(nil)
	if left, _ := filepath.Glob(filepath.Join(r.dir, "*"+cleanedSuffix)); len(left) > 0 {
		t.Fatalf("a failed cleaning left %v", left)
	}
	if after := logBytes(t, r.l); !bytes.Equal(before, after) {
		t.Fatal("a failed cleaning changed the log")
	}
	r.produce()
	r.clean()
}

// A corrupt batch stops the cleaning with ErrCorruptLog; the log stays
// readable outside the damaged batch.
func TestClean_CorruptSegmentStopsTheCleaner(t *testing.T) {
	r := newCompactRun(t, 4)
	defer r.close()
	for range 200 {
		r.produce()
	}
	segs := r.l.Segments()
	f, err := os.OpenFile(segs[1].Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff}, 70); err != nil { // inside the first batch's records: its CRC fails
		t.Fatal(err)
	}
	f.Close()
	if _, err := r.l.Clean(CleanConfig{UpTo: r.l.HighWatermark(), Now: time.UnixMilli(r.ts)}); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("clean over a corrupt batch: %v, want ErrCorruptLog", err)
	}
	if b, err := r.l.Read(segs[2].Base, 1<<20, r.l.EndOffset()); err != nil || len(b) == 0 {
		t.Fatalf("the log after a failed cleaning: %v", err)
	}
}
