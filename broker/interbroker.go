package broker

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
)

// SASLIdentity is who a node is on a SASL listener of another broker:
// a mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and a user of the
// metadata's SCRAM credentials with its password.
type SASLIdentity struct {
	Mechanism string
	User      string
	Password  string
}

// interBrokerMechanisms are the mechanisms a node authenticates with.
var interBrokerMechanisms = []string{auth.Plain, auth.ScramSHA256, auth.ScramSHA512}

// interBrokerListener is the Listener named by InterBrokerListener, nil
// for the main one.
func (c *Config) interBrokerListener() *Listener {
	if c.InterBrokerListener == "" || c.InterBrokerListener == c.KafkaListenerName {
		return nil
	}
	for i := range c.Listeners {
		if c.Listeners[i].Name == c.InterBrokerListener {
			return &c.Listeners[i]
		}
	}
	return nil
}

// validateInterBroker checks that InterBrokerListener names a listener
// and that the node has what its protocol asks: a SASL identity for a
// SASL listener (and none for another), a CA to verify the other
// brokers by on a TLS one.
func (c *Config) validateInterBroker() error {
	name := c.InterBrokerListener
	if name == "" || name == c.KafkaListenerName {
		if c.InterBrokerSASL != (SASLIdentity{}) {
			return fmt.Errorf("broker: an inter-broker SASL identity needs a SASL inter-broker listener")
		}
		return nil
	}
	l := c.interBrokerListener()
	if l == nil {
		return fmt.Errorf("broker: inter-broker listener %q is not one of the listeners", name)
	}
	id := c.InterBrokerSASL
	switch {
	case isSASL(l.Protocol) && !slices.Contains(interBrokerMechanisms, id.Mechanism):
		return fmt.Errorf("broker: inter-broker listener %s is %s: its SASL mechanism %q must be one of %v", name, l.Protocol, id.Mechanism, interBrokerMechanisms)
	case isSASL(l.Protocol) && (id.User == "" || id.Password == ""):
		return fmt.Errorf("broker: inter-broker listener %s is %s: it needs a SASL user and password", name, l.Protocol)
	case !isSASL(l.Protocol) && id != (SASLIdentity{}):
		return fmt.Errorf("broker: inter-broker listener %s is %s: a SASL identity does not apply", name, l.Protocol)
	case isTLS(l.Protocol) && c.SSL.CA == "":
		return fmt.Errorf("broker: inter-broker listener %s is %s: it needs the SSL CA bundle to verify the other brokers by", name, l.Protocol)
	}
	return nil
}

// interBrokerAddr is broker b's address on the inter-broker listener.
func (n *Node) interBrokerAddr(b *coordinator.Broker) string {
	if l := n.cfg.interBrokerListener(); l != nil {
		return b.AddrFor(l.Name)
	}
	return b.KafkaAddr
}

// interBrokerOpts are the client options of the inter-broker listener's
// protocol: TLS from the node's SSL store (its certificate, the CA
// bundle), SASL as InterBrokerSASL.
func (n *Node) interBrokerOpts() []kgo.Opt {
	l := n.cfg.interBrokerListener()
	if l == nil {
		return nil
	}
	var opts []kgo.Opt
	if isTLS(l.Protocol) && n.ssl != nil {
		opts = append(opts, kgo.DialTLSConfig(n.ssl.store.ClientConfig("")))
	}
	if isSASL(l.Protocol) {
		opts = append(opts, kgo.SASL(saslMechanism(n.cfg.InterBrokerSASL)))
	}
	return opts
}

// saslMechanism is franz-go's client mechanism for id.
func saslMechanism(id SASLIdentity) sasl.Mechanism {
	switch id.Mechanism {
	case auth.ScramSHA256:
		return scram.Auth{User: id.User, Pass: id.Password}.AsSha256Mechanism()
	case auth.ScramSHA512:
		return scram.Auth{User: id.User, Pass: id.Password}.AsSha512Mechanism()
	}
	return plain.Auth{User: id.User, Pass: id.Password}.AsMechanism()
}
