package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftq/raftq/internal/tlsfiles"
)

// TLS between nodes: the peer transport's mutual TLS (Config.PeerTLS)
// and the admin listener's (Config.AdminTLS). Each is a tlsfiles.Store
// loaded at start, whose files a loop reloads on change or SIGHUP for
// the node's lifetime; a failed reload keeps the old pair and is logged.

// nodeTLS holds the node's TLS stores; nil fields are plaintext.
type nodeTLS struct {
	peer, admin *tlsfiles.Store
	adminHTTP   *http.Client // with admin: calls to other nodes' admin listeners
}

// validateTLS checks the TLS files named: the peer transport needs all
// three (mutual TLS needs the CA), required admin client certificates a
// CA to verify them against.
func (c *Config) validateTLS() error {
	if !c.PeerTLS.Empty() && (c.PeerTLS.Cert == "" || c.PeerTLS.Key == "" || c.PeerTLS.CA == "") {
		return fmt.Errorf("broker: peer TLS needs a certificate, its key and the cluster's CA bundle (got certificate %q, key %q, CA %q)",
			c.PeerTLS.Cert, c.PeerTLS.Key, c.PeerTLS.CA)
	}
	if c.PeerTLSNodeName != "" && (c.PeerTLS.Empty() || strings.Count(c.PeerTLSNodeName, "%") != 1 || !strings.Contains(c.PeerTLSNodeName, "%d")) {
		return fmt.Errorf("broker: peer TLS node name %q: want one %%d standing for the node id, and peer TLS on", c.PeerTLSNodeName)
	}
	if err := c.AdminTLS.Validate(); err != nil {
		return fmt.Errorf("broker: admin %w", err)
	}
	if c.AdminRequireClientCert && c.AdminTLS.CA == "" {
		return errors.New("broker: admin client certificates required, but no admin CA bundle to verify them against")
	}
	return nil
}

// loadTLS reads the TLS files Config names and watches them until Close.
func (n *Node) loadTLS() error {
	var err error
	if !n.cfg.PeerTLS.Empty() {
		if n.tls.peer, err = tlsfiles.Load(n.cfg.PeerTLS); err != nil {
			return fmt.Errorf("peer TLS: %w", err)
		}
		n.watchTLS("peer", n.tls.peer)
	}
	if !n.cfg.AdminTLS.Empty() {
		if n.tls.admin, err = tlsfiles.Load(n.cfg.AdminTLS); err != nil {
			return fmt.Errorf("admin TLS: %w", err)
		}
		n.watchTLS("admin", n.tls.admin)
		n.tls.adminHTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: n.tls.admin.ClientConfig("")}}
	}
	return nil
}

// watchTLS reloads s on file change or SIGHUP until the node closes,
// logging each reload: failed ones (the previous certificate stays) as
// an error.
func (n *Node) watchTLS(name string, s *tlsfiles.Store) {
	log := n.log.With("tls", name, "cert", s.Files().Cert)
	n.goLoop(name+"-tls-reload", func(ctx context.Context) {
		s.WatchFilesAndHUP(ctx, func(err error) {
			if err != nil {
				log.Error("TLS files not reloaded; serving the previous certificate", "err", err)
				return
			}
			log.Info("TLS files reloaded", "loads", s.Reloads())
		})
	})
}

// peerTLS returns the peer transport's TLS configs, nil without PeerTLS:
// mutual, the chain verified against the cluster's CA (not names: peers
// dial addresses; see transport/peer's TLS).
func (n *Node) peerTLS() (server, client *tls.Config) {
	if n.tls.peer == nil {
		return nil, nil
	}
	return n.tls.peer.ServerConfig(tls.RequireAndVerifyClientCert), n.tls.peer.ClientConfig("")
}

// peerCertificateCheck is the transport's CheckPeerCertificate: node N's
// certificate must be named PeerTLSNodeName with N for %d. Nil without
// a name.
func (n *Node) peerCertificateCheck() func(uint64, *x509.Certificate) error {
	pattern := n.cfg.PeerTLSNodeName
	if pattern == "" || n.tls.peer == nil {
		return nil
	}
	return func(node uint64, cert *x509.Certificate) error {
		want := fmt.Sprintf(pattern, node)
		if cert.Subject.CommonName == want || slices.Contains(cert.DNSNames, want) {
			return nil
		}
		return fmt.Errorf("it is not named %q (common name %q, DNS names %v)", want, cert.Subject.CommonName, cert.DNSNames)
	}
}

// joinTLS is the client config of a join stream, nil without PeerTLS.
func (n *Node) joinTLS() *tls.Config {
	_, c := n.peerTLS()
	return c
}

// adminListener puts ln under TLS when the node has AdminTLS.
func (n *Node) adminListener(ln net.Listener) net.Listener {
	if n.tls.admin == nil {
		return ln
	}
	auth := tls.NoClientCert
	if n.cfg.AdminRequireClientCert {
		auth = tls.RequireAndVerifyClientCert
	}
	return tls.NewListener(ln, n.tls.admin.ServerConfig(auth))
}

// adminScheme is the scheme of admin URLs: every node's admin listener
// is configured alike.
func (n *Node) adminScheme() string {
	if n.tls.admin != nil {
		return "https"
	}
	return "http"
}

// adminHTTP is the client of this node's calls to other nodes' admin
// listeners: it presents the admin certificate and verifies theirs.
func (n *Node) adminHTTP() *http.Client {
	if n.tls.adminHTTP == nil {
		return http.DefaultClient
	}
	return n.tls.adminHTTP
}

// adminServer is the admin listener's server, its error log routed to
// adminErrorLog.
func (n *Node) adminServer(h http.Handler) *http.Server {
	errLog := adminErrorLog{n.log.With("component", "admin"), n.metrics.adminTLSRefused}
	return &http.Server{Handler: h, ErrorLog: log.New(errLog, "", 0)}
}

// AdminClientTLS is the client config for calls to other nodes' admin
// listeners (the web console's): the node's admin certificate, theirs
// verified against the admin CA. Nil without Config.AdminTLS.
func (n *Node) AdminClientTLS() *tls.Config {
	if n.tls.admin == nil {
		return nil
	}
	return n.tls.admin.ClientConfig("")
}

// adminErrorLog is the admin http.Server's error log: it counts the TLS
// handshakes the listener refused (a client without a certificate from
// the CA, garbage) and logs every line at WARN.
type adminErrorLog struct {
	log     *slog.Logger
	refused prometheus.Counter
}

func (l adminErrorLog) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	if bytes.Contains(line, []byte("TLS handshake error")) {
		l.refused.Inc()
	}
	l.log.Warn("admin listener", "err", string(line))
	return len(p), nil
}
