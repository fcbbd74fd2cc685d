package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/pflag"
)

// Environment variables of the TLS client flags.
const (
	envTLS         = "RAFTQ_TLS"
	envTLSCAFile   = "RAFTQ_TLS_CA_FILE"
	envTLSCertFile = "RAFTQ_TLS_CERT_FILE"
	envTLSKeyFile  = "RAFTQ_TLS_KEY_FILE"
)

// tlsFlags make client commands speak TLS to an SSL or SASL_SSL
// listener, optionally with a client certificate (mTLS).
type tlsFlags struct {
	on             bool
	ca, cert, key  string
	onFromEnvError error
}

func (f *tlsFlags) bind(e *env, fs *pflag.FlagSet) {
	on := false
	if v := e.flagDefault(envTLS, ""); v != "" {
		b, err := strconv.ParseBool(v)
		on, f.onFromEnvError = b, err
	}
	fs.BoolVar(&f.on, "tls", on, "connect with TLS (an SSL or SASL_SSL listener); implied by the --tls-* files; $"+envTLS+"=true sets the default")
	fs.StringVar(&f.ca, "tls-ca-file", e.flagDefault(envTLSCAFile, ""), "PEM CA bundle to verify the brokers against (default: the system roots); $"+envTLSCAFile+" sets the default")
	fs.StringVar(&f.cert, "tls-cert-file", e.flagDefault(envTLSCertFile, ""), "PEM client certificate, for listeners that ask for one (mTLS); $"+envTLSCertFile+" sets the default")
	fs.StringVar(&f.key, "tls-key-file", e.flagDefault(envTLSKeyFile, ""), "PEM private key of --tls-cert-file; $"+envTLSKeyFile+" sets the default")
}

// config is the client TLS config the flags ask for, nil for plaintext.
func (f *tlsFlags) config() (*tls.Config, error) {
	if f.onFromEnvError != nil {
		return nil, usageError{fmt.Errorf("$%s: %w", envTLS, f.onFromEnvError)}
	}
	if !f.on && f.ca == "" && f.cert == "" && f.key == "" {
		return nil, nil
	}
	if (f.cert == "") != (f.key == "") {
		return nil, usageError{fmt.Errorf("--tls-cert-file %q and --tls-key-file %q must be given together", f.cert, f.key)}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca-file %s holds no PEM certificate", f.ca)
		}
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file and --tls-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
