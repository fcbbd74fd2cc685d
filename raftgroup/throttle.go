package raftgroup

import (
	"context"
	"io"

	"golang.org/x/time/rate"
)

// throttledBody paces the reads of a snapshot body to a limiter shared
// by every snapshot the host sends to learners.
type throttledBody struct {
	io.ReadCloser
	lim *rate.Limiter
}

func (b *throttledBody) Read(p []byte) (int, error) {
	if burst := b.lim.Burst(); len(p) > burst {
		p = p[:burst]
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		// Never cancelled: a wait lasts one burst's worth of time at
		// most, a tenth of a second (throttleBurst).
		_ = b.lim.WaitN(context.Background(), n)
	}
	return n, err
}

// throttleBurst is a limiter's burst for bytesPerSec: a tenth of a
// second's worth, at least 64 KiB, so that reads stay large.
func throttleBurst(bytesPerSec float64) int {
	return max(int(bytesPerSec/10), 64<<10)
}
