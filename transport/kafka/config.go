package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on.
	Addr string
	// MaxFrameBytes bounds a request frame, without its 4-byte size
	// prefix (Kafka's socket.request.max.bytes). A larger frame closes its
	// connection.
	MaxFrameBytes int
	// MaxInFlight bounds the requests of one connection that have been
	// read but whose response is not yet written. At the bound the server
	// stops reading that connection.
	MaxInFlight int
	// IdleTimeout closes a connection on which no request arrives for this
	// long while none is in flight (Kafka's connections.max.idle.ms). Zero
	// disables it. Timeouts are coarse: they may fire up to 1/16 early.
	IdleTimeout time.Duration
	// ReadTimeout bounds reading one frame once its first byte arrived.
	// Zero disables it.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of responses to the socket. Zero
	// disables it.
	WriteTimeout time.Duration
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
	// Observer receives counts and latencies; nil means none.
	Observer Observer
	// Name is the listener's name (Kafka's listener name, e.g.
	// PLAINTEXT or SASL), which Conn.Listener gives the handler.
	Name string
	// SASL, when set, makes every connection authenticate first (see
	// SASLConfig); nil serves anyone, as Kafka's PLAINTEXT listener.
	SASL *SASLConfig
	// TLS, when set, makes the listener serve TLS (Kafka's SSL and, with
	// SASL, SASL_SSL): every connection completes a handshake with it
	// before its first request is read, and SASL runs inside TLS. Its
	// ClientAuth decides whether client certificates are asked for.
	TLS *tls.Config
	// TLSHandshakeTimeout bounds the TLS handshake of one connection.
	TLSHandshakeTimeout time.Duration
	// PrincipalFromCert maps a TLS connection's verified client
	// certificate to its principal name (Conn.Principal prefixes
	// "User:"); an error closes the connection. Nil, or a connection
	// without a verified certificate, leaves it "User:ANONYMOUS". A SASL
	// principal takes precedence, as in Kafka.
	PrincipalFromCert func(*x509.Certificate) (string, error)
	// Listen opens the listener; nil means net.Listen. Tests inject
	// listeners through it.
	Listen func(network, address string) (net.Listener, error)
}

// DefaultConfig returns the defaults: Kafka's port and limits.
func DefaultConfig() Config {
	return Config{
		Addr:          ":9092",
		MaxFrameBytes: 100 << 20,
		MaxInFlight:   64,
		IdleTimeout:   10 * time.Minute,
		ReadTimeout:   time.Minute,
		WriteTimeout:  time.Minute,
		// Kafka has no separate bound; its handshake shares the idle
		// timeout. Ten seconds is what crypto/tls servers commonly use.
		TLSHandshakeTimeout: 10 * time.Second,
		Listen:              net.Listen,
	}
}

// minFrameBytes is the smallest frame that can hold a request header:
// api key, version and correlation id.
const minFrameBytes = 8

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Addr == "":
		return errors.New("kafka config: Addr is empty")
	case c.MaxFrameBytes < minFrameBytes || c.MaxFrameBytes > math.MaxInt32:
		return fmt.Errorf("kafka config: MaxFrameBytes %d outside [%d, %d]", c.MaxFrameBytes, minFrameBytes, math.MaxInt32)
	case c.MaxInFlight < 1 || c.MaxInFlight > 1<<16:
		return fmt.Errorf("kafka config: MaxInFlight %d outside [1, 65536]", c.MaxInFlight)
	case c.IdleTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0:
		return fmt.Errorf("kafka config: negative timeout (idle %s, read %s, write %s)", c.IdleTimeout, c.ReadTimeout, c.WriteTimeout)
	case c.TLS != nil && c.TLSHandshakeTimeout <= 0:
		return fmt.Errorf("kafka config: TLS needs a positive TLSHandshakeTimeout, not %s", c.TLSHandshakeTimeout)
	case c.PrincipalFromCert != nil && c.TLS == nil:
		return errors.New("kafka config: PrincipalFromCert without TLS")
	case c.SASL != nil && c.SASL.Lookup == nil:
		return errors.New("kafka config: SASL without a credential Lookup")
	case c.SASL != nil && c.SASL.ReauthAfter < 0:
		return fmt.Errorf("kafka config: negative SASL ReauthAfter %s", c.SASL.ReauthAfter)
	}
	return nil
}
