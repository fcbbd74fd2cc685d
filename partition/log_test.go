package partition

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLog_AppendAssignsOffsetsAndStampsHeader(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	sizes := []int{1, 5, 3}
	var want [][]byte
	next := int64(0)
	for i, n := range sizes {
		b := uniformBatch(t, n, 10, int64(i))
		base, last := mustAppend(t, l, b, int32(i+3))
		if base != next || last != next+int64(n)-1 {
			t.Fatalf("batch %d at [%d, %d], want [%d, %d]", i, base, last, next, next+int64(n)-1)
		}
		want = append(want, stamped(b, base, int32(i+3)))
		next = last + 1
	}
	if got := l.EndOffset(); got != next {
		t.Fatalf("EndOffset = %d, want %d", got, next)
	}
	got := splitBatches(t, mustRead(t, l, 0, 1<<20, next))
	if !equalBatches(got, want) {
		t.Fatalf("read back %d batches, not the stamped ones appended", len(got))
	}
}

func TestLog_AppendLeavesCallerBytesAlone(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 1<<20, 1<<20
	l := openLog(t, t.TempDir(), cfg)
	for _, b := range [][]byte{uniformBatch(t, 3, 10, 0), batchOfSize(t, 200<<10, 1000)} {
		orig := bytes.Clone(b)
		base, _ := mustAppend(t, l, b, 77)
		if !bytes.Equal(b, orig) {
			t.Fatal("Append modified the caller's batch")
		}
		if got := mustRead(t, l, base, 1, l.EndOffset()); !bytes.Equal(got, stamped(b, base, 77)) {
			t.Fatalf("batch at %d (%d bytes) did not read back stamped", base, len(b))
		}
	}
}

func TestLog_RejectedBatchLeavesLogUntouched(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	mustAppend(t, l, uniformBatch(t, 2, 10, 0), 1)
	size := l.Size()
	bad := uniformBatch(t, 2, 10, 0)
	bad[len(bad)-1] ^= 1
	if _, _, err := l.Append(bad, 1); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("Append(corrupt) = %v, want ErrCorruptBatch", err)
	}
	huge := batchOfSize(t, 3<<10, 100)
	if _, _, err := l.Append(huge, 1); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("Append(huge) = %v, want ErrBatchTooLarge", err)
	}
	if l.EndOffset() != 2 || l.Size() != size || l.Err() != nil {
		t.Fatalf("log changed: end %d size %d (was %d) err %v", l.EndOffset(), l.Size(), size, l.Err())
	}
	st, err := os.Stat(filepath.Join(dir, "00000000000000000000.log"))
	if err != nil || st.Size() != size {
		t.Fatalf("segment file size %v (%v), want %d", st.Size(), err, size)
	}
}

// AppendValidated takes a committed batch over MaxBatchBytes and over
// SegmentBytes (in a segment of its own): every replica must take what
// raft committed, whatever limits it has at the time.
func TestLog_AppendValidatedIgnoresSizeLimits(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 2048, 2048
	l := openLog(t, t.TempDir(), cfg)
	mustAppend(t, l, uniformBatch(t, 2, 10, 0), 1)
	huge := batchOfSize(t, 3<<10, 100)
	if _, _, err := l.Append(huge, 1); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("Append(huge) = %v, want ErrBatchTooLarge", err)
	}
	base, _, err := l.AppendValidated(huge, 1)
	if err != nil || base != 2 {
		t.Fatalf("AppendValidated(huge) = %d, %v; want it at offset 2", base, err)
	}
	if segs := l.Segments(); len(segs) != 2 || segs[1].Base != 2 {
		t.Fatalf("segments %+v; want the big batch alone in a second one", segs)
	}
}

func TestLog_AppendValidatedSkipsCRC(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	b := uniformBatch(t, 2, 10, 0)
	b[len(b)-1] ^= 1 // the caller vouched for it; only the header is checked
	if _, _, err := l.AppendValidated(b, 0); err != nil {
		t.Fatalf("AppendValidated: %v", err)
	}
	if _, _, err := l.AppendValidated(b[:30], 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("AppendValidated(short) = %v, want ErrCorruptBatch", err)
	}
}

