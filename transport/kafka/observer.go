package kafka

import (
	"errors"
	"sync/atomic"
	"time"
)

// Observer receives the server's counts and latencies; the broker backs it
// with Prometheus. Methods are called from connection goroutines, many at
// once, and must not block.
type Observer interface {
	// ConnOpened is called when a connection is accepted, before its first
	// request is read.
	ConnOpened(c *Conn)
	// ConnClosed is called once per connection after its goroutines have
	// ended. reason is nil for a clean close (the peer closed at a frame
	// boundary and every response was written); otherwise it wraps one of
	// the Err* sentinels, or is a socket error.
	ConnClosed(c *Conn, reason error)
	// RequestDone is called once per decoded request, on the connection's
	// writer goroutine, when its response has been written (or skipped, or
	// failed). latency runs from the end of reading the frame.
	RequestDone(c *Conn, key, version int16, outcome Outcome, latency time.Duration)
}

// Outcome says how a request ended.
type Outcome uint8

const (
	// OutcomeResponse: the handler's response was written.
	OutcomeResponse Outcome = iota
	// OutcomeNoResponse: the handler asked for no response (acks=0).
	OutcomeNoResponse
	// OutcomeRejected: the server answered UNSUPPORTED_VERSION itself
	// without calling the handler.
	OutcomeRejected
	// OutcomeFailed: no response; the connection was closed.
	OutcomeFailed
)

func (o Outcome) String() string {
	switch o {
	case OutcomeResponse:
		return "response"
	case OutcomeNoResponse:
		return "no_response"
	case OutcomeRejected:
		return "rejected"
	case OutcomeFailed:
		return "failed"
	}
	return "unknown"
}

type nopObserver struct{}

func (nopObserver) ConnOpened(*Conn)                                        {}
func (nopObserver) ConnClosed(*Conn, error)                                 {}
func (nopObserver) RequestDone(*Conn, int16, int16, Outcome, time.Duration) {}

// statsKeys bounds the per-key counters; higher keys share the last slot.
const statsKeys = 128

// Stats is a lock-free Observer that counts; use it directly or alongside
// a metrics backend. Its zero value is ready.
type Stats struct {
	connsOpen, connsTotal atomic.Int64
	closedByError         atomic.Uint64
	tooLarge, malformed   atomic.Uint64
	requests              [statsKeys]atomic.Uint64
	latencyNanos          [statsKeys]atomic.Uint64
	outcomes              [OutcomeFailed + 1]atomic.Uint64
}

var _ Observer = (*Stats)(nil)

// ConnOpened counts an accepted connection.
func (s *Stats) ConnOpened(*Conn) {
	s.connsOpen.Add(1)
	s.connsTotal.Add(1)
}

// ConnClosed counts a closed connection and classifies its reason.
func (s *Stats) ConnClosed(_ *Conn, reason error) {
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
func (s *Stats) RequestDone(_ *Conn, key, _ int16, outcome Outcome, latency time.Duration) {
	k := min(max(int(key), 0), statsKeys-1)
	s.requests[k].Add(1)
	s.latencyNanos[k].Add(uint64(latency))
	s.outcomes[outcome].Add(1)
}

// StatsSnapshot is a point-in-time copy of Stats.
type StatsSnapshot struct {
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
func (s *Stats) Snapshot() StatsSnapshot {
	out := StatsSnapshot{
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
