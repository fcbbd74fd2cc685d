package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/raftq/raftq/internal/tlsfiles"
)

// testPKI is a CA with a server certificate for 127.0.0.1, a client
// certificate for alice, and a client certificate from another CA.
type testPKI struct {
	server, alice, stranger *tlsfiles.Store
	pool                    *x509.CertPool
}

func newTestPKI(t testing.TB) testPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsfiles.NewCA("test ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsfiles.NewCA("other ca")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *tlsfiles.CA, sub, name string, leaf tlsfiles.Leaf) *tlsfiles.Store {
		t.Helper()
		f, err := ca.Issue(dir+"/"+sub, name, leaf)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tlsfiles.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, sub := range []string{"a", "b"} {
		if err := os.Mkdir(dir+"/"+sub, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := testPKI{
		server:   issue(ca, "a", "server", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "server"}, Hosts: []string{"127.0.0.1"}}),
		alice:    issue(ca, "a", "alice", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "alice", Organization: []string{"raftq"}}}),
		stranger: issue(other, "b", "alice", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "alice", Organization: []string{"raftq"}}}),
		pool:     x509.NewCertPool(),
	}
	p.pool.AddCert(ca.Cert())
	return p
}

// tlsServer starts a TLS listener with client auth ca; mod changes the
// config further.
func tlsServer(t *testing.T, f *fakeHandler, p testPKI, ca tls.ClientAuthType, mod func(*Config)) *testServer {
	t.Helper()
	ts := startServer(t, f, func(c *Config) {
		c.TLS = p.server.ServerConfig(ca)
		c.PrincipalFromCert = func(cert *x509.Certificate) (string, error) { return cert.Subject.String(), nil }
		if mod != nil {
			mod(c)
		}
	})
	f.addr = ts.Addr
	return ts
}

// metadataOver asks for metadata through kgo with extra options.
func metadataOver(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, metadataReq(kmsg.NewPtrMetadataRequest().MaxVersion(), "t"))
	return err
}

// withCert is a client TLS config trusting the test CA and presenting
// store's certificate (none when nil).
func (p testPKI) withCert(store *tlsfiles.Store) kgo.Opt {
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if store != nil {
		cfg = store.ClientConfig("")
		// The stranger's store trusts its own CA: trust ours for the server.
		cfg.InsecureSkipVerify, cfg.VerifyConnection, cfg.RootCAs = false, nil, p.pool
	}
	return kgo.DialTLSConfig(cfg)
}

// TestTLS_FranzGoOverTLS: franz-go asks for metadata over TLS and the
// handler sees it, anonymous; a plaintext client is closed before the
// handler sees anything and the failure is observed as ErrTLSHandshake.
func TestTLS_FranzGoOverTLS(t *testing.T) {
	p := newTestPKI(t)
	f := newFake()
	ts := tlsServer(t, f, p, tls.NoClientCert, nil)
	if err := metadataOver(t, ts.Addr().String(), p.withCert(nil)); err != nil {
		t.Fatalf("metadata over TLS: %v", err)
	}
	served := len(f.requests())
	if served == 0 {
		t.Fatal("the handler saw nothing")
	}
	for _, c := range f.conns() {
		if got, want := c.Principal(), "User:ANONYMOUS"; got != want {
			t.Errorf("principal %q, want %q", got, want)
		}
		if cs, ok := c.TLS(); !ok || !cs.HandshakeComplete {
			t.Errorf("handler's conn TLS %v, handshake complete %v", ok, cs.HandshakeComplete)
		}
	}
	if err := metadataOver(t, ts.Addr().String()); err == nil {
		t.Error("a plaintext client got metadata from a TLS listener")
	}
	if got := len(f.requests()); got != served {
		t.Errorf("the handler served %d requests of a plaintext client", got-served)
	}
	eventually(t, "a handshake failure observed", func() bool { return ts.obs.anyClosedWith(ErrTLSHandshake) })
}

// TestTLS_MutualTLS: with client certificates required, alice's maps to
// her principal; no certificate, or one from another CA, is refused in
// the handshake; a mapping error closes the connection.
func TestTLS_MutualTLS(t *testing.T) {
	p := newTestPKI(t)
	f := newFake()
	ts := tlsServer(t, f, p, tls.RequireAndVerifyClientCert, nil)
	addr := ts.Addr().String()
	if err := metadataOver(t, addr, p.withCert(p.alice)); err != nil {
		t.Fatalf("alice: %v", err)
	}
	for _, c := range f.conns() {
		if got, want := c.Principal(), "User:CN=alice,O=raftq"; got != want {
			t.Errorf("principal %q, want %q", got, want)
		}
	}
	served := len(f.requests())
	for name, opt := range map[string]kgo.Opt{"no certificate": p.withCert(nil), "another CA": p.withCert(p.stranger)} {
		if err := metadataOver(t, addr, opt); err == nil {
			t.Errorf("%s: served", name)
		}
	}
	if got := len(f.requests()); got != served {
		t.Errorf("the handler served %d requests of refused clients", got-served)
	}
	eventually(t, "handshake failures observed", func() bool { return ts.obs.anyClosedWith(ErrTLSHandshake) })

	refuse := tlsServer(t, newFake(), p, tls.RequireAndVerifyClientCert, func(c *Config) {
		c.PrincipalFromCert = func(*x509.Certificate) (string, error) { return "", errors.New("no rule applies") }
	})
	if err := metadataOver(t, refuse.Addr().String(), p.withCert(p.alice)); err == nil {
		t.Error("a certificate the mapping refused was served")
	}
}

