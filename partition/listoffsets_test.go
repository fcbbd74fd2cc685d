package partition

import (
	"math/rand/v2"
	"testing"
)

func TestLog_ListOffsetEarliestLatest(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	fillLog(t, l, 10)
	l.AdvanceStart(4)
	cases := []struct{ ts, upTo, want int64 }{
		{ListEarliest, 15, 4},
		{ListLatest, 15, 15},
		{ListLatest, 1000, l.EndOffset()},
	}
	for _, c := range cases {
		off, ts, err := l.ListOffset(c.ts, c.upTo)
		if err != nil || off != c.want || ts != -1 {
			t.Errorf("ListOffset(%d, %d) = %d, %d, %v; want %d, -1", c.ts, c.upTo, off, ts, err, c.want)
		}
	}
}

func TestLog_OffsetForTimestampMatchesModel(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	l := openLog(t, t.TempDir(), cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	type rec struct{ off, ts int64 }
	var recs []rec
	ts := int64(10_000)
	for range 80 {
		b, times := randomBatch(t, rng, 6, 80, ts)
		base, _ := mustAppend(t, l, b, 0)
		for i, x := range times {
			recs = append(recs, rec{base + int64(i), x})
		}
		ts += int64(rng.IntN(30))
	}
	start := int64(7)
	l.AdvanceStart(start)
	end := l.EndOffset()
	model := func(q, upTo int64) (int64, int64) {
		// upTo is a batch boundary here, so record offsets below it are visible.
		for _, r := range recs {
			if r.off >= start && r.off < upTo && r.ts >= q {
				return r.off, r.ts
			}
		}
		return -1, -1
	}
	for _, upTo := range []int64{end, end / 2} {
		upTo = batchBoundaryAtOrBelow(t, l, upTo)
		for q := int64(9_000); q < ts+100; q += 7 {
			off, got, err := l.OffsetForTimestamp(q, upTo)
			wantOff, wantTS := model(q, upTo)
			if err != nil || off != wantOff || got != wantTS {
				t.Fatalf("OffsetForTimestamp(%d, %d) = %d, %d, %v; want %d, %d", q, upTo, off, got, err, wantOff, wantTS)
			}
		}
	}
}

// batchBoundaryAtOrBelow returns the base of the batch containing offset.
func batchBoundaryAtOrBelow(t *testing.T, l *Log, offset int64) int64 {
	t.Helper()
	if offset >= l.EndOffset() {
		return l.EndOffset()
	}
	r, err := l.readSpan(offset, 1, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	return r.first
}
