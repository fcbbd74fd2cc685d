package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
)

// ErrTLSHandshake closes a connection on a TLS listener whose handshake
// failed or timed out (garbage, a certificate that does not verify, a
// client that never finishes), or whose verified certificate
// PrincipalFromCert refused. Such a connection never reaches the handler.
var ErrTLSHandshake = errors.New("kafka: TLS handshake failed")

// tlsState is what a TLS connection's verified client certificate maps
// to; written once by the reader goroutine before the first request.
type tlsState struct {
	principal atomic.Pointer[string]
}

// wrapTLS makes nc the server side of a TLS connection when the listener
// serves TLS; the handshake runs later, on the connection's goroutine,
// so a slow client never holds up the accept loop.
func (s *Server) wrapTLS(nc net.Conn) net.Conn {
	if s.cfg.TLS == nil {
		return nc
	}
	return tls.Server(nc, s.cfg.TLS)
}

// tlsHandshake completes the TLS handshake within Config.TLSHandshakeTimeout
// and maps a verified client certificate to the connection's principal.
// It is a no-op on a plaintext listener.
func (c *Conn) tlsHandshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.TLSHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if c.isDraining() {
			return errDrained // Shutdown cut it short: nothing was served, nothing failed
		}
		return fmt.Errorf("%w: %w", ErrTLSHandshake, err)
	}
	return c.mapCertificate(tc.ConnectionState())
}

// mapCertificate sets the principal of a verified client certificate.
// An unverified one (crypto/tls verifies whatever it asks for) or none
// leaves the connection anonymous.
func (c *Conn) mapCertificate(cs tls.ConnectionState) error {
	from := c.srv.cfg.PrincipalFromCert
	if from == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return nil
	}
	name, err := from(cs.PeerCertificates[0])
	if err != nil {
		return fmt.Errorf("%w: map the client certificate to a principal: %w", ErrTLSHandshake, err)
	}
	p := "User:" + name
	c.tls.principal.Store(&p)
	return nil
}

// TLS reports whether the connection is TLS, and its negotiated state
// once the handshake has completed.
func (c *Conn) TLS() (tls.ConnectionState, bool) {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return tls.ConnectionState{}, false
	}
	return tc.ConnectionState(), true
}
