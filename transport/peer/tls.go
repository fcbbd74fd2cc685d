package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// TLS on the peer port (Config.ServerTLS and ClientTLS; see the package
// documentation, TLS). The TLS handshake comes first on every stream
// kind, so the hello and everything after it travel encrypted, and a
// peer refused at it never reaches the hello's checks.

// tlsConn is a TLS connection whose Close drops the TCP connection at
// once. crypto/tls would first write a close_notify alert under a 5 s
// write deadline, so a paused peer that reads nothing would hold up
// Close; the frames already say where each stream ends.
type tlsConn struct{ *tls.Conn }

func (c tlsConn) Close() error { return c.NetConn().Close() }

// acceptTLS runs the server side of the TLS handshake on an accepted
// connection when the transport has ServerTLS; otherwise it returns conn
// as it is. A failed handshake is refused (refuseTLS) and false returned.
func (t *Transport) acceptTLS(conn net.Conn) (net.Conn, bool) {
	if t.cfg.ServerTLS == nil {
		return conn, true
	}
	tc := tls.Server(conn, t.cfg.ServerTLS)
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		t.refuseTLS(conn, err)
		return nil, false
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		t.log.Debug("peer TLS handshake", "remote", conn.RemoteAddr().String(), "subject", certs[0].Subject.String())
	}
	return tlsConn{tc}, true
}

// refuseTLS logs and counts a connection refused at the TLS handshake and
// closes it. A raftq peer that sent its hello in the clear is told why in
// the clear, so that its log says what to fix.
func (t *Transport) refuseTLS(conn net.Conn, err error) {
	defer conn.Close()
	remote := conn.RemoteAddr().String()
	if isSilentProbe(err) || t.ctx.Err() != nil {
		t.log.Debug("peer connection closed before its TLS handshake", "remote", remote, "err", err)
		return
	}
	t.stats.tlsRefusedInbound.Add(1)
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && rh.Conn != nil && string(rh.RecordHeader[:len(magic)]) == magic {
		t.log.Error("refusing peer connection: it does not speak TLS, which this node's peer port requires", "remote", remote)
		tellPlaintextPeer(rh.Conn, reply{version: protoVersion, code: refuseTLS, node: t.cfg.NodeID,
			reason: fmt.Sprintf("node %d requires TLS on its peer port; configure peer TLS", t.cfg.NodeID)})
		return
	}
	t.log.Error("refusing peer connection at the TLS handshake", "remote", remote, "err", err)
}

// tellPlaintextPeer writes a refusal in the clear and waits briefly for
// the peer to hang up: closing with its hello unread would reset the
// connection, and the reset could overtake the refusal.
func tellPlaintextPeer(conn net.Conn, rp reply) {
	const linger = 500 * time.Millisecond
	if conn.SetDeadline(time.Now().Add(linger)) != nil {
		return
	}
	if _, err := conn.Write(appendReply(nil, rp)); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(conn, 64<<10))
}

// dialTLS runs the client side of the TLS handshake on a dialled
// connection to addr when cfg is set; otherwise it returns conn as it
// is. On failure it closes conn.
func dialTLS(ctx context.Context, conn net.Conn, cfg *tls.Config, addr string, timeout time.Duration) (net.Conn, error) {
	if cfg == nil {
		return conn, nil
	}
	tc := tls.Client(conn, clientConfigFor(cfg, addr))
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		conn.Close()
		return nil, tlsDialError(addr, err)
	}
	return tlsConn{tc}, nil
}

// clientConfigFor gives a config that verifies names (neither ServerName
// nor InsecureSkipVerify set) the dialled host's name, as tls.Dial does.
func clientConfigFor(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" || cfg.InsecureSkipVerify {
		return cfg
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return cfg
	}
	c := cfg.Clone()
	c.ServerName = host
	return c
}

// tlsDialError explains a failed client handshake: a node at addr that
// answers in raftq's plaintext protocol has no peer TLS configured; a
// certificate either side refused (a verification error here, an alert
// from there) is ErrCertificate too, which trying again cannot change.
func tlsDialError(addr string, err error) error {
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && string(rh.RecordHeader[:len(magic)]) == magic {
		return fmt.Errorf("%w: the node at %s answered in the clear: it has no peer TLS configured", ErrTLS, addr)
	}
	if certificateVerdict(err) {
		return fmt.Errorf("%w with %s: %w: %w", ErrTLS, addr, ErrCertificate, err)
	}
	return fmt.Errorf("%w with %s: %w", ErrTLS, addr, err)
}

// certificateVerdict tells a certificate refused, by this side's
// verification or the peer's alert, from a network failure.
func certificateVerdict(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
	)
	return tlsRefusedUs(err) || errors.As(err, &verify) || errors.As(err, &authority) ||
		errors.As(err, &invalid) || errors.As(err, &hostname)
}

// tlsRefusedUs tells whether err, met after this side's TLS handshake
// completed, is the peer's TLS alert: under TLS 1.3 a server judges the
// client's certificate after the client has finished, so a refused
// certificate shows as an alert on the client's first read.
func tlsRefusedUs(err error) bool {
	return tlsAlert(err) != nil
}

func tlsAlert(err error) *net.OpError {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return op
	}
	return nil
}

// explainTLSRefusal replaces a handshake error that is the peer's TLS
// alert by ErrTLS, saying that the peer refused this node's certificate.
func explainTLSRefusal(err error) error {
	alert := tlsAlert(err)
	if alert == nil || errors.Is(err, ErrTLS) {
		return err
	}
	return fmt.Errorf("%w: %w: the peer refused this node's certificate (is it valid and from the cluster's CA?): %w", ErrTLS, ErrCertificate, alert)
}

// checkCertificate runs Config.CheckPeerCertificate, if any, on the
// certificate conn's peer presented for node.
func (t *Transport) checkCertificate(conn net.Conn, node uint64) error {
	tc, ok := conn.(tlsConn)
	if t.cfg.CheckPeerCertificate == nil || !ok {
		return nil
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return fmt.Errorf("%w: node %d presented no certificate", ErrCertificate, node)
	}
	if err := t.cfg.CheckPeerCertificate(node, certs[0]); err != nil {
		return fmt.Errorf("%w: node %d's certificate %q: %w", ErrCertificate, node, certs[0].Subject.String(), err)
	}
	return nil
}
