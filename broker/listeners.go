package broker

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/transport/kafka"
)

// Security protocols of Kafka listeners that raftq serves. SSL and
// SASL_SSL serve TLS from Config.SSL (listeners_tls.go).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLSSL       = "SASL_SSL"
)

// protocols are the security protocols served.
var protocols = []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL}

// isTLS reports whether protocol serves TLS.
func isTLS(protocol string) bool { return protocol == ProtocolSSL || protocol == ProtocolSASLSSL }

// isSASL reports whether protocol authenticates with SASL.
func isSASL(protocol string) bool {
	return protocol == ProtocolSASLPlaintext || protocol == ProtocolSASLSSL
}

// Listener is a Kafka listener beside the main one (Config.KafkaAddr),
// as an entry of Kafka's listeners, advertised.listeners and
// listener.security.protocol.map.
type Listener struct {
	Name string
	Addr string
	// Advertised is what Metadata tells clients that came in on this
	// listener; empty means Addr (which then must not be a wildcard).
	Advertised string
	// Protocol is one of ProtocolPlaintext, ProtocolSSL,
	// ProtocolSASLPlaintext and ProtocolSASLSSL.
	Protocol string
	// SSLClientAuth overrides Config.SSLClientAuth for this SSL or
	// SASL_SSL listener (Kafka's listener.name.<name>.ssl.client.auth);
	// empty means the node's.
	SSLClientAuth string
}

// validateListeners checks the extra listeners: distinct names other
// than the main one's, a served protocol, addresses that parse, and
// SASL mechanisms auth serves.
func (c *Config) validateListeners() error {
	names := map[string]bool{c.KafkaListenerName: true}
	for _, l := range c.Listeners {
		switch {
		case l.Name == "" || names[l.Name]:
			return fmt.Errorf("broker: listener name %q empty or taken", l.Name)
		case !slices.Contains(protocols, l.Protocol):
			return fmt.Errorf("broker: listener %s: security protocol %q is not served (%s)", l.Name, l.Protocol, strings.Join(protocols, ", "))
		}
		names[l.Name] = true
		if _, _, err := net.SplitHostPort(l.Addr); err != nil {
			return fmt.Errorf("broker: listener %s address %q: %w", l.Name, l.Addr, err)
		}
		if _, err := advertisedAddr(l.Advertised, l.Addr); err != nil {
			return fmt.Errorf("broker: listener %s: %w", l.Name, err)
		}
	}
	for _, m := range c.SASLMechanisms {
		if !slices.Contains(auth.Mechanisms(auth.Lookup{}), m) {
			return fmt.Errorf("broker: SASL mechanism %q is not served (%v)", m, auth.Mechanisms(auth.Lookup{}))
		}
	}
	if c.SASLReauth < 0 {
		return fmt.Errorf("broker: negative SASL re-authentication interval %s", c.SASLReauth)
	}
	return c.validateSSL() // listeners_tls.go
}

// advertisedAddr is advertised, or addr when it is empty; never a
// wildcard host.
func advertisedAddr(advertised, addr string) (string, error) {
	if advertised == "" {
		advertised = addr
	}
	host, _, err := net.SplitHostPort(advertised)
	if err != nil {
		return "", fmt.Errorf("advertised address %q: %w", advertised, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("advertised address %q is a wildcard", advertised)
	}
	return advertised, nil
}

// advertisedListeners maps every listener's name to its advertised
// address, for the registration; nil without extra listeners, so that a
// node without them registers as before.
func (n *Node) advertisedListeners() map[string]string {
	if len(n.cfg.Listeners) == 0 {
		return nil
	}
	out := map[string]string{n.cfg.KafkaListenerName: n.advert}
	for i, l := range n.cfg.Listeners {
		a, _ := advertisedAddr(l.Advertised, l.Addr)
		if l.Advertised == "" && n.extra[i] != nil {
			a = n.extra[i].Addr().String() // port 0 bound
		}
		out[l.Name] = a
	}
	return out
}

// ListenerAddr is the address the extra listener name is bound to, ""
// when the node has no such listener.
func (n *Node) ListenerAddr(name string) string {
	for i, l := range n.cfg.Listeners {
		if l.Name == name && i < len(n.extra) {
			return n.extra[i].Addr().String()
		}
	}
	return ""
}

// startListeners starts the extra listeners (startSSL has loaded the
// certificate of those serving TLS).
func (n *Node) startListeners() error {
	for _, l := range n.cfg.Listeners {
		kc := n.kafkaConfig(l.Name, l.Addr)
		if isSASL(l.Protocol) {
			kc.SASL = n.saslConfig()
		}
		if isTLS(l.Protocol) {
			n.ssl.configure(&kc, l)
		}
		s, err := kafka.Start(kc, n.handler())
		if err != nil {
			return fmt.Errorf("kafka listener %s: %w", l.Name, err)
		}
		n.extra = append(n.extra, s)
	}
	return nil
}

func (n *Node) kafkaConfig(name, addr string) kafka.Config {
	kc := kafka.DefaultConfig()
	kc.Name, kc.Addr = name, addr
	kc.MaxFrameBytes = int(n.cfg.MaxRequestBytes)
	kc.Logger = n.log.With("component", "kafka", "listener", name)
	kc.Observer = n.metrics
	return kc
}

// saslConfig checks clients against the SCRAM credentials of this
// node's metadata view, read anew for each authentication. Unknown users'
// decoys are seeded by the cluster's secret decoy key once a user exists
// (before that, every user is unknown and a key derived from the cluster
// id, which is no secret, gives nothing away), and shaped like the users'.
func (n *Node) saslConfig() *kafka.SASLConfig {
	fallback := sha256.Sum256([]byte("raftq sasl decoy\x00" + n.cfg.ClusterID))
	return &kafka.SASLConfig{
		Mechanisms:  n.cfg.SASLMechanisms,
		ReauthAfter: n.cfg.SASLReauth,
		Lookup: func() auth.Lookup {
			st := n.meta.View()
			key := st.ScramDecoyKey
			if len(key) == 0 {
				key = fallback[:]
			}
			return auth.Lookup{DecoyKey: key, Scram: st.ScramCredential, Shape: n.scramShapes(st).get}
		},
		OnAuth: func(_ *kafka.Conn, mechanism, _ string, err error) { n.metrics.saslAuth(mechanism, err) },
	}
}

// shutdownListeners closes the extra listeners, letting owed responses
// out for a moment.
func (n *Node) shutdownListeners() []error {
	var errs []error
	for _, s := range n.extra {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		errs = append(errs, s.Shutdown(ctx))
		cancel()
	}
	return errs
}
