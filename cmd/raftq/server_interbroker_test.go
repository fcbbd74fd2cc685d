package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftq/raftq/broker"
)

// TestServerFlags_InterBroker: the inter-broker flags reach
// broker.Config, the password read from its file without the trailing
// newline; a missing file and a SASL listener without an identity are
// refused with what is wrong.
func TestServerFlags_InterBroker(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "broker.pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sasl := []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--inter-broker-listener-name", "SASL_PLAINTEXT"}
	for _, tc := range []struct {
		args []string
		want broker.SASLIdentity
		err  string
	}{
		{append(sasl, "--inter-broker-sasl-mechanism", "SCRAM-SHA-512", "--inter-broker-sasl-username", "broker", "--inter-broker-sasl-password-file", pw),
			broker.SASLIdentity{Mechanism: "SCRAM-SHA-512", User: "broker", Password: "s3cret"}, ""},
		{append(sasl, "--inter-broker-sasl-password-file", filepath.Join(t.TempDir(), "none")), broker.SASLIdentity{}, "--inter-broker-sasl-password-file"},
		{sasl, broker.SASLIdentity{}, "its SASL mechanism \"\" must be one of"},
		{[]string{"--inter-broker-listener-name", "NOPE"}, broker.SASLIdentity{}, `"NOPE" is not one of the listeners`},
	} {
		cfg, err := serverConfig(t, tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.InterBrokerListener != "SASL_PLAINTEXT" || cfg.InterBrokerSASL != tc.want {
			t.Errorf("%v: listener %q identity %+v, want %+v", tc.args, cfg.InterBrokerListener, cfg.InterBrokerSASL, tc.want)
		}
	}
}
