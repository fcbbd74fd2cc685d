package main

import (
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftq/raftq/internal/tlsfiles"
)

func TestTLSFlags_Config(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsfiles.NewCA("t")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.Issue(dir, "client", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "client"}})
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := (&tlsFlags{}).config(); cfg != nil || err != nil {
		t.Errorf("no flags: %v, %v; want plaintext", cfg, err)
	}
	if cfg, err := (&tlsFlags{on: true}).config(); cfg == nil || err != nil || cfg.RootCAs != nil {
		t.Errorf("--tls alone: %v, %v; want TLS with the system roots", cfg, err)
	}
	cfg, err := (&tlsFlags{ca: files.CA, cert: files.Cert, key: files.Key}).config()
	if err != nil || cfg == nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Errorf("files imply TLS with a pool and a certificate: %+v, %v", cfg, err)
	}
	var ue usageError
	if _, err := (&tlsFlags{cert: files.Cert}).config(); !errors.As(err, &ue) {
		t.Errorf("a certificate without its key: %v, want a usage error", err)
	}
	for name, f := range map[string]tlsFlags{
		"a CA file that is not PEM": {ca: garbage},
		"a missing CA file":         {ca: filepath.Join(dir, "none")},
		"a key that is not PEM":     {cert: files.Cert, key: garbage},
	} {
		if _, err := f.config(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
