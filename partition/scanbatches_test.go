package partition

import (
	"errors"
	"testing"
)

func TestLog_AppendReplica(t *testing.T) {
	src := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, src, plainBatch(t, "a", "b"), 4)
	mustAppend(t, src, plainBatch(t, "c"), 6)
	stored := splitBatches(t, mustRead(t, src, 0, 1<<20, src.EndOffset()))

	dst := openLog(t, t.TempDir(), testConfig())
	if _, _, err := dst.AppendReplica(stored[1]); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("AppendReplica at the wrong offset: %v, want ErrOffsetMismatch", err)
	}
	if got := dst.EndOffset(); got != 0 {
		t.Fatalf("refused append moved the end to %d", got)
	}
	for _, b := range stored {
		if _, _, err := dst.AppendReplica(b); err != nil {
			t.Fatalf("AppendReplica: %v", err)
		}
	}
	if got := splitBatches(t, mustRead(t, dst, 0, 1<<20, dst.EndOffset())); !equalBatches(got, stored) {
		t.Fatal("replicated log differs from its source byte for byte")
	}
}

func TestLog_ScanBatches(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 1<<10, 512 // several segments
	l := openLog(t, t.TempDir(), cfg)
	var bases []int64
	for i := range 40 {
		base, _ := mustAppend(t, l, idemBatch(t, 9, 1, int32(3*i), "x", "y", "z"), int32(i/10))
		bases = append(bases, base)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, have %d", len(l.Segments()))
	}
	var got []BatchInfo
	if err := l.ScanBatches(7, 1000, func(info BatchInfo) error { got = append(got, info); return nil }); err != nil {
		t.Fatalf("ScanBatches: %v", err)
	}
	if len(got) != 38 || got[0].BaseOffset != 6 {
		t.Fatalf("scan from 7 saw %d batches from %d, want 38 from 6", len(got), got[0].BaseOffset)
	}
	for i, info := range got {
		k := i + 2
		want := BatchInfo{BaseOffset: bases[k], LeaderEpoch: int32(k / 10), ProducerID: 9, ProducerEpoch: 1, BaseSequence: int32(3 * k), LastOffsetDelta: 2, NumRecords: 3}
		if info.BaseOffset != want.BaseOffset || info.LeaderEpoch != want.LeaderEpoch || info.ProducerID != 9 ||
			info.ProducerEpoch != 1 || info.BaseSequence != want.BaseSequence || info.NumRecords != 3 || info.LastOffsetDelta != 2 {
			t.Fatalf("batch %d: %+v, want %+v", k, info, want)
		}
	}
	n := 0
	if err := l.ScanBatches(0, 12, func(BatchInfo) error { n++; return nil }); err != nil || n != 4 {
		t.Fatalf("scan [0, 12): %d batches, %v; want 4", n, err)
	}
	stop := errors.New("stop")
	if err := l.ScanBatches(0, 1000, func(BatchInfo) error { return stop }); err != stop {
		t.Fatalf("scan error %v, want fn's", err)
	}
}
