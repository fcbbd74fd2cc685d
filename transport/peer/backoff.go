package peer

import (
	"math/rand/v2"
	"time"
)

// backoff yields jittered, exponentially growing waits between min and max.
// Each wait is drawn uniformly from [d/2, d] where d doubles per attempt, so
// nodes that lost a peer at the same moment do not redial in lockstep.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max}
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

func (b *backoff) reset() { b.cur = 0 }
