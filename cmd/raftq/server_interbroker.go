package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
)

// interBrokerFlags choose the listener nodes send each other their
// broker-to-broker requests on (Kafka's inter.broker.listener.name) and
// the node's SASL identity there.
type interBrokerFlags struct {
	passwordFile string
}

func bindInterBrokerFlags(fs *pflag.FlagSet, c *broker.Config) *interBrokerFlags {
	f := &interBrokerFlags{}
	fs.StringVar(&c.InterBrokerListener, "inter-broker-listener-name", "", "the listener of --listeners that nodes send each other transaction markers and verifications on (Kafka's inter.broker.listener.name); default the --kafka-addr one, as User:ANONYMOUS")
	fs.StringVar(&c.InterBrokerSASL.Mechanism, "inter-broker-sasl-mechanism", "", "SASL mechanism of a SASL inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's sasl.mechanism.inter.broker.protocol)")
	fs.StringVar(&c.InterBrokerSASL.User, "inter-broker-sasl-username", "", "the node's SASL user on a SASL inter-broker listener (raftq user create; a --super-users entry)")
	fs.StringVar(&f.passwordFile, "inter-broker-sasl-password-file", "", "file holding that user's password (trailing newline ignored)")
	return f
}

// apply reads the password file.
func (f *interBrokerFlags) apply(c *broker.Config) error {
	if f.passwordFile == "" {
		return nil
	}
	b, err := os.ReadFile(f.passwordFile)
	if err != nil {
		return fmt.Errorf("--inter-broker-sasl-password-file: %w", err)
	}
	c.InterBrokerSASL.Password = strings.TrimRight(string(b), "\r\n")
	return nil
}
