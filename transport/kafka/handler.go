package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler serves the decoded requests of every connection of a Server. The
// broker implements it; doc.go states the full contract.
type Handler interface {
	// APIs lists each API key the handler serves with its version range.
	// Start calls it once. Requests outside these ranges never reach Serve:
	// the server answers them with UNSUPPORTED_VERSION or closes the
	// connection.
	APIs() []APIRange

	// Serve starts req and returns its eventual response. It is called on
	// the connection's reader goroutine, one request at a time per
	// connection, in arrival order, and must return quickly: the next
	// request of that connection is not read until it returns. Work that
	// waits (raft commit, fetch long-poll) continues on the handler's own
	// goroutines and completes the returned Pending. Serve owns req from
	// the call on. It never returns nil.
	Serve(c *Conn, req *Request) Pending
}

// APIRange is one API key and the versions served for it, inclusive.
type APIRange struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
}

// Header is a decoded request header (v0, v1, or v2 with tagged fields for
// flexible versions).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is nil when the client sent a null client id.
	ClientID *string
	// Tags holds header v2 tagged fields; empty for other header versions.
	Tags kmsg.Tags
}

// Request is one decoded request handed to Handler.Serve.
type Request struct {
	Header Header
	// Body is the decoded request at Header.Version. Its byte slices (for
	// example Produce record batches) alias the frame buffer, which the
	// server allocated for this request alone and never reuses; strings
	// are copies.
	Body kmsg.Request
	// Size is the frame's length in bytes, without its 4-byte prefix.
	Size int
	// Received is when the server finished reading the frame.
	Received time.Time
}

// Pending is the eventual outcome of one request. The connection's writer
// goroutine waits on Done in request order and then calls Result once.
type Pending interface {
	// Done returns a channel that is closed when Result no longer blocks.
	Done() <-chan struct{}
	// Result returns the response to write. A nil Response with a nil
	// error means the request gets no response on the wire (Produce with
	// acks=0); the writer moves on to the next request. A non-nil error
	// closes the connection once the responses before it are written.
	Result() (kmsg.Response, error)
}

// Ready returns a Pending that is already complete with resp. A nil resp
// means no response.
func Ready(resp kmsg.Response) Pending { return &done{resp: resp} }

// NoResponse returns a complete Pending with no response, for requests
// Kafka does not answer (Produce with acks=0).
func NoResponse() Pending { return &done{} }

// Fail returns a complete Pending that closes the connection with err after
// the responses before it are written.
func Fail(err error) Pending { return &done{err: err} }

type done struct {
	resp kmsg.Response
	err  error
}

// closedCh is shared by every complete Pending; it is only ever read.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (d *done) Done() <-chan struct{}          { return closedCh }
func (d *done) Result() (kmsg.Response, error) { return d.resp, d.err }