// TestTLS_RequestedClientAuth: with client certificates requested, a
// client without one is anonymous and one with a valid one is named.
func TestTLS_RequestedClientAuth(t *testing.T) {
	p := newTestPKI(t)
	f := newFake()
	ts := tlsServer(t, f, p, tls.VerifyClientCertIfGiven, nil)
	if err := metadataOver(t, ts.Addr().String(), p.withCert(nil)); err != nil {
		t.Fatal(err)
	}
	n := len(f.conns())
	if err := metadataOver(t, ts.Addr().String(), p.withCert(p.alice)); err != nil {
		t.Fatal(err)
	}
	conns := f.conns()
	if got := conns[0].Principal(); got != "User:ANONYMOUS" {
		t.Errorf("without a certificate: %q", got)
	}
	if got := conns[n].Principal(); got != "User:CN=alice,O=raftq" {
		t.Errorf("with alice's certificate: %q", got)
	}
	if err := metadataOver(t, ts.Addr().String(), p.withCert(p.stranger)); err == nil {
		t.Error("a certificate from another CA was served")
	}
}

// TestTLS_SASLOverTLS: SASL_SSL: the SASL gate runs inside TLS, and the
// SASL principal wins over the certificate's, as in Kafka.
func TestTLS_SASLOverTLS(t *testing.T) {
	p := newTestPKI(t)
	f := newFake()
	ts := tlsServer(t, f, p, tls.VerifyClientCertIfGiven, func(c *Config) { c.SASL = &SASLConfig{Lookup: saslUsers(t)} })
	addr := ts.Addr().String()
	bob := kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism())
	if err := metadataOver(t, addr, p.withCert(p.alice), bob); err != nil {
		t.Fatalf("SCRAM over TLS: %v", err)
	}
	for _, c := range f.conns() {
		if got, want := c.Principal(), "User:bob"; got != want {
			t.Errorf("principal %q, want %q", got, want)
		}
	}
	served := len(f.requests())
	if err := metadataOver(t, addr, p.withCert(p.alice)); err == nil {
		t.Error("a TLS client without SASL was served")
	}
	for _, r := range f.requests()[served:] {
		if r.Header.Key != apiVersionsKey {
			t.Errorf("served %s without SASL", kmsg.NameForKey(r.Header.Key))
		}
	}
}

// TestTLS_HandshakeTimeout: a client that connects and never says hello
// is closed after the handshake timeout.
func TestTLS_HandshakeTimeout(t *testing.T) {
	p := newTestPKI(t)
	ts := tlsServer(t, newFake(), p, tls.NoClientCert, func(c *Config) { c.TLSHandshakeTimeout = 50 * time.Millisecond })
	c, err := net.DialTimeout("tcp", ts.Addr().String(), hangGuard)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(hangGuard))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the server wrote to a client that never said hello")
	}
	eventually(t, "the silent client closed with ErrTLSHandshake", func() bool { return ts.obs.anyClosedWith(ErrTLSHandshake) })
}

// TestTLS_ShutdownDuringHandshake: Shutdown closes a connection still in
// its handshake cleanly; it is not counted as a failed handshake.
func TestTLS_ShutdownDuringHandshake(t *testing.T) {
	p := newTestPKI(t)
	ts := tlsServer(t, newFake(), p, tls.NoClientCert, nil)
	c, err := net.DialTimeout("tcp", ts.Addr().String(), hangGuard)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, "the connection accepted", func() bool { return ts.obs.connsOpen.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	reasons := ts.obs.closedReasons()
	if len(reasons) != 1 || reasons[0] != nil {
		t.Errorf("close reasons %v, want one clean close", reasons)
	}
}

// TestConfig_ValidateTLS: TLS needs a handshake timeout, and a
// certificate mapping needs TLS.
func TestConfig_ValidateTLS(t *testing.T) {
	c := DefaultConfig()
	c.TLS = &tls.Config{}
	c.TLSHandshakeTimeout = 0
	if c.Validate() == nil {
		t.Error("TLS without a handshake timeout validated")
	}
	c = DefaultConfig()
	c.PrincipalFromCert = func(*x509.Certificate) (string, error) { return "", nil }
	if c.Validate() == nil {
		t.Error("PrincipalFromCert without TLS validated")
	}
}
