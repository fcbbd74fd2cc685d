package raftgroup

import (
	"log/slog"
	"time"
)

// slowReady is how long one Ready may take before the group logs where
// the time went. A Ready holds up every proposal of its group, so a slow
// one shows up directly as produce latency.
const slowReady = 100 * time.Millisecond

// readyTimer splits the handling of one Ready into its costly phases.
type readyTimer struct {
	began, last           time.Time
	save, apply, snapshot time.Duration
}

func startReadyTimer() readyTimer {
	now := time.Now()
	return readyTimer{began: now, last: now}
}

// mark charges the time since the previous mark to phase.
func (t *readyTimer) mark(phase *time.Duration) {
	now := time.Now()
	*phase += now.Sub(t.last)
	t.last = now
}

func (t *readyTimer) report(log *slog.Logger) {
	total := time.Since(t.began)
	if total < slowReady {
		return
	}
	log.Warn("slow raft ready", "took", total, "save", t.save, "apply", t.apply, "snapshot", t.snapshot)
}
