package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a throwaway certificate authority: an ECDSA P-256 key and a
// self-signed certificate, for `raftq dev --tls` and tests.
type CA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA named name, valid for a year.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"raftq"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, der: der, key: key}, nil
}

// Leaf describes a certificate the CA issues.
type Leaf struct {
	// Subject is its subject; CommonName names it.
	Subject pkix.Name
	// Hosts are DNS names and IP addresses it is valid for.
	Hosts []string
	// NotAfter ends its validity; zero means a year from now.
	NotAfter time.Time
}

// Issue writes name.crt and name.key into dir: a certificate for leaf,
// usable by servers and clients alike, and its key. It returns their
// Files, with CA naming the CA's own certificate (see WriteCert).
func (ca *CA) Issue(dir, name string, leaf Leaf) (Files, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, err
	}
	if leaf.NotAfter.IsZero() {
		leaf.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      leaf.Subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     leaf.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range leaf.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Files{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, "ca.crt")}
	if err := writePEM(f.Cert, "CERTIFICATE", der, 0o644); err != nil {
		return Files{}, err
	}
	if err := writePEM(f.Key, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return Files{}, err
	}
	return f, ca.WriteCert(f.CA)
}

// WriteCert writes the CA's certificate to path.
func (ca *CA) WriteCert(path string) error {
	return writePEM(path, "CERTIFICATE", ca.der, 0o644)
}

// Cert returns the CA's certificate.
func (ca *CA) Cert() *x509.Certificate { return ca.cert }

// writePEM writes one PEM block to path through a temporary file and a
// rename, so that a watcher never reads half a file.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("tls: write %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}
