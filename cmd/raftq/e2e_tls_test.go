package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/tlsfiles"
)

// e2ePKI is a CA with a node certificate for every chaos host, a client
// certificate (CN=alice), and a client certificate from another CA.
type e2ePKI struct {
	ca          *tlsfiles.CA
	dir         string
	node, alice tlsfiles.Files
	stranger    tlsfiles.Files
	nodeHosts   []string
	pool        *x509.CertPool
}

func newE2EPKI(t *testing.T) *e2ePKI {
	t.Helper()
	p := &e2ePKI{dir: t.TempDir(), nodeHosts: []string{"localhost"}, pool: x509.NewCertPool()}
	for i := 1; i <= 9; i++ {
		p.nodeHosts = append(p.nodeHosts, fmt.Sprintf("127.0.0.%d", i))
	}
	var err error
	if p.ca, err = tlsfiles.NewCA("e2e ca"); err != nil {
		t.Fatal(err)
	}
	p.pool.AddCert(p.ca.Cert())
	p.node = p.issueNode(t)
	if p.alice, err = p.ca.Issue(p.dir, "alice", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "alice", Organization: []string{"raftq"}}}); err != nil {
		t.Fatal(err)
	}
	other, err := tlsfiles.NewCA("other ca")
	if err != nil {
		t.Fatal(err)
	}
	otherDir := filepath.Join(p.dir, "other")
	if err := os.Mkdir(otherDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if p.stranger, err = other.Issue(otherDir, "alice", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "alice", Organization: []string{"raftq"}}}); err != nil {
		t.Fatal(err)
	}
	return p
}

// issueNode (re)writes node.crt and node.key with a fresh certificate.
func (p *e2ePKI) issueNode(t *testing.T) tlsfiles.Files {
	t.Helper()
	f, err := p.ca.Issue(p.dir, "node", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "raftq-node"}, Hosts: p.nodeHosts})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serverArgs are the --ssl-* flags of every node.
func (p *e2ePKI) serverArgs(clientAuth string) []string {
	return []string{"--ssl-cert-file", p.node.Cert, "--ssl-key-file", p.node.Key, "--ssl-ca-file", p.node.CA, "--ssl-client-auth", clientAuth}
}

// clientTLS trusts the CA and presents f's certificate (none when f is
// empty).
func (p *e2ePKI) clientTLS(t *testing.T, f tlsfiles.Files) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// tlsCluster is a cluster of real processes whose nodes each serve a
// listener of protocol beside their plaintext one; it returns those
// listeners' addresses.
func tlsCluster(t *testing.T, n int, protocol string, extra ...string) (*chaos.Cluster, []string) {
	t.Helper()
	addrs := map[int]string{}
	c := e2eClusterNodeArgs(t, n, nil, func(node chaos.Node) []string {
		if addrs[node.ID] == "" {
			addrs[node.ID] = freeAddrOn(t, node.Host.String())
		}
		return []string{"--listeners", protocol + "://" + addrs[node.ID]}
	}, extra...)
	var out []string
	for id := 1; id <= n; id++ {
		out = append(out, addrs[id])
	}
	return c, out
}

func e2eKgo(t *testing.T, seeds []string, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceConsume produces value through cl and polls until it reads it.
func produceConsume(t *testing.T, cl *kgo.Client, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", value, err)
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 && ctx.Err() == nil {
			t.Fatalf("consume: %v", errs)
		}
		for _, r := range fs.Records() {
			if string(r.Value) == value {
				return
			}
		}
	}
	t.Fatalf("never consumed %s", value)
}

