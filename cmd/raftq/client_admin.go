package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/internal/tlsfiles"
)

// Environment variables of the admin client's TLS flags, for a cluster
// whose admin listeners serve HTTPS (raftq server --admin-tls-*).
const (
	envAdminTLSCA   = "RAFTQ_ADMIN_TLS_CA_FILE"
	envAdminTLSCert = "RAFTQ_ADMIN_TLS_CERT_FILE"
	envAdminTLSKey  = "RAFTQ_ADMIN_TLS_KEY_FILE"
)

// adminFlags are the flags of a command that talks to the admin API:
// the address of any node's admin listener and, for HTTPS, the CA to
// verify it against and the client certificate it may require.
type adminFlags struct {
	addr string
	tls  tlsfiles.Files
}

func bindAdminFlags(e *env, fs *pflag.FlagSet, usage string) *adminFlags {
	f := &adminFlags{}
	fs.StringVar(&f.addr, "admin", e.flagDefault(envAdmin, "127.0.0.1:9644"), usage+"; $"+envAdmin+" sets the default")
	fs.StringVar(&f.tls.CA, "admin-tls-ca-file", e.flagDefault(envAdminTLSCA, ""), "talk HTTPS to the admin listeners, verifying them against this PEM CA bundle; $"+envAdminTLSCA+" sets the default")
	fs.StringVar(&f.tls.Cert, "admin-tls-cert-file", e.flagDefault(envAdminTLSCert, ""), "PEM client certificate for admin listeners that require one (HTTPS); $"+envAdminTLSCert+" sets the default")
	fs.StringVar(&f.tls.Key, "admin-tls-key-file", e.flagDefault(envAdminTLSKey, ""), "PEM key of --admin-tls-cert-file; $"+envAdminTLSKey+" sets the default")
	return f
}

// adminClient sends requests to admin listeners.
type adminClient struct {
	http   *http.Client
	scheme string // of addresses given without one
}

// client builds the admin client the flags ask for: plain HTTP without
// TLS flags, else HTTPS verified against the CA bundle (the system
// roots without one), presenting the certificate if one is given.
func (f *adminFlags) client() (*adminClient, error) {
	if f.tls.Empty() {
		return &adminClient{http: http.DefaultClient, scheme: "http"}, nil
	}
	cfg, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	return &adminClient{http: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, scheme: "https"}, nil
}

func (f *adminFlags) tlsConfig() (*tls.Config, error) {
	if (f.tls.Cert == "") != (f.tls.Key == "") {
		return nil, usageError{fmt.Errorf("--admin-tls-cert-file %q and --admin-tls-key-file %q must be given together", f.tls.Cert, f.tls.Key)}
	}
	if f.tls.Cert != "" {
		s, err := tlsfiles.Load(f.tls)
		if err != nil {
			return nil, fmt.Errorf("admin client TLS: %w", err)
		}
		return s.ClientConfig(""), nil
	}
	pem, err := os.ReadFile(f.tls.CA)
	if err != nil {
		return nil, fmt.Errorf("admin client TLS: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("admin client TLS: CA bundle %s holds no PEM certificate", f.tls.CA)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}

// url is path on the admin listener at addr, a host:port or a URL.
func (a *adminClient) url(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = a.scheme + "://" + addr
	}
	return strings.TrimSuffix(addr, "/") + path
}

// statusURL is the status document of the node at addr over plain HTTP,
// addr a host:port or a URL of the admin listener.
func statusURL(addr string) string {
	return (&adminClient{scheme: "http"}).url(addr, "/v1/status")
}

func (a *adminClient) status(ctx context.Context, addr string) (broker.Status, error) {
	var s broker.Status
	return s, a.do(ctx, addr, http.MethodGet, "/v1/status", 3*time.Second, &s)
}

// do sends method to path on the admin listener at addr, within
// timeout, and decodes a 200's JSON answer into out; any other answer
// is an error, with the {"error": ...} the admin API sends if any.
func (a *adminClient) do(ctx context.Context, addr, method, path string, timeout time.Duration, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.url(addr, path), nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w (is %s a node's admin HTTP address? A Kafka port hangs up on HTTP)", err, addr)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusBadRequest && a.scheme == "http" && resp.TLS == nil {
		if b, _ := io.ReadAll(io.LimitReader(resp.Body, 512)); strings.Contains(string(b), "HTTPS server") {
			return fmt.Errorf("%s serves HTTPS: give --admin-tls-ca-file (and a client certificate if it asks for one)", addr)
		}
		return fmt.Errorf("%s: %s", addr, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("%s: %s", addr, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
