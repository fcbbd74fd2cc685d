package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of one TLS identity. CA may be empty: a
// server then asks no client certificate it could verify, and a client
// trusts the system roots.
type Files struct {
	Cert, Key, CA string
}

// Empty reports whether no file is named.
func (f Files) Empty() bool { return f.Cert == "" && f.Key == "" && f.CA == "" }

// Validate reports a certificate without its key or a key without its
// certificate.
func (f Files) Validate() error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("tls: certificate %q and key %q must be given together", f.Cert, f.Key)
	}
	if f.Cert == "" && f.CA != "" {
		return fmt.Errorf("tls: CA bundle %q given without a certificate and key", f.CA)
	}
	return nil
}

// Store holds the current certificate, key and CA pool of Files.
type Store struct {
	files Files

	mu      sync.RWMutex
	cert    *tls.Certificate
	pool    *x509.CertPool
	stamp   string // modification times and sizes the pair was read at
	reloads int
}

// Load reads f once. It fails when any file is missing or does not
// parse, or when the key does not match the certificate.
func Load(f Files) (*Store, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Cert == "" {
		return nil, errors.New("tls: no certificate and key")
	}
	s := &Store{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Files returns the files s reads.
func (s *Store) Files() Files { return s.files }

// Reload reads the files again. On error the Store keeps what it had.
func (s *Store) Reload() error {
	stamp := s.statStamp()
	cert, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", s.files.Cert, s.files.Key, err)
	}
	var pool *x509.CertPool
	if s.files.CA != "" {
		pem, err := os.ReadFile(s.files.CA)
		if err != nil {
			return fmt.Errorf("tls: read CA bundle: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: CA bundle %s holds no PEM certificate", s.files.CA)
		}
	}
	s.mu.Lock()
	s.cert, s.pool, s.stamp = &cert, pool, stamp
	s.reloads++
	s.mu.Unlock()
	return nil
}

// Reloads counts successful loads, the first included.
func (s *Store) Reloads() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.reloads
}

// statStamp describes the files' sizes and modification times, so that a
// watcher sees a change; missing files stamp as such.
func (s *Store) statStamp() string {
	out := ""
	for _, p := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			out += p + ":missing;"
			continue
		}
		out += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
	}
	return out
}

// changed reports whether the files differ from what was last loaded.
func (s *Store) changed() bool {
	stamp := s.statStamp()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return stamp != s.stamp
}

// Watch reloads whenever the files change (checked every interval) or a
// value arrives on hup (SIGHUP; nil for none), until ctx ends. report
// (nil for none) hears every reload: nil when it took, its error when it
// failed and the old pair stays.
func (s *Store) Watch(ctx context.Context, interval time.Duration, hup <-chan struct{}, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !s.changed() {
				continue
			}
		case <-hup:
		}
		if err := s.Reload(); report != nil {
			report(err)
		}
	}
}

func (s *Store) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cert, s.pool
}

// Pool returns the current CA pool; nil without a CA bundle.
func (s *Store) Pool() *x509.CertPool {
	_, p := s.current()
	return p
}

// ServerConfig returns a server config that serves the current pair on
// every handshake. With clientAuth above tls.RequestClientCert the
// client's certificate is verified against the current CA pool (which
// must then exist).
func (s *Store) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   clientAuth,
				ClientCAs:    pool,
			}, nil
		},
	}
}

// ClientConfig returns a client config that presents the current pair
// and verifies the server against the current CA pool (the system roots
// without one). serverName, when empty, is taken from the dialed
// address by crypto/tls.
func (s *Store) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := s.current()
			return cert, nil
		},
		// The pool may change on reload: verify by hand against the
		// current one rather than a RootCAs fixed at creation.
		InsecureSkipVerify: s.files.CA != "",
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := s.current()
			if pool == nil {
				return nil // crypto/tls verified against the system roots
			}
			return verifyPeer(cs, pool, x509.ExtKeyUsageServerAuth)
		},
	}
}

// verifyPeer checks the peer's chain against pool, and its name when the
// state carries one.
func verifyPeer(cs tls.ConnectionState, pool *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: cs.ServerName, KeyUsages: []x509.ExtKeyUsage{usage}}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: peer certificate: %w", err)
	}
	return nil
}
