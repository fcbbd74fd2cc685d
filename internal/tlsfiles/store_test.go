package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os"
	"testing"
	"time"
)

// issue makes a CA and one leaf for 127.0.0.1 named cn in dir.
func issue(t *testing.T, ca *CA, dir, cn string) Files {
	t.Helper()
	f, err := ca.Issue(dir, cn, Leaf{Subject: pkix.Name{CommonName: cn}, Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func newCA(t *testing.T, name string) *CA {
	t.Helper()
	ca, err := NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func load(t *testing.T, f Files) *Store {
	t.Helper()
	s, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve accepts TLS connections with cfg on loopback, completing each
// handshake, and returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte{1})
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with addr and reads the server's byte (which a server
// refusing the client certificate never sends); it returns the server
// certificate's common name.
func dial(addr string, cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func TestStore_MutualTLSAndReload(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "test CA")
	srv := load(t, issue(t, ca, dir, "server"))
	cli := load(t, issue(t, ca, t.TempDir(), "client"))
	addr := serve(t, srv.ServerConfig(tls.RequireAndVerifyClientCert))

	if cn, err := dial(addr, cli.ClientConfig("")); err != nil || cn != "server" {
		t.Fatalf("mutual TLS within one CA: %q, %v", cn, err)
	}

	// A client whose certificate another CA signed is refused.
	other := load(t, issue(t, newCA(t, "other CA"), t.TempDir(), "intruder"))
	if _, err := dial(addr, other.ClientConfig("")); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}

	// A reissued server certificate is served on the next handshake.
	issue(t, ca, dir, "server2")
	if err := os.Rename(dir+"/server2.crt", dir+"/server.crt"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+"/server2.key", dir+"/server.key"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if cn, err := dial(addr, cli.ClientConfig("")); err != nil || cn != "server2" {
		t.Fatalf("after reload: %q, %v; want server2", cn, err)
	}

	// A broken file fails the reload and keeps the pair.
	if err := os.WriteFile(dir+"/server.key", []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil {
		t.Fatal("a garbage key reloaded")
	}
	if cn, err := dial(addr, cli.ClientConfig("")); err != nil || cn != "server2" {
		t.Fatalf("after a failed reload: %q, %v; want server2 kept", cn, err)
	}
}

func TestStore_ClientRefusesAServerOfAnotherCA(t *testing.T) {
	srv := load(t, issue(t, newCA(t, "rogue"), t.TempDir(), "server"))
	cli := load(t, issue(t, newCA(t, "ours"), t.TempDir(), "client"))
	addr := serve(t, srv.ServerConfig(tls.NoClientCert))
	if _, err := dial(addr, cli.ClientConfig("")); err == nil {
		t.Fatal("a server certificate from another CA was trusted")
	}
}

func TestStore_ClientChecksTheServerName(t *testing.T) {
	ca := newCA(t, "ca")
	srv := load(t, issue(t, ca, t.TempDir(), "server"))
	cli := load(t, issue(t, ca, t.TempDir(), "client"))
	addr := serve(t, srv.ServerConfig(tls.NoClientCert))
	if _, err := dial(addr, cli.ClientConfig("elsewhere.example")); err == nil {
		t.Fatal("a certificate for 127.0.0.1 and localhost passed as elsewhere.example")
	}
}

func TestStore_WatchReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	s := load(t, issue(t, ca, dir, "server"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan struct{})
	go s.Watch(ctx, 10*time.Millisecond, hup, nil)
	time.Sleep(30 * time.Millisecond)
	if n := s.Reloads(); n != 1 {
		t.Fatalf("reloads with unchanged files: %d", n)
	}
	issue(t, ca, dir, "server") // rewrites server.crt and server.key
	deadline := time.Now().Add(5 * time.Second)
	for s.Reloads() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("changed files were not reloaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	hup <- struct{}{}
	for s.Reloads() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFiles_Validate(t *testing.T) {
	for _, f := range []Files{{Cert: "a"}, {Key: "b"}, {CA: "c"}} {
		if f.Validate() == nil {
			t.Errorf("%+v validated", f)
		}
	}
	if err := (Files{Cert: "a", Key: "b"}).Validate(); err != nil {
		t.Error(err)
	}
}
