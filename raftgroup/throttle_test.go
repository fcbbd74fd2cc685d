package raftgroup

import (
	"bytes"
	"io"
	"testing"

	"golang.org/x/time/rate"
)

// A throttled body reads at most a burst at a time and takes what it
// read from the limiter, so that the next read waits for the rate.
func TestThrottledBody_TakesWhatItReads(t *testing.T) {
	burst := throttleBurst(1) // 1 byte/s: the floor of 64 KiB
	lim := rate.NewLimiter(1, burst)
	b := &throttledBody{ReadCloser: io.NopCloser(bytes.NewReader(make([]byte, 1<<20))), lim: lim}
	n, err := b.Read(make([]byte, 1<<20))
	if err != nil || n != burst {
		t.Fatalf("read %d, %v; want one burst of %d", n, err, burst)
	}
	if tok := lim.Tokens(); tok > 1 {
		t.Fatalf("%.0f tokens left after a burst's read: the read was not charged", tok)
	}
	if got := throttleBurst(100 << 20); got != 10<<20 {
		t.Fatalf("burst at 100 MiB/s is %d, want a tenth of a second's worth", got)
	}
}