// TestE2E_TLS_SASL_SSL: over a SASL_SSL listener, kcat (librdkafka)
// produces and consumes with SCRAM-SHA-512, franz-go with SCRAM-SHA-256,
// and `raftq topic list` with --tls-ca-file and --sasl-*; a wrong
// password and a client without TLS are refused.
func TestE2E_TLS_SASL_SSL(t *testing.T) {
	p := newE2EPKI(t)
	c, addrs := tlsCluster(t, 1, "SASL_SSL", p.serverArgs("none")...)
	plain := strings.Join(seeds(c), ",")
	cli(t, 0, "alice-pw\n", "user", "create", "alice", "-b", plain)
	createTopic(t, c, "secured", 1, 1, nil)
	sasl256 := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism())
	waitFor(t, 30*time.Second, "alice usable over SASL_SSL", func(ctx context.Context) bool {
		_, err := e2eKgo(t, addrs, "secured", kgo.DialTLSConfig(p.clientTLS(t, tlsfiles.Files{})), sasl256).Request(ctx, kmsg.NewPtrMetadataRequest())
		return err == nil
	})
	produceConsume(t, e2eKgo(t, addrs, "secured", kgo.DialTLSConfig(p.clientTLS(t, tlsfiles.Files{})), sasl256), "from-franz")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wrong := e2eKgo(t, addrs, "secured", kgo.DialTLSConfig(p.clientTLS(t, tlsfiles.Files{})), kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism()))
	if _, err := wrong.Request(ctx, kmsg.NewPtrMetadataRequest()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password over SASL_SSL: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if _, err := e2eKgo(t, addrs, "secured", sasl256).Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("a client without TLS got metadata from a SASL_SSL listener")
	}
	cli(t, 0, "", "topic", "list", "-b", addrs[0], "--tls-ca-file", p.node.CA, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--sasl-password", "alice-pw")

	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat; .ci/run installs it)")
	}
	auth := []string{"-b", strings.Join(addrs, ","), "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + p.node.CA,
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-pw"}
	if out, err := runKcat(t, kcat, "from-kcat\n", append(auth, "-P", "-t", "secured", "-p", "0", "-X", "acks=all")...); err != nil {
		t.Fatalf("kcat produce over SASL_SSL: %v\n%s", err, out)
	}
	out, err := runKcat(t, kcat, "", append(auth, "-C", "-t", "secured", "-p", "0", "-o", "beginning", "-c", "2", "-e", "-q", "-f", "%s\n")...)
	if err != nil {
		t.Fatalf("kcat consume over SASL_SSL: %v\n%s", err, out)
	}
	if got := lines(out); !slices.Equal(got, []string{"from-franz", "from-kcat"}) {
		t.Errorf("kcat read %v", got)
	}
	bad := slices.Clone(auth)
	bad[len(bad)-1] = "sasl.password=nope"
	if out, err := runKcat(t, kcat, "", append(bad, "-L", "-m", "5")...); err == nil {
		t.Errorf("kcat with a wrong password listed metadata:\n%s", out)
	}
}

// TestE2E_TLS_MutualTLS: an SSL listener requiring client certificates
// refuses a client without one and one from another CA, counting them in
// /metrics, and lets a client with a valid one produce and consume. The
// node's certificate files are then rewritten and SIGHUP sent, and
// rewritten again without a signal: each time a new connection sees the
// new certificate, while the client already connected keeps producing.
// A broken certificate file then changes nothing.
func TestE2E_TLS_MutualTLS(t *testing.T) {
	p := newE2EPKI(t)
	c, addrs := tlsCluster(t, 1, "SSL", p.serverArgs("required")...)
	createTopic(t, c, "mtls", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, f := range map[string]tlsfiles.Files{"no certificate": {}, "another CA": p.stranger} {
		if _, err := e2eKgo(t, addrs, "mtls", kgo.DialTLSConfig(p.clientTLS(t, f))).Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
			t.Errorf("%s: got metadata from a listener requiring client certificates", name)
		}
	}
	alice := e2eKgo(t, addrs, "mtls", kgo.DialTLSConfig(p.clientTLS(t, p.alice)))
	produceConsume(t, alice, "before-reload")
	cli(t, 0, "", "topic", "list", "-b", addrs[0], "--tls-ca-file", p.node.CA, "--tls-cert-file", p.alice.Cert, "--tls-key-file", p.alice.Key)
	n1, _ := c.Node(1)
	if got := metricSum(t, n1.AdminAddr(), "raftq_tls_handshake_failures_total"); got < 2 {
		t.Errorf("raftq_tls_handshake_failures_total %g, want at least the 2 refused clients", got)
	}

	old := serverSerial(t, addrs[0], p.clientTLS(t, p.alice))
	p.issueNode(t)
	if err := syscall.Kill(c.PID(1), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a new connection sees the new certificate", func(context.Context) bool {
		return serverSerial(t, addrs[0], p.clientTLS(t, p.alice)) != old
	})
	produceConsume(t, alice, "after-reload")
	hupped := serverSerial(t, addrs[0], p.clientTLS(t, p.alice))
	p.issueNode(t) // no signal this time: the file watch sees it
	waitFor(t, 30*time.Second, "the file watch loads the next certificate", func(context.Context) bool {
		return serverSerial(t, addrs[0], p.clientTLS(t, p.alice)) != hupped
	})
	produceConsume(t, alice, "after-watch")

	// A broken certificate file changes nothing: the node keeps serving
	// the last good pair and says why in its log.
	good := serverSerial(t, addrs[0], p.clientTLS(t, p.alice))
	if err := os.WriteFile(p.node.Cert, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.PID(1), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the failed reload logged", func(context.Context) bool {
		b, err := os.ReadFile(n1.LogPath)
		return err == nil && strings.Contains(string(b), "TLS files not reloaded")
	})
	if got := serverSerial(t, addrs[0], p.clientTLS(t, p.alice)); got != good {
		t.Errorf("after a broken reload the node serves certificate %s, want the last good %s", got, good)
	}
	produceConsume(t, e2eKgo(t, addrs, "mtls", kgo.DialTLSConfig(p.clientTLS(t, p.alice))), "after-broken-reload")
	if !c.Running(1) {
		t.Fatal("the node stopped on SIGHUP")
	}
}

// serverSerial dials addr with TLS and returns the serial of the
// certificate the server presented.
func serverSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// metricSum sums a metric's samples on a node's /metrics.
func metricSum(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := httpGet("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(resp, "\n") {
		if strings.HasPrefix(l, name) {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

func httpGet(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
