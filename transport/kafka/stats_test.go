package kafka

import (
	"errors"
	"sync/atomic"
	"time"
)

// statsKeys bounds the per-key counters; higher keys share the last slot.
const statsKeys = 128

// stats is a lock-free Observer that counts, so tests can see what the
// server reported. Its zero value is ready.
type stats struct {
	connsOpen, connsTotal atomic.Int64
	closedByError         atomic.Uint64
	tooLarge, malformed   atomic.Uint64
	requests              [statsKeys]atomic.Uint64
	latencyNanos          [statsKeys]atomic.Uint64
	outcomes              [OutcomeFailed + 1]atomic.Uint64
}

var _ Observer = (*stats)(nil)

// ConnOpened counts an accepted connection.
func (s *stats) ConnOpened(*Conn) {
	s.connsOpen.Add(1)
	s.connsTotal.Add(1)
}

// ConnClosed counts a closed connection and classifies its reason.
func (s *stats) ConnClosed(_ *Conn, reason error) {
	s.connsOpen.Add(-1)
	switch {
	case reason == nil || errors.Is(reason, ErrServerClosed):
		return
	case errors.Is(reason, ErrFrameTooLarge):
		s.tooLarge.Add(1)
	case errors.Is(reason, ErrMalformed), errors.Is(reason, ErrTruncated), errors.Is(reason, ErrUnsupportedVersion):
		s.malformed.Add(1)
	}
	s.closedByError.Add(1)
}

// RequestDone counts a request by key and outcome and adds its latency.
func (s *stats) RequestDone(_ *Conn, key, _ int16, outcome Outcome, latency time.Duration) {
	k := min(max(int(key), 0), statsKeys-1)
	s.requests[k].Add(1)
	s.latencyNanos[k].Add(uint64(latency))
	s.outcomes[outcome].Add(1)
}

// statsSnapshot is a point-in-time copy of stats.
type statsSnapshot struct {
	ConnsOpen, ConnsTotal int64
	// ClosedByError counts connections closed for any reason but a clean
	// close or server shutdown. TooLarge (ErrFrameTooLarge) and Malformed
	// (ErrMalformed, ErrTruncated, ErrUnsupportedVersion) are part of it.
	ClosedByError, TooLarge, Malformed uint64
	// Requests and LatencyNanos are per API key, for keys seen.
	Requests     map[int16]uint64
	LatencyNanos map[int16]uint64
	Outcomes     map[Outcome]uint64
}

// Snapshot copies the counters.
func (s *stats) Snapshot() statsSnapshot {
	out := statsSnapshot{
		ConnsOpen: s.connsOpen.Load(), ConnsTotal: s.connsTotal.Load(),
		ClosedByError: s.closedByError.Load(), TooLarge: s.tooLarge.Load(), Malformed: s.malformed.Load(),
		Requests: map[int16]uint64{}, LatencyNanos: map[int16]uint64{}, Outcomes: map[Outcome]uint64{},
	}
	for k := range s.requests {
		if n := s.requests[k].Load(); n > 0 {
			out.Requests[int16(k)] = n
			out.LatencyNanos[int16(k)] = s.latencyNanos[k].Load()
		}
	}
	for o := range s.outcomes {
		if n := s.outcomes[o].Load(); n > 0 {
			out.Outcomes[Outcome(o)] = n
		}
	}
	return out
}
