package kafka

import "time"

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
