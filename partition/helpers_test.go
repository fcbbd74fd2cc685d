package partition

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"
)

// testConfig is a small-segment configuration for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 10
	c.IndexIntervalBytes = 512
	c.MaxBatchBytes = 2 << 10
	return c
}

func openLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func mustAppend(t testing.TB, l *Log, batch []byte, epoch int32) (int64, int64) {
	t.Helper()
	base, last, err := l.Append(batch, epoch)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return base, last
}

func mustRead(t testing.TB, l *Log, offset int64, maxBytes int, upTo int64) []byte {
	t.Helper()
	b, err := l.Read(offset, maxBytes, upTo)
	if err != nil {
		t.Fatalf("Read(%d, %d, %d): %v", offset, maxBytes, upTo, err)
	}
	return b
}

// splitBatches cuts a read result into its batches.
func splitBatches(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		info, err := ParseBatchHeader(b[:min(len(b), framePrefix+int(int32(binary.BigEndian.Uint32(b[offLength:]))))])
		if err != nil {
			t.Fatalf("read result holds a bad batch: %v", err)
		}
		out = append(out, b[:info.Size])
		b = b[info.Size:]
	}
	return out
}

func equalBatches(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// fakeClock is a settable clock for roll and retention by age.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// eventually polls cond until it holds, failing the test after a generous
// deadline. It is for conditions another goroutine makes true.
func eventually(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
