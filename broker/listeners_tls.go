package broker

import (
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/internal/tlsfiles"
	"github.com/raftq/raftq/transport/kafka"
)

// Kafka's ssl.client.auth values.
const (
	SSLClientAuthNone      = "none"
	SSLClientAuthRequested = "requested"
	SSLClientAuthRequired  = "required"
)

var sslClientAuths = map[string]tls.ClientAuthType{
	"":                     tls.NoClientCert,
	SSLClientAuthNone:      tls.NoClientCert,
	SSLClientAuthRequested: tls.VerifyClientCertIfGiven,
	SSLClientAuthRequired:  tls.RequireAndVerifyClientCert,
}

// sslListeners is what the SSL and SASL_SSL listeners share: one
// reloading certificate store, the client-auth policy and the mapping
// of client certificates to principals.
type sslListeners struct {
	store      *tlsfiles.Store
	clientAuth tls.ClientAuthType
	rules      *auth.PrincipalRules
}

// hasTLSListener reports whether any listener serves TLS.
func (c *Config) hasTLSListener() bool {
	return slices.ContainsFunc(c.Listeners, func(l Listener) bool { return isTLS(l.Protocol) })
}

// validateSSL checks the TLS settings: a TLS listener needs a certificate
// and key, client certificates need a CA bundle, and the mapping rules
// must parse. The files themselves are read when the node starts.
func (c *Config) validateSSL() error {
	if err := c.SSL.Validate(); err != nil {
		return fmt.Errorf("broker: SSL listeners: %w", err)
	}
	ca, ok := sslClientAuths[c.SSLClientAuth]
	if !ok {
		return fmt.Errorf("broker: SSL client auth %q: want none, requested or required", c.SSLClientAuth)
	}
	if _, err := auth.ParsePrincipalRules(c.SSLPrincipalMappingRules); err != nil {
		return fmt.Errorf("broker: SSL principal mapping rules: %w", err)
	}
	for _, l := range c.Listeners {
		if err := c.validateListenerSSL(l, ca); err != nil {
			return err
		}
	}
	return nil
}

// validateListenerSSL checks one listener's TLS: a certificate for a TLS
// listener, a client auth override only there, and a CA bundle for the
// client auth it ends up with.
func (c *Config) validateListenerSSL(l Listener, nodeAuth tls.ClientAuthType) error {
	ca, ok := sslClientAuths[l.SSLClientAuth]
	switch {
	case !isTLS(l.Protocol) && l.SSLClientAuth != "":
		return fmt.Errorf("broker: listener %s is %s: an SSL client auth (%s) needs SSL or SASL_SSL", l.Name, l.Protocol, l.SSLClientAuth)
	case !isTLS(l.Protocol):
		return nil
	case !ok:
		return fmt.Errorf("broker: listener %s: SSL client auth %q: want none, requested or required", l.Name, l.SSLClientAuth)
	case c.SSL.Cert == "":
		return fmt.Errorf("broker: listener %s is %s but no certificate and key are given (--ssl-cert-file, --ssl-key-file)", l.Name, l.Protocol)
	}
	mode := l.SSLClientAuth
	if mode == "" {
		ca, mode = nodeAuth, c.SSLClientAuth
	}
	if ca != tls.NoClientCert && c.SSL.CA == "" {
		return fmt.Errorf("broker: listener %s: SSL client auth %s needs a CA bundle to verify client certificates against (--ssl-ca-file)", l.Name, mode)
	}
	return nil
}

// startSSL loads the certificate files when a listener serves TLS, and
// reloads them on change or SIGHUP until the node closes.
func (n *Node) startSSL() error {
	if !n.cfg.hasTLSListener() {
		return nil
	}
	store, err := tlsfiles.Load(n.cfg.SSL)
	if err != nil {
		return fmt.Errorf("SSL listeners: %w", err)
	}
	rules, err := auth.ParsePrincipalRules(n.cfg.SSLPrincipalMappingRules)
	if err != nil {
		return err // Validate parsed them already
	}
	n.ssl = &sslListeners{store: store, clientAuth: sslClientAuths[n.cfg.SSLClientAuth], rules: rules}
	log := n.log.With("component", "tls", "cert", n.cfg.SSL.Cert)
	log.Info("SSL listeners' certificate loaded", "client_auth", n.ssl.clientAuth.String(), "principal_rules", rules.String())
	n.watchTLS("kafka", store) // node_tls.go
	return nil
}

// configure makes kc serve TLS from the shared store, with l's client
// auth or else the node's.
func (s *sslListeners) configure(kc *kafka.Config, l Listener) {
	ca := s.clientAuth
	if l.SSLClientAuth != "" {
		ca = sslClientAuths[l.SSLClientAuth]
	}
	kc.TLS = s.store.ServerConfig(ca)
	kc.PrincipalFromCert = s.rules.PrincipalFromCert
}
