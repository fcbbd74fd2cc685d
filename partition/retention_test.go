package partition

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestLog_AdvanceStartDeletesWholeSegments(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	l := openLog(t, t.TempDir(), cfg)
	fillLog(t, l, 30)
	segs := l.Segments()
	mid := segs[2].Base + 1 // inside the third segment
	if err := l.AdvanceStart(mid); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != mid {
		t.Fatalf("start %d, want %d", l.StartOffset(), mid)
	}
	after := l.Segments()
	if after[0].Base != segs[2].Base {
		t.Fatalf("first segment now %d, want %d", after[0].Base, segs[2].Base)
	}
	for _, s := range segs[:2] {
		if _, err := os.Stat(s.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("segment %d still on disk", s.Base)
		}
	}
	if _, err := l.Read(mid-1, 100, l.EndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the start = %v", err)
	}
	b := mustRead(t, l, mid, 1, l.EndOffset())
	if info, _ := ParseBatchHeader(splitBatches(t, b)[0]); info.BaseOffset > mid {
		t.Fatalf("read at the start returned batch %d", info.BaseOffset)
	}
	if err := l.AdvanceStart(l.EndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("AdvanceStart past the end = %v", err)
	}
	end := l.EndOffset()
	if err := l.AdvanceStart(end); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments after advancing to the end; the active one must stay", n)
	}
	if l.HighWatermark() != end {
		t.Fatalf("hw %d, want it raised to the start %d", l.HighWatermark(), end)
	}
}

func TestLog_RetentionBySize(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	cfg.RetentionBytes = 5000
	cfg.RetentionAge = 0 // the batches are stamped in 1970
	l := openLog(t, t.TempDir(), cfg)
	fillLog(t, l, 40)
	if got := l.RetentionOffset(); got != 0 {
		t.Fatalf("retention offers %d with the high watermark at 0", got)
	}
	if err := l.SetHighWatermark(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	off, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if off != segs[0].Base || l.StartOffset() != off {
		t.Fatalf("retention moved start to %d; first segment %d", off, segs[0].Base)
	}
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	if total-segs[0].Size >= cfg.RetentionBytes {
		t.Fatalf("kept %d bytes; dropping the oldest segment would still leave %d >= %d", total, total-segs[0].Size, cfg.RetentionBytes)
	}
	if total < cfg.RetentionBytes {
		t.Fatalf("kept %d bytes, below the %d retained", total, cfg.RetentionBytes)
	}
}

func TestLog_RetentionByAge(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock, cfg.RetentionAge = clock.Now, time.Hour
	l := openLog(t, t.TempDir(), cfg)
	now := clock.Now().UnixMilli()
	for i, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, 30 * time.Minute, time.Minute} {
		mustAppend(t, l, uniformBatch(t, 1, 10, now-age.Milliseconds()), 0)
		if i < 3 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.SetHighWatermark(l.EndOffset())
	if got := l.RetentionOffset(); got != 2 {
		t.Fatalf("retention by age offers %d, want 2 (two segments older than an hour)", got)
	}
	clock.Advance(40 * time.Minute)
	if got := l.RetentionOffset(); got != 3 {
		t.Fatalf("after 40 minutes retention offers %d, want 3", got)
	}
	clock.Advance(24 * time.Hour)
	if got := l.RetentionOffset(); got != 3 {
		t.Fatalf("retention offers %d, want 3: the active segment stays", got)
	}
}

// SetLimits takes effect on an open log: a smaller segment size rolls at
// the next append, and a retention size set later is applied by the next
// retention pass. Limits that cannot work are refused and change nothing.
func TestLog_SetLimitsWhileOpen(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionAge = 0 // the batches are stamped in 1970
	l := openLog(t, t.TempDir(), cfg)
	fillLog(t, l, 20)
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments before the change, want 1", n)
	}
	if err := l.SetHighWatermark(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if got := l.RetentionOffset(); got != 0 {
		t.Fatalf("retention offers %d with unlimited retention", got)
	}
	lim := cfg.Limits
	lim.SegmentBytes, lim.MaxBatchBytes = 2048, 2048
	if err := l.SetLimits(lim); err != nil {
		t.Fatal(err)
	}
	fillLog(t, l, 20)
	if n := len(l.Segments()); n < 3 {
		t.Fatalf("%d segments after the segment size fell to 2048, want several", n)
	}
	if err := l.SetHighWatermark(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	lim.RetentionBytes = 3000
	if err := l.SetLimits(lim); err != nil {
		t.Fatal(err)
	}
	if got := l.RetentionOffset(); got <= 0 {
		t.Fatalf("retention offers %d after retention.bytes fell to 3000", got)
	}
	bad := lim
	bad.SegmentBytes = 10
	if err := l.SetLimits(bad); err == nil {
		t.Fatal("a 10-byte segment size was accepted")
	}
	if l.limits().SegmentBytes != 2048 {
		t.Fatalf("a refused change took effect: segment bytes %d", l.limits().SegmentBytes)
	}
}
