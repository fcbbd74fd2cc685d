package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Environment variables of the SASL client flags; the password is best
// given this way, out of the shell's history and ps.
const (
	envSASLMechanism = "RAFTQ_SASL_MECHANISM"
	envSASLUser      = "RAFTQ_SASL_USER"
	envSASLPassword  = "RAFTQ_SASL_PASSWORD"
)

// saslFlags make client commands authenticate to a SASL listener.
type saslFlags struct {
	mech, user, password string
}

func (f *saslFlags) bind(e *env, fs *pflag.FlagSet) {
	fs.StringVar(&f.mech, "sasl-mechanism", e.flagDefault(envSASLMechanism, ""), "authenticate with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (a SASL listener); $"+envSASLMechanism+" sets the default")
	fs.StringVar(&f.user, "sasl-user", e.flagDefault(envSASLUser, ""), "SASL user; $"+envSASLUser+" sets the default")
	fs.StringVar(&f.password, "sasl-password", e.flagDefault(envSASLPassword, ""), "SASL password; better given as $"+envSASLPassword)
}

// mechanism is the client mechanism the flags ask for, nil for none.
func (f *saslFlags) mechanism() (sasl.Mechanism, error) {
	if f.mech == "" {
		if f.user != "" {
			return nil, usageError{fmt.Errorf("--sasl-user without --sasl-mechanism")}
		}
		return nil, nil
	}
	if f.user == "" || f.password == "" {
		return nil, usageError{fmt.Errorf("--sasl-mechanism %s needs --sasl-user and a password (--sasl-password or $%s)", f.mech, envSASLPassword)}
	}
	switch strings.ToUpper(f.mech) {
	case "PLAIN":
		return plain.Auth{User: f.user, Pass: f.password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: f.user, Pass: f.password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: f.user, Pass: f.password}.AsSha512Mechanism(), nil
	}
	return nil, usageError{fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", f.mech)}
}
