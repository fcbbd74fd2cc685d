package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/internal/tlsfiles"
)

// The listeners raftq dev --tls adds, and the SCRAM user it makes for
// the SASL_SSL one.
const (
	devTLSListener     = "SSL"
	devSASLSSLListener = "SASL_SSL"
	devSASLUser        = "dev"
	devSASLPassword    = "dev-secret"
	// devSASLSSLOffset puts node i's SASL_SSL port this far above its SSL one.
	devSASLSSLOffset = 50
)

// devTLS is what raftq dev --tls serves: an SSL and a SASL_SSL listener
// per node beside the plaintext one, from a throwaway CA's certificates
// in dir.
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

// configure adds node i's SSL and SASL_SSL listeners to c; client
// certificates are requested, so clients with and without one connect.
// The peer transport requires the node certificate of the dev CA.
func (d *devTLS) configure(c *broker.Config, i int) {
	if d == nil {
		return
	}
	ssl, sasl := 0, 0 // with --base-port 0, every port is the kernel's pick
	if d.base != 0 {
		ssl = d.base + i - 1
		sasl = ssl + devSASLSSLOffset
	}
	c.Listeners = append(c.Listeners,
		broker.Listener{Name: devTLSListener, Addr: fmt.Sprintf("127.0.0.1:%d", ssl), Protocol: broker.ProtocolSSL},
		broker.Listener{Name: devSASLSSLListener, Addr: fmt.Sprintf("127.0.0.1:%d", sasl), Protocol: broker.ProtocolSASLSSL})
	c.SSL, c.SSLClientAuth = d.node, broker.SSLClientAuthRequested
	c.PeerTLS = d.node // the nodes' raft traffic under mutual TLS too, from the same CA
}

// bootstrapUser sets the dev user's SCRAM credentials through the
// plaintext listeners (again, on a reused data dir: the same password),
// and waits until every node's SASL_SSL listener accepts them.
func (d *devTLS) bootstrapUser(ctx context.Context, plaintext, saslSSL []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(plaintext...))
	if err != nil {
		return err
	}
	defer cl.Close()
	var ups []kadm.UpsertSCRAM
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		ups = append(ups, kadm.UpsertSCRAM{User: devSASLUser, Mechanism: m, Iterations: 8192, Password: devSASLPassword})
	}
	// Retried: at start a node may still be registered as its previous
	// run (a reused data dir, an older binary: UNSUPPORTED_VERSION until
	// it registers again), or group 0 may be electing.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, ups)
		if err == nil {
			err = res.Error()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("dev TLS: create SASL user %s: %w", devSASLUser, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, addr := range saslSSL {
		if err := d.awaitUser(ctx, addr); err != nil {
			return err
		}
	}
	return nil
}

// awaitUser authenticates as the dev user at addr until it works: a
// node learns of the user when the metadata group's entry reaches it.
func (d *devTLS) awaitUser(ctx context.Context, addr string) error {
	pem, err := os.ReadFile(d.node.CA)
	if err != nil {
		return fmt.Errorf("dev TLS: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("dev TLS: %s holds no PEM certificate", d.node.CA)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: devSASLUser, Pass: devSASLPassword}.AsSha512Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cl.Ping(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("dev TLS: user %s never authenticated at %s: %w", devSASLUser, addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tlsBanner tells how to connect to the SSL listeners.
func (b devBanner) tlsBanner() string {
	if b.tls == nil {
		return ""
	}
	bootstrap := strings.Join(b.tlsKafka, ",")
	ca, cl := b.tls.node.CA, b.tls.client
	return fmt.Sprintf(`
TLS: an SSL listener on every node (client certificates requested, not required; CA and certificates in %[1]s); the nodes talk to each other under mutual TLS
  ssl bootstrap       %[2]s
  %[3]s topic list --brokers %[2]s --tls-ca-file %[4]s
  echo hello | %[3]s produce demo --brokers %[2]s --tls-ca-file %[4]s
  %[3]s consume demo --brokers %[2]s --tls-ca-file %[4]s --tls-cert-file %[5]s --tls-key-file %[6]s
  kcat -b %[7]s -X security.protocol=ssl -X ssl.ca.location=%[4]s -t demo -C -e
  kcat -b %[7]s -X security.protocol=ssl -X ssl.ca.location=%[4]s -X ssl.certificate.location=%[5]s -X ssl.key.location=%[6]s -L
  export %[8]s=true %[9]s=%[4]s   (then --brokers %[2]s)

SASL_SSL: SCRAM inside TLS, as user %[10]s, password %[11]s
  sasl_ssl bootstrap  %[12]s
  %[3]s topic list --brokers %[12]s --tls-ca-file %[4]s --sasl-mechanism SCRAM-SHA-512 --sasl-user %[10]s --sasl-password %[11]s
  kcat -b %[13]s -X security.protocol=SASL_SSL -X ssl.ca.location=%[4]s -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=%[10]s -X sasl.password=%[11]s -L
`, b.tls.dir, bootstrap, b.self, ca, cl.Cert, cl.Key, b.tlsKafka[0], envTLS, envTLSCAFile,
		devSASLUser, devSASLPassword, strings.Join(b.saslSSLKafka, ","), first(b.saslSSLKafka))
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

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// devAddrs lists every node's address of the named listener; "" is the
// plaintext one.
func devAddrs(nodes []*broker.Node, listener string) []string {
	var out []string
	for _, n := range nodes {
		if listener == "" {
			k, _, _ := n.Addrs()
			out = append(out, k)
		} else {
			out = append(out, n.ListenerAddr(listener))
		}
	}
	return out
}
