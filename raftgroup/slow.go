package raftgroup

import (
	"log/slog"
	"time"
)

// slowReady is how long one Ready may take before the group logs where
// the time went. A Ready holds up every proposal of its group, so a slow
// one shows up directly as produce latency.
const slowReady = 100 * time.Millisecond

// slowReadyEvery is how often one group may log a slow Ready; a disk that
// stays slow would otherwise log every Ready of every group.
const slowReadyEvery = 10 * time.Second

// slowLog is a group's record of the slow Readys it logged.
type slowLog struct {
	last       time.Time
	suppressed int
}

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

func (t *readyTimer) report(log *slog.Logger, sl *slowLog) {
	total := time.Since(t.began)
	if total < slowReady {
		return
	}
	if now := time.Now(); now.Sub(sl.last) >= slowReadyEvery {
		log.Warn("slow raft ready", "took", total, "save", t.save, "apply", t.apply,
			"snapshot", t.snapshot, "more_since_last_report", sl.suppressed)
		sl.last, sl.suppressed = now, 0
		return
	}
	sl.suppressed++
}