func TestLog_ReadRules(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	var batches [][]byte
	for i := range 6 {
		b := uniformBatch(t, 3, 100, int64(i))
		base, _ := mustAppend(t, l, b, 0)
		batches = append(batches, stamped(b, base, 0))
	}
	one := len(batches[0])
	cases := []struct {
		name          string
		offset        int64
		maxBytes      int
		upTo          int64
		first, nbatch int
	}{
		{"whole log", 0, 1 << 20, 18, 0, 6},
		{"mid-batch offset returns the containing batch", 4, 1 << 20, 18, 1, 5},
		{"at least one batch", 7, 1, 18, 2, 1},
		{"maxBytes counts whole batches", 0, 2*one + one/2, 18, 0, 2},
		{"maxBytes exact", 0, 3 * one, 18, 0, 3},
		{"upTo excludes its batch", 0, 1 << 20, 9, 0, 3},
		{"upTo mid-batch excludes the straddler", 0, 1 << 20, 10, 0, 3},
		{"first batch beyond upTo", 9, 1 << 20, 10, 0, 0},
		{"at upTo", 9, 1 << 20, 9, 0, 0},
		{"at end", 18, 1 << 20, 18, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := splitBatches(t, mustRead(t, l, c.offset, c.maxBytes, c.upTo))
			want := batches[c.first : c.first+c.nbatch]
			if c.nbatch == 0 {
				want = nil
			}
			if !equalBatches(got, want) {
				t.Fatalf("got %d batches, want batches %d..%d", len(got), c.first, c.first+c.nbatch)
			}
		})
	}
	for _, off := range []int64{-1, 19} {
		_, err := l.Read(off, 100, 18)
		var oor *OffsetOutOfRangeError
		if !errors.As(err, &oor) || oor.Start != 0 || oor.End != 18 {
			t.Errorf("Read(%d) = %v, want *OffsetOutOfRangeError [0, 18]", off, err)
		}
	}
}

func TestLog_ReadStaysInOneSegment(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, uniformBatch(t, 2, 10, 0), 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, uniformBatch(t, 2, 10, 0), 0)
	r, err := l.readSpan(0, 1<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	if r.first != 0 || r.next != 2 || r.base != 0 {
		t.Fatalf("range %+v, want the first segment's one batch", r)
	}
	if segs := l.Segments(); len(segs) != 2 || segs[1].Base != 2 {
		t.Fatalf("segments %+v", segs)
	}
}

func TestLog_ReadUsesTheIndex(t *testing.T) {
	fsys := newFaultFS()
	cfg := testConfig()
	cfg.FS, cfg.SegmentBytes = fsys, 8<<20
	l := openLog(t, t.TempDir(), cfg)
	for range 2000 {
		mustAppend(t, l, uniformBatch(t, 1, 100, 0), 0)
	}
	before := fsys.read.Load()
	got := splitBatches(t, mustRead(t, l, 1990, 300, 2000))
	if len(got) != 1 {
		t.Fatalf("got %d batches", len(got))
	}
	if read := fsys.read.Load() - before; read > 4*int64(walkBufSize) {
		t.Fatalf("a read near the end of a %d-byte segment read %d bytes: no index lookup", l.Size(), read)
	}
}

func TestLog_RollsBySize(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	l := openLog(t, t.TempDir(), cfg)
	b := uniformBatch(t, 5, 150, 0) // ~900 bytes
	for range 20 {
		mustAppend(t, l, b, 0)
	}
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments after %d bytes with 4 KiB segments", len(segs), 20*len(b))
	}
	for i, s := range segs {
		if s.Size > cfg.SegmentBytes {
			t.Errorf("segment %d is %d bytes", i, s.Size)
		}
		if i > 0 && s.Base != segs[i-1].Next {
			t.Errorf("segment %d starts at %d, previous ends at %d", i, s.Base, segs[i-1].Next)
		}
	}
}

func TestLog_RollsByAge(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock, cfg.SegmentAge = clock.Now, time.Hour
	l := openLog(t, t.TempDir(), cfg)
	mustAppend(t, l, uniformBatch(t, 1, 10, 0), 0)
	clock.Advance(59 * time.Minute)
	mustAppend(t, l, uniformBatch(t, 1, 10, 0), 0)
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments before the age limit", n)
	}
	clock.Advance(time.Minute)
	mustAppend(t, l, uniformBatch(t, 1, 10, 0), 0)
	if segs := l.Segments(); len(segs) != 2 || segs[1].Base != 2 {
		t.Fatalf("segments %+v after the age limit, want a new one at 2", segs)
	}
}

