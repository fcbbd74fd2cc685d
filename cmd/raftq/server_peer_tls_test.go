package main

import (
	"errors"
	"strings"
	"testing"
)

// TestServerFlags_NodeTLS: the --peer-tls-* and --admin-tls-* flags reach
// broker.Config, and an incomplete set is a usage error naming what is
// missing.
func TestServerFlags_NodeTLS(t *testing.T) {
	peer := []string{"--peer-tls-cert-file", "n.crt", "--peer-tls-key-file", "n.key", "--peer-tls-ca-file", "ca.crt"}
	admin := []string{"--admin-tls-cert-file", "a.crt", "--admin-tls-key-file", "a.key"}
	for _, tc := range []struct {
		args    []string
		bad     string // part of the usage error; "" for none
		peer    bool
		admin   bool
		require bool
	}{
		{nil, "", false, false, false},
		{peer, "", true, false, false},
		{peer[:4], "needs all of", false, false, false},
		{[]string{"--peer-tls-ca-file", "ca.crt"}, "needs all of", false, false, false},
		{append(peer, "--peer-tls-node-name", "node-%d.raftq"), "", true, false, false},
		{append(peer, "--peer-tls-node-name", "node"), "want one %d", false, false, false},
		{[]string{"--peer-tls-node-name", "node-%d"}, "want one %d", false, false, false},
		{admin, "", false, true, false},
		{append(admin, "--admin-tls-ca-file", "ca.crt", "--admin-tls-client-auth", "required"), "", false, true, true},
		{append(admin, "--admin-tls-client-auth", "required"), "needs --admin-tls-ca-file", false, false, false},
		{append(admin, "--admin-tls-client-auth", "optional"), "want none or required", false, false, false},
		{admin[:2], "must be given together", false, false, false},
		{[]string{"--admin-tls-ca-file", "ca.crt"}, "without --admin-tls-cert-file", false, false, false},
	} {
		cfg, err := serverConfig(t, tc.args)
		var ue usageError
		switch {
		case tc.bad != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v: err %v, want a usage error with %q", tc.args, err, tc.bad)
		case tc.bad == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.bad == "" && (cfg.PeerTLS.Empty() == tc.peer || cfg.AdminTLS.Empty() == tc.admin || cfg.AdminRequireClientCert != tc.require):
			t.Errorf("%v: peer %+v admin %+v require %v", tc.args, cfg.PeerTLS, cfg.AdminTLS, cfg.AdminRequireClientCert)
		}
	}
}
