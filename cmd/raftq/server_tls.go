package main

import (
	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
)

// bindSSLFlags binds the TLS of the SSL and SASL_SSL listeners. The names
// are Kafka's ssl.* settings, for PEM files (as Redpanda's cert_file,
// key_file and truststore_file).
func bindSSLFlags(fs *pflag.FlagSet, c *broker.Config) {
	fs.StringVar(&c.SSL.Cert, "ssl-cert-file", "", "PEM certificate (chain) of the SSL and SASL_SSL listeners of --listeners; reloaded on change or SIGHUP. --kafka-addr, the listener nodes use among themselves, stays PLAINTEXT")
	fs.StringVar(&c.SSL.Key, "ssl-key-file", "", "PEM private key of --ssl-cert-file")
	fs.StringVar(&c.SSL.CA, "ssl-ca-file", "", "PEM CA bundle that client certificates must chain to (needed by --ssl-client-auth requested or required)")
	fs.StringVar(&c.SSLClientAuth, "ssl-client-auth", broker.SSLClientAuthNone, "Kafka's ssl.client.auth on SSL and SASL_SSL listeners: none, requested (verify a certificate if the client gives one) or required")
	fs.StringVar(&c.SSLPrincipalMappingRules, "ssl-principal-mapping-rules", "DEFAULT", "Kafka's ssl.principal.mapping.rules: how a client certificate's subject (RFC 2253) becomes its principal, e.g. 'RULE:^CN=([^,]+).*$/$1/L,DEFAULT'; a SASL principal wins")
}
