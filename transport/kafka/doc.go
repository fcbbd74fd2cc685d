// Package kafka is raftq's Kafka protocol server: it accepts TCP
// connections, reads size-prefixed request frames, decodes them with
// franz-go's kmsg (flexible versions and tagged fields included), hands
// them to a Handler, and writes the responses in request order. It knows
// nothing about topics, raft or logs; broker/ implements the Handler, one
// file per API.
//
// # Handler contract
//
// Start calls Handler.APIs once. The server admits a request only when its
// key and version fall in one of those ranges; everything else is answered
// or refused by the server itself (see "Bad input") and never reaches the
// handler. The same ranges, passed through APIKeys, are what the broker's
// ApiVersions must advertise.
//
// Each connection has two goroutines owned by the server: a reader and a
// writer.
//
//   - The reader reads a frame, decodes it, and calls Handler.Serve(c, req)
//     on its own goroutine. So for one connection Serve is called one
//     request at a time, in arrival order, and the next frame is not read
//     until Serve returns: two Produce requests to one partition reach the
//     handler, and so raft, in the order the client sent them. Serve must
//     return quickly; anything that waits (a raft commit, a fetch
//     long-poll) runs on the handler's goroutines, and Serve returns a
//     Pending for it. Different connections call Serve concurrently.
//   - The writer takes the Pendings in arrival order, waits on each one's
//     Done channel, calls Result once, and writes the response. Requests
//     therefore complete concurrently, in any order, but their responses
//     leave in arrival order. While the writer waits on a Pending it first
//     writes out the responses already encoded, so a long-poll never holds
//     back earlier answers.
//
// Pending outcomes: a response is written with the response header v0, or
// v1 (with an empty tagged-field section) when the request version is
// flexible, except ApiVersions, whose response header is always v0. The
// response's Key and version must equal the request's (build it with
// req.Body.ResponseKind()); a mismatch closes the connection. A nil
// Response with nil error writes nothing (Produce with acks=0) and the
// writer continues with the next request, still in order. An error closes
// the connection after the responses before it are written. Ready,
// NoResponse, Fail and Future build Pendings; broker types may implement
// Pending themselves. Mux is a Handler that routes each key to its own
// ServeFunc, for a broker with one file per API.
//
// Backpressure: at most Config.MaxInFlight requests per connection are
// read and not yet written (acks=0 requests included until the writer
// passes them). At that bound the reader stops reading the socket, so TCP
// flow control pushes back on the client.
//
// Request buffers: each frame is read into a fresh buffer that the server
// never reuses. The decoded Request, including byte slices that alias that
// buffer (Produce record batches), belongs to the handler from the Serve
// call on; it may keep them as long as it likes. Strings are copies.
//
// Per-connection state: *Conn gives the handler the connection id, the
// remote and local addresses, the latest client id, the client software
// name and version from ApiVersions v3+, and a Context cancelled when the
// connection or the server closes (context.Cause says why). Handlers that
// keep per-connection state clean it up with context.AfterFunc on it.
//
// A panic in Serve is recovered, logged with its stack, and closes that
// connection only.
//
// # Bad input
//
// Each gets a Kafka error or closes only its own connection; the server
// and other connections carry on.
//
//   - Size prefix negative, under 8 bytes, or over Config.MaxFrameBytes
//     (default 100 MiB, Kafka's socket.request.max.bytes): close, with a
//     warning in the log (ErrMalformed, ErrFrameTooLarge). The oversized
//     body is never read or allocated.
//   - Frame cut short by EOF: close (ErrTruncated).
//   - Header or body that kmsg cannot decode: close (ErrMalformed).
//   - API key unknown to kmsg: close (ErrUnknownKey), as Kafka does: the
//     request cannot be parsed, so there is no response to shape.
//   - ApiVersions at a version not served: a v0 response with
//     UNSUPPORTED_VERSION listing the ApiVersions range, as Kafka does
//     (KIP-511); clients retry within it.
//   - Any other key or version not served: when kmsg can decode that
//     version, the response ErrorResponse builds, with UNSUPPORTED_VERSION
//     at the top level and per topic/partition/resource named in the
//     request. When kmsg cannot decode it (a version newer than kmsg
//     knows) or the encoded response has nowhere to carry the error
//     (Metadata before v13 asking for all topics), close (ErrUnsupportedVersion). We chose a clean error
//     over Kafka's close where one can be built, because clients surface
//     it to the user instead of retrying a dead connection.
//   - A connection with nothing in flight that sends nothing for
//     Config.IdleTimeout is closed (ErrIdle); one that stalls in the middle
//     of a frame for Config.ReadTimeout is closed too.
//
// A peer that closes its side at a frame boundary gets the responses to
// every request it sent before the server closes the connection.
//
// # SASL
//
// With Config.SASL the listener is Kafka's SASL_PLAINTEXT: the server
// answers SaslHandshake (v0-1) and SaslAuthenticate (v0-2) itself with
// the mechanisms of package auth, and adds both keys to the handler's
// ApiVersions answer. Invariants:
//
//   - Until a connection authenticates, the handler sees only its
//     ApiVersions requests; any other request closes it
//     (ErrUnauthenticated), as Kafka does.
//   - After SaslHandshake v0 the next frame is a bare token and the
//     answer a bare token (no header), written in order with the rest.
//   - A failed authentication is answered (SASL_AUTHENTICATION_FAILED,
//     or ILLEGAL_SASL_STATE for a SaslAuthenticate out of sequence) and
//     every later request closes the connection (ErrSASLFailed); a
//     failure in v0 framing closes it at once.
//   - Conn.Principal is "User:<name>" once authenticated (and
//     "User:ANONYMOUS" on a listener without SASL). A re-authentication
//     (KIP-368) must name the same principal.
//   - A session lasts SASLConfig.ReauthAfter, or until its token's
//     expiry if sooner, reported as SessionLifetimeMs (v1+); a request
//     after that, other than the SASL ones, closes the connection.
//   - The SASL state belongs to the reader goroutine: a connection's
//     requests are decided in arrival order, so a request pipelined
//     behind a SaslAuthenticate is judged after it.
//
// # TLS
//
// With Config.TLS the listener is Kafka's SSL (and with Config.SASL too,
// SASL_SSL). Invariants:
//
//   - The handshake runs on the connection's reader goroutine, before
//     any frame is read, bounded by Config.TLSHandshakeTimeout; the
//     accept loop never waits on it.
//   - A handshake that fails or times out closes the connection with
//     ErrTLSHandshake (reported to Observer.ConnClosed); the handler
//     never sees anything of it. One that Shutdown cuts short is a
//     clean close, not a failure. Client-certificate checks are
//     crypto/tls's, as Config.TLS.ClientAuth asks.
//   - SASL runs inside TLS, after the handshake, with the same gate as on
//     a plaintext listener.
//   - Conn.Principal: the SASL principal when there is one; else, with a
//     client certificate that crypto/tls verified and
//     Config.PrincipalFromCert, "User:" + its mapping (an error from it
//     closes the connection, as ErrTLSHandshake); else "User:ANONYMOUS".
//
// # Shutdown
//
// Close stops accepting, cancels every connection's context, closes the
// sockets and waits for all server goroutines; unwritten responses are
// dropped. Shutdown first stops reading and lets each connection write the
// responses it owes, bounded by its context. Neither waits for the
// handler's own goroutines: they must end when the Conn context does.
//
// # Goroutines and locks
//
// Server: one accept goroutine; per connection, the reader (which runs
// Serve) and the writer. Observer methods run on those goroutines.
// Server.mu guards the connection set and the draining flag; Conn.mu pairs
// the draining flag with read-deadline changes (their order: the
// repository's DESIGN.md). No lock is held while calling the handler or
// the observer.
//
// Socket deadlines are coarse to keep timer updates off the per-request
// path: a frame already buffered is read without one, and a deadline is
// not moved when the one in force is within 1/16 of its duration, so
// timeouts may fire up to that much early.
//
// # Departures from the shared design
//
// DESIGN.md lets this package import kmsg and the standard library. It
// also imports franz-go's kbin (reading the request header, which kmsg
// leaves to its caller) and kerr (error codes, as STYLE.md asks), both
// from the franz-go module already required, and internal/logging.
// Unsupported versions get an error response where one can be built,
// where Kafka closes the connection (see "Bad input").
//
// # Known limits
//
// kmsg sizes decoded arrays by the element count a frame claims, bounded
// by the frame's remaining bytes but not by element size, so a hostile
// frame near MaxFrameBytes can make one decode allocate many times its
// size. Lower MaxFrameBytes where that matters.
package kafka
