package kafka

import (
	"errors"
	"fmt"
)

// Reasons a connection is closed. The server wraps them with detail; test
// with errors.Is.
var (
	// ErrFrameTooLarge: a frame's size prefix exceeds Config.MaxFrameBytes.
	ErrFrameTooLarge = errors.New("kafka: frame too large")
	// ErrMalformed: a frame whose size, header or body cannot be decoded.
	ErrMalformed = errors.New("kafka: malformed request")
	// ErrTruncated: the peer closed the connection in the middle of a frame.
	ErrTruncated = errors.New("kafka: truncated frame")
	// ErrUnknownKey: an API key that kmsg does not know, so the request's
	// body and response cannot even be shaped.
	ErrUnknownKey = errors.New("kafka: unknown api key")
	// ErrUnsupportedVersion: a key or version the handler does not serve and
	// for which no error response can be built (see ErrorResponse).
	ErrUnsupportedVersion = errors.New("kafka: unsupported version")
	// ErrIdle: no request arrived for Config.IdleTimeout while nothing was
	// in flight.
	ErrIdle = errors.New("kafka: connection idle")
	// ErrBadResponse: the handler produced a response that does not match
	// its request (wrong key or version) or does not fit a frame.
	ErrBadResponse = errors.New("kafka: bad response from handler")
	// ErrHandlerPanic: Handler.Serve panicked; the panic is logged with its
	// stack and only that connection is closed.
	ErrHandlerPanic = errors.New("kafka: handler panicked")
	// ErrServerClosed: the server was closed under the connection.
	ErrServerClosed = errors.New("kafka: server closed")
)

// errDrained marks a connection that stopped reading cleanly (peer EOF at a
// frame boundary, or Shutdown) and closed after writing every response.
var errDrained = errors.New("kafka: drained")

// UnsupportedError describes a request the handler does not serve. It wraps
// ErrUnsupportedVersion, and ErrUnknownKey when kmsg does not know the key.
type UnsupportedError struct {
	Key, Version  int16
	CorrelationID int32
	UnknownKey    bool
}

func (e *UnsupportedError) Error() string {
	if e.UnknownKey {
		return fmt.Sprintf("kafka: unknown api key %d (version %d, correlation id %d)", e.Key, e.Version, e.CorrelationID)
	}
	return fmt.Sprintf("kafka: unsupported version %d of api key %d (correlation id %d) and no error response can carry it", e.Version, e.Key, e.CorrelationID)
}

// Unwrap lets errors.Is match the sentinels.
func (e *UnsupportedError) Unwrap() []error {
	if e.UnknownKey {
		return []error{ErrUnknownKey, ErrUnsupportedVersion}
	}
	return []error{ErrUnsupportedVersion}
}
