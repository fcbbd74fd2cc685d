package partition

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestLog_ConcurrentReadersSeeOnlyWholeCommittedBatches runs one appender
// (appending, moving the high watermark, rolling, truncating its
// uncommitted tail, applying retention) against readers that follow the
// high watermark and check every batch they get byte for byte.
func TestLog_ConcurrentReadersSeeOnlyWholeCommittedBatches(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	cfg.RetentionBytes = 16 << 10
	cfg.RetentionAge = 0
	l := openLog(t, t.TempDir(), cfg)
	var stored sync.Map // base offset -> stored bytes
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			follow(ctx, t, l, &stored, r)
		}()
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 800 {
		b, _ := randomBatch(t, rng, 4, 200, int64(i))
		base, _ := mustAppend(t, l, b, 1)
		stored.Store(base, stamped(b, base, 1))
		switch x := rng.IntN(10); {
		case x < 6:
			if err := l.SetHighWatermark(l.EndOffset()); err != nil {
				t.Fatal(err)
			}
		case x == 6 && i%3 == 0:
			if _, err := l.Truncate(l.HighWatermark()); err != nil {
				t.Fatal(err)
			}
		case x == 7:
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
		case x == 8:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel()
	wg.Wait()
}

func follow(ctx context.Context, t *testing.T, l *Log, stored *sync.Map, seed int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	off := int64(0)
	for ctx.Err() == nil {
		hw, err := l.WaitHighWatermark(ctx, off)
		if err != nil {
			return
		}
		b, err := l.Read(off, 1+rng.IntN(3000), hw)
		if err != nil {
			if start := l.StartOffset(); off < start { // retention overtook us
				off = start
				continue
			}
			t.Errorf("Read(%d, hw %d): %v", off, hw, err)
			return
		}
		if len(b) == 0 {
			t.Errorf("empty read at %d below hw %d (start %d end %d)", off, hw, l.StartOffset(), l.EndOffset())
			return
		}
		for _, batch := range splitBatches(t, b) {
			info, _ := ParseBatchHeader(batch)
			want, ok := stored.Load(info.BaseOffset)
			if !ok || !bytes.Equal(batch, want.([]byte)) {
				t.Errorf("batch at %d is not the one appended there", info.BaseOffset)
				return
			}
			if info.BaseOffset+int64(info.LastOffsetDelta) >= hw {
				t.Errorf("batch at %d reaches past the high watermark %d", info.BaseOffset, hw)
			}
			off = info.BaseOffset + int64(info.LastOffsetDelta) + 1
		}
	}
}

// SyncData runs beside appends, rolls and retention (as a raft snapshot's
// fsync runs beside the apply loop) without losing or tearing a batch.
func TestLog_SyncDataAlongsideAppends(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	cfg.RetentionBytes = 32 << 10
	cfg.RetentionAge = 0
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	stop := make(chan struct{})
	syncErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				syncErr <- nil
				return
			default:
			}
			if err := l.SyncData(); err != nil {
				syncErr <- err
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(9, 9))
	var last []byte
	for i := range 600 {
		b, _ := randomBatch(t, rng, 4, 200, int64(i))
		base, _ := mustAppend(t, l, b, 1)
		last = stamped(b, base, 1)
		if i%50 == 49 {
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	if err := <-syncErr; err != nil {
		t.Fatalf("SyncData: %v", err)
	}
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	if l.EndOffset() != end {
		t.Fatalf("reopened log ends at %d, want %d", l.EndOffset(), end)
	}
	if err := l.SetHighWatermark(end); err != nil {
		t.Fatal(err)
	}
	info, err := ParseBatchHeader(last)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, l, info.BaseOffset, 1<<20, end); !bytes.Equal(got, last) {
		t.Fatal("last batch differs after reopen")
	}
}