func TestLog_ReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 8192
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 40 {
		b := uniformBatch(t, 1+i%4, 120, int64(i))
		base, last := mustAppend(t, l, b, int32(i))
		if last >= 3 {
			want = append(want, stamped(b, base, int32(i))...)
		}
	}
	if err := l.AdvanceStart(3); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Every batch's CRC is checked at open: each byte is read once, and
	// nothing is written. Trusting the files reads a few KiB.
	for _, trust := range []bool{true, false} {
		fsys := newFaultFS()
		cfg.FS, cfg.UnsafeSkipCRCChecks = fsys, trust
		l = openLog(t, dir, cfg)
		limit := int64(len(want)) + 4096
		if trust {
			limit = int64(len(want)) / 2
		}
		if read := fsys.read.Load(); read > limit {
			t.Errorf("reopening after a clean close (trusting the files: %v) read %d of %d bytes", trust, read, len(want))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cfg.FS, cfg.UnsafeSkipCRCChecks = nil, false
	l = openLog(t, dir, cfg)
	if l.StartOffset() != 3 {
		t.Errorf("start %d after reopen, want 3", l.StartOffset())
	}
	var got []byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		r, err := l.readSpan(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		got, _ = r.appendTo(got)
		off = r.next
		r.release()
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("reopened log holds %d bytes, want the %d appended", len(got), len(want))
	}
}

func TestLog_Truncate(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		mustAppend(t, l, uniformBatch(t, 3, 100, 0), 0) // 3 offsets each
	}
	if err := l.SetHighWatermark(90); err != nil {
		t.Fatal(err)
	}
	end, err := l.Truncate(40) // inside the batch [39, 41]
	if err != nil || end != 39 {
		t.Fatalf("Truncate(40) = %d, %v; want 39", end, err)
	}
	if l.EndOffset() != 39 || l.HighWatermark() != 39 {
		t.Fatalf("end %d hw %d after truncate, want 39", l.EndOffset(), l.HighWatermark())
	}
	if segs := l.Segments(); segs[len(segs)-1].Next != 39 {
		t.Fatalf("last segment %+v", segs[len(segs)-1])
	}
	base, _ := mustAppend(t, l, uniformBatch(t, 2, 10, 0), 0)
	if base != 39 {
		t.Fatalf("append after truncate at %d", base)
	}
	if err := l.AdvanceStart(20); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Truncate(10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Truncate below start = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	if l.EndOffset() != 41 {
		t.Fatalf("end %d after reopen, want 41", l.EndOffset())
	}
}

func TestLog_Reset(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, uniformBatch(t, 3, 10, 0), 0)
	if err := l.Reset(1000); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 1000 || l.EndOffset() != 1000 || l.HighWatermark() != 1000 {
		t.Fatalf("after Reset: start %d end %d hw %d", l.StartOffset(), l.EndOffset(), l.HighWatermark())
	}
	base, _ := mustAppend(t, l, uniformBatch(t, 3, 10, 0), 0)
	if base != 1000 {
		t.Fatalf("append after reset at %d", base)
	}
	l.Close()
	l = openLog(t, dir, testConfig())
	if l.StartOffset() != 1000 || l.EndOffset() != 1003 {
		t.Fatalf("after reopen: start %d end %d", l.StartOffset(), l.EndOffset())
	}
	if segs := l.Segments(); len(segs) != 1 || segs[0].Base != 1000 {
		t.Fatalf("segments %+v", segs)
	}
}

func TestLog_ClosedLogRefusesEverything(t *testing.T) {
	l, err := Open(t.TempDir(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, _, err := l.Append(uniformBatch(t, 1, 1, 0), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Append = %v", err)
	}
	if _, err := l.Read(0, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Read = %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// Writeback starts once WritebackBytes are appended, and restarts from the
// cut after a truncation.
func TestLog_WritebackFollowsAppends(t *testing.T) {
	cfg := testConfig()
	cfg.WritebackBytes = 2048
	l := openLog(t, t.TempDir(), cfg)
	batch := makeBatch(t, batchSpec{records: []testRecord{{ts: 1, value: make([]byte, 1500)}}, producerID: -1})
	mustAppend(t, l, batch, 1)
	s := l.active()
	if s.writtenBack != 0 {
		t.Fatalf("writeback started at %d bytes, below the %d threshold", s.size, cfg.WritebackBytes)
	}
	mustAppend(t, l, batch, 1)
	if s.writtenBack != s.size {
		t.Fatalf("writeback covers %d of %d bytes", s.writtenBack, s.size)
	}
	if _, err := l.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if s.writtenBack != 0 {
		t.Fatalf("writeback mark %d beyond the truncated segment", s.writtenBack)
	}
}

// Read copies after it lets Log.mu go: its span keeps the segment file
// open through a retention that deletes it.
func TestLog_ReadSpanOutlivesRetention(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	l := openLog(t, t.TempDir(), cfg)
	fillLog(t, l, 30)
	r, err := l.readSpan(0, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := r.appendTo(nil)
	if err := l.AdvanceStart(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	got, err := r.appendTo(nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("span over a deleted segment: %v", err)
	}
	r.release()
	r.release() // idempotent
	if _, err := r.seg.f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("deleted segment still open after the last release: %v", err)
	}
}
