package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/internal/tlsfiles"
)

// TestListeners_SSLBesidePlaintext: each node serves an SSL listener
// requesting client certificates beside its plaintext one, and another
// requiring them (its own client auth). A client with a certificate
// from the cluster's CA produces and consumes there, and Metadata names
// the SSL addresses; a plaintext client is refused at the handshake and
// counted; a client without a certificate is served where one is
// requested and refused where one is required.
func TestListeners_SSLBesidePlaintext(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsfiles.NewCA("test ca")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.Issue(dir, "node", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "node"}, Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	aliceFiles, err := ca.Issue(dir, "alice", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"clients"}}})
	if err != nil {
		t.Fatal(err)
	}
	ssl, mtls := map[uint64]string{}, map[uint64]string{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		ssl[cfg.NodeID], mtls[cfg.NodeID] = freeAddr(t), freeAddr(t)
		cfg.Listeners = []Listener{{Name: "SSL", Addr: ssl[cfg.NodeID], Protocol: ProtocolSSL},
			{Name: "MTLS", Addr: mtls[cfg.NodeID], Protocol: ProtocolSSL, SSLClientAuth: SSLClientAuthRequired}}
		cfg.SSL, cfg.SSLClientAuth = files, SSLClientAuthRequested
		cfg.SSLPrincipalMappingRules = "RULE:^CN=([^,]+),OU=clients$/$1/L,DEFAULT"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(c.client()).CreateTopic(ctx, 1, 3, nil, "secured"); err != nil {
		t.Fatal(err)
	}
	alice, err := tlsfiles.Load(aliceFiles)
	if err != nil {
		t.Fatal(err)
	}
	seeds := []string{ssl[1], ssl[2], ssl[3]}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("secured"),
			kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl := client(kgo.DialTLSConfig(alice.ClientConfig("")), kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}
	fs := cl.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
		t.Fatalf("consumed %v (errors %v)", recs, fs.Errors())
	}
	meta, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range meta.Brokers {
		if got := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); got != ssl[uint64(b.NodeID)] {
			t.Errorf("metadata over SSL names broker %d at %s, want its SSL listener %s", b.NodeID, got, ssl[uint64(b.NodeID)])
		}
	}
	plain := client()
	if _, err := plain.Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("a plaintext client got metadata from an SSL listener")
	}
	noCert := &tls.Config{RootCAs: alice.Pool(), MinVersion: tls.VersionTLS12}
	if _, err := client(kgo.DialTLSConfig(noCert)).Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Errorf("a client without a certificate on the listener requesting one: %v", err)
	}
	mtlsClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(mtls[1], mtls[2], mtls[3]), kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	if _, err := mtlsClient(kgo.DialTLSConfig(noCert)).Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("a client without a certificate got metadata from the listener requiring one")
	}
	if _, err := mtlsClient(kgo.DialTLSConfig(alice.ClientConfig(""))).Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Errorf("alice on the listener requiring a certificate: %v", err)
	}
	eventually(t, "handshake failures counted", func() bool {
		var sum float64
		for _, n := range c.nodes {
			sum += counterValue(t, n.metrics.tlsFailures.WithLabelValues("SSL"))
		}
		return sum > 0
	})
	if got, want := c.nodes[1].ssl.rules.String(), "[RULE:^CN=([^,]+),OU=clients$/$1/L, DEFAULT]"; got != want {
		t.Errorf("rules %s, want %s", got, want)
	}
}

func TestConfig_ValidateSSL(t *testing.T) {
	files := tlsfiles.Files{Cert: "n.crt", Key: "n.key", CA: "ca.crt"}
	sslListener := []Listener{{Name: "SSL", Addr: "127.0.0.1:9093", Protocol: ProtocolSSL}}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"an SSL listener with a certificate", func(c *Config) { c.Listeners, c.SSL = sslListener, files }, true},
		{"SASL_SSL without a certificate", func(c *Config) {
			c.Listeners = []Listener{{Name: "S", Addr: "127.0.0.1:9093", Protocol: ProtocolSASLSSL}}
		}, false},
		{"a key without its certificate", func(c *Config) { c.Listeners, c.SSL = sslListener, tlsfiles.Files{Key: "n.key"} }, false},
		{"required client auth with a CA", func(c *Config) {
			c.Listeners, c.SSL, c.SSLClientAuth = sslListener, files, SSLClientAuthRequired
		}, true},
		{"required client auth without a CA", func(c *Config) {
			c.Listeners, c.SSL, c.SSLClientAuth = sslListener, tlsfiles.Files{Cert: "n.crt", Key: "n.key"}, SSLClientAuthRequired
		}, false},
		{"requested client auth without a CA", func(c *Config) {
			c.Listeners, c.SSL, c.SSLClientAuth = sslListener, tlsfiles.Files{Cert: "n.crt", Key: "n.key"}, SSLClientAuthRequested
		}, false},
		{"an unknown client auth", func(c *Config) { c.Listeners, c.SSL, c.SSLClientAuth = sslListener, files, "always" }, false},
		{"a listener requiring client certificates where the node does not", func(c *Config) {
			c.SSL = files
			c.Listeners = []Listener{{Name: "SSL", Addr: "127.0.0.1:9093", Protocol: ProtocolSSL, SSLClientAuth: SSLClientAuthRequired}}
		}, true},
		{"a listener's client auth without a CA", func(c *Config) {
			c.SSL = tlsfiles.Files{Cert: "n.crt", Key: "n.key"}
			c.Listeners = []Listener{{Name: "SSL", Addr: "127.0.0.1:9093", Protocol: ProtocolSSL, SSLClientAuth: SSLClientAuthRequired}}
		}, false},
		{"a listener's unknown client auth", func(c *Config) {
			c.SSL = files
			c.Listeners = []Listener{{Name: "SSL", Addr: "127.0.0.1:9093", Protocol: ProtocolSSL, SSLClientAuth: "yes"}}
		}, false},
		{"a client auth on a plaintext listener", func(c *Config) {
			c.SSL = files
			c.Listeners = []Listener{{Name: "P", Addr: "127.0.0.1:9093", Protocol: ProtocolPlaintext, SSLClientAuth: SSLClientAuthRequired}}
		}, false},
		{"bad mapping rules", func(c *Config) { c.Listeners, c.SSL, c.SSLPrincipalMappingRules = sslListener, files, "RULE:x" }, false},
	} {
		c := DefaultConfig()
		c.NodeID, c.ClusterID, c.DataDir = 1, "t", t.TempDir()
		c.InitialCluster = map[uint64]string{1: c.PeerAddr}
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestNode_SSLCertificateMissing: a node whose certificate files are
// missing refuses to start before it touches its data directory.
func TestNode_SSLCertificateMissing(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = 1, "t", dir
	cfg.KafkaAddr, cfg.PeerAddr, cfg.AdminAddr = "127.0.0.1:0", freeAddr(t), "127.0.0.1:0"
	cfg.InitialCluster = map[uint64]string{1: cfg.PeerAddr}
	cfg.Listeners = []Listener{{Name: "SSL", Addr: "127.0.0.1:0", Protocol: ProtocolSSL}}
	cfg.SSL = tlsfiles.Files{Cert: filepath.Join(dir, "none.crt"), Key: filepath.Join(dir, "none.key")}
	n, err := New(cfg)
	if err == nil {
		n.Close()
		t.Fatal("a node without its certificate files started")
	}
	if _, statErr := os.Stat(filepath.Join(dir, "node.json")); !os.IsNotExist(statErr) {
		t.Errorf("the data directory was claimed: %v", statErr)
	}
}
