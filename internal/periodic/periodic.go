package periodic

import (
	"context"
	"time"
)

// Every calls fn every d until ctx ends. A call that takes longer than d
// delays the next; missed ticks are dropped, not queued.
func Every(ctx context.Context, d time.Duration, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			fn()
		case <-ctx.Done():
			return
		}
	}
}
