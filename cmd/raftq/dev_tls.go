package main

import (
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/internal/tlsfiles"
)

// devTLSListener is the name of the SSL listener raftq dev --tls adds.
const devTLSListener = "SSL"

// devTLS is what raftq dev --tls serves: an SSL listener per node beside
// the plaintext one, from a throwaway CA's certificates in dir.
type devTLS struct {
	dir          string
	base         int // SSL port of node 1
	node, client tlsfiles.Files
}

// devTLSFiles reuses the CA, node and client certificates under dir
// when all are there, and otherwise makes them anew: a CA, a node
// certificate for 127.0.0.1 and localhost, and a client certificate
// (CN=dev-client) for trying mTLS.
func devTLSFiles(dir string) (node, client tlsfiles.Files, err error) {
	node = tlsfiles.Files{Cert: filepath.Join(dir, "node.crt"), Key: filepath.Join(dir, "node.key"), CA: filepath.Join(dir, "ca.crt")}
	client = tlsfiles.Files{Cert: filepath.Join(dir, "client.crt"), Key: filepath.Join(dir, "client.key"), CA: node.CA}
	if allExist(node.Cert, node.Key, node.CA, client.Cert, client.Key) {
		return node, client, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return node, client, err
	}
	ca, err := tlsfiles.NewCA("raftq dev CA")
	if err != nil {
		return node, client, err
	}
	if node, err = ca.Issue(dir, "node", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "raftq-dev-node", Organization: []string{"raftq"}}, Hosts: []string{"127.0.0.1", "localhost"}}); err != nil {
		return node, client, fmt.Errorf("dev TLS: %w", err)
	}
	if client, err = ca.Issue(dir, "client", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "dev-client", Organization: []string{"raftq"}}}); err != nil {
		return node, client, fmt.Errorf("dev TLS: %w", err)
	}
	return node, client, nil
}

func allExist(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// configure adds node i's SSL listener to c; client certificates are
// requested, so clients with and without one connect.
func (d *devTLS) configure(c *broker.Config, i int) {
	if d == nil {
		return
	}
	port := 0 // with --base-port 0, every port is the kernel's pick
	if d.base != 0 {
		port = d.base + i - 1
	}
	c.Listeners = append(c.Listeners, broker.Listener{Name: devTLSListener, Addr: fmt.Sprintf("127.0.0.1:%d", port), Protocol: broker.ProtocolSSL})
	c.SSL, c.SSLClientAuth = d.node, broker.SSLClientAuthRequested
}

// tlsBanner tells how to connect to the SSL listeners.
func (b devBanner) tlsBanner() string {
	if b.tls == nil {
		return ""
	}
	bootstrap := strings.Join(b.tlsKafka, ",")
	ca, cl := b.tls.node.CA, b.tls.client
	return fmt.Sprintf(`
TLS: an SSL listener on every node (client certificates requested, not required; CA and certificates in %[1]s)
  ssl bootstrap       %[2]s
  %[3]s topic list --brokers %[2]s --tls-ca-file %[4]s
  echo hello | %[3]s produce demo --brokers %[2]s --tls-ca-file %[4]s
  %[3]s consume demo --brokers %[2]s --tls-ca-file %[4]s --tls-cert-file %[5]s --tls-key-file %[6]s
  kcat -b %[7]s -X security.protocol=ssl -X ssl.ca.location=%[4]s -t demo -C -e
  kcat -b %[7]s -X security.protocol=ssl -X ssl.ca.location=%[4]s -X ssl.certificate.location=%[5]s -X ssl.key.location=%[6]s -L
  export %[8]s=true %[9]s=%[4]s   (then --brokers %[2]s)
`, b.tls.dir, bootstrap, b.self, ca, cl.Cert, cl.Key, b.tlsKafka[0], envTLS, envTLSCAFile)
}

// newDevTLS makes or reuses the certificates under dir/tls; tlsBase 0
// means base+200 (the kernel's pick when base is 0 too).
func newDevTLS(dir string, base, tlsBase int) (*devTLS, error) {
	if tlsBase == 0 && base != 0 {
		tlsBase = base + 200
	}
	d := &devTLS{dir: filepath.Join(dir, "tls"), base: tlsBase}
	var err error
	d.node, d.client, err = devTLSFiles(d.dir)
	return d, err
}
