package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
)

// TestSSLFlags: the --ssl-* flags land in the broker config, whose
// validation then refuses what Kafka would.
func TestSSLFlags(t *testing.T) {
	var c broker.Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	bindSSLFlags(fs, &c)
	if err := fs.Parse([]string{"--ssl-cert-file=n.crt", "--ssl-key-file=n.key", "--ssl-ca-file=ca.crt",
		"--ssl-client-auth=required", "--ssl-principal-mapping-rules=RULE:^CN=(.*)$/$1/L"}); err != nil {
		t.Fatal(err)
	}
	if c.SSL.Cert != "n.crt" || c.SSL.Key != "n.key" || c.SSL.CA != "ca.crt" || c.SSLClientAuth != "required" || c.SSLPrincipalMappingRules != "RULE:^CN=(.*)$/$1/L" {
		t.Errorf("config %+v %q %q", c.SSL, c.SSLClientAuth, c.SSLPrincipalMappingRules)
	}
	var d broker.Config
	bindSSLFlags(pflag.NewFlagSet("d", pflag.ContinueOnError), &d)
	if d.SSLClientAuth != broker.SSLClientAuthNone || d.SSLPrincipalMappingRules != "DEFAULT" {
		t.Errorf("defaults %q %q", d.SSLClientAuth, d.SSLPrincipalMappingRules)
	}
}
