package broker

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/internal/tlsfiles"
)

func TestConfig_ValidateTLS(t *testing.T) {
	full := tlsfiles.Files{Cert: "c.crt", Key: "c.key", CA: "ca.crt"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"none", func(*Config) {}, ""},
		{"peer mTLS", func(c *Config) { c.PeerTLS = full }, ""},
		{"peer without CA", func(c *Config) { c.PeerTLS = tlsfiles.Files{Cert: "c.crt", Key: "c.key"} }, "peer TLS needs"},
		{"peer CA alone", func(c *Config) { c.PeerTLS = tlsfiles.Files{CA: "ca.crt"} }, "peer TLS needs"},
		{"peer node name", func(c *Config) { c.PeerTLS, c.PeerTLSNodeName = full, "node-%d.raftq" }, ""},
		{"peer node name without %d", func(c *Config) { c.PeerTLS, c.PeerTLSNodeName = full, "node" }, "want one %d"},
		{"peer node name without peer TLS", func(c *Config) { c.PeerTLSNodeName = "node-%d" }, "want one %d"},
		{"admin TLS", func(c *Config) { c.AdminTLS = tlsfiles.Files{Cert: "c.crt", Key: "c.key"} }, ""},
		{"admin key alone", func(c *Config) { c.AdminTLS = tlsfiles.Files{Key: "c.key"} }, "given together"},
		{"admin client certs", func(c *Config) { c.AdminTLS, c.AdminRequireClientCert = full, true }, ""},
		{"admin client certs without CA", func(c *Config) {
			c.AdminTLS, c.AdminRequireClientCert = tlsfiles.Files{Cert: "c.crt", Key: "c.key"}, true
		}, "no admin CA bundle"},
	} {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// issue writes a certificate for 127.0.0.1 from ca into dir.
func issue(t *testing.T, ca *tlsfiles.CA, dir, name string) tlsfiles.Files {
	t.Helper()
	f, err := ca.Issue(dir, name, tlsfiles.Leaf{Subject: pkix.Name{CommonName: name}, Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestNode_MutualTLSBetweenNodes runs a 3-node cluster whose peer
// transport and admin listeners require certificates from the cluster's
// CA: the nodes find each other and serve; a peer connection and an
// admin request with a certificate from another CA are refused and
// counted in /metrics; a plaintext admin request is told to use HTTPS.
func TestNode_MutualTLSBetweenNodes(t *testing.T) {
	ca, err := tlsfiles.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsfiles.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := newTestCluster(t, 3, func(c *Config) {
		f := issue(t, ca, dir, fmt.Sprintf("node-%d", c.NodeID))
		c.PeerTLS, c.AdminTLS, c.AdminRequireClientCert = f, f, true
		c.PeerTLSNodeName = "node-%d"
	})
	produceSome(t, c)

	good, err := tlsfiles.Load(issue(t, ca, dir, "operator"))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := tlsfiles.Load(issue(t, other, t.TempDir(), "intruder"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.cfgs[1]
	conn, err := tls.Dial("tcp", cfg.PeerAddr, foreign.ClientConfig(""))
	if err == nil { // TLS 1.3: the refusal arrives on the first read
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("a peer connection with a foreign certificate was served")
	}
	if _, err := httpsGet(foreign, cfg.AdminAddr, "/v1/status"); err == nil {
		t.Error("an admin request with a foreign certificate was served")
	}
	if body, err := httpGet("http://"+cfg.AdminAddr+"/v1/status", http.DefaultClient); err == nil && !strings.Contains(body, "HTTPS server") {
		t.Errorf("a plaintext admin request was served: %q", body)
	}
	eventually(t, "/metrics counts the refusals", func() bool {
		m, err := httpsGet(good, cfg.AdminAddr, "/metrics")
		return err == nil && strings.Contains(m, `raftq_peer_handshakes_refused_total{direction="inbound",stage="tls"} 1`) &&
			!strings.Contains(m, "raftq_admin_tls_handshakes_refused_total 0")
	})
}

func produceSome(t *testing.T, c *testCluster) {
	t.Helper()
	cl := c.client()
	createTopic(t, cl, "tls", 1, 3)
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "tls", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce over a cluster with peer mTLS: %v", err)
	}
}

func httpsGet(s *tlsfiles.Store, addr, path string) (string, error) {
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: s.ClientConfig("")}}
	return httpGet("https://"+addr+path, cl)
}

func httpGet(url string, cl *http.Client) (string, error) {
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// TestElectLeaders_RaftThroughTheLeaderOverAdminTLS: the asked node
// reaches the leader's admin API over HTTPS, presenting its admin
// certificate to a listener that requires one.
func TestElectLeaders_RaftThroughTheLeaderOverAdminTLS(t *testing.T) {
	ca, err := tlsfiles.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	electThroughTheLeader(t, func(c *Config) {
		f := issue(t, ca, dir, fmt.Sprintf("node-%d", c.NodeID))
		c.PeerTLS, c.AdminTLS, c.AdminRequireClientCert = f, f, true
	})
}

// TestNode_TLSFilesReload: rewritten certificate files are reloaded
// without a restart and logged; a broken file is logged and the node
// keeps the certificate it had, its peers still reaching it.
func TestNode_TLSFilesReload(t *testing.T) {
	ca, err := tlsfiles.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var logs logging.Buffer
	c := newTestCluster(t, 2, func(c *Config) {
		f := issue(t, ca, dir, fmt.Sprintf("node-%d", c.NodeID))
		c.PeerTLS = f
		if c.NodeID == 1 {
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		}
	})
	issue(t, ca, dir, "node-1") // a new certificate in the same files
	eventually(t, "node 1 logs the reload", func() bool {
		return strings.Contains(logs.String(), `msg="TLS files reloaded" node=1 tls=peer`)
	})
	if err := os.WriteFile(c.cfgs[1].PeerTLS.Cert, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 1 logs the failed reload", func() bool {
		return strings.Contains(logs.String(), `msg="TLS files not reloaded; serving the previous certificate"`)
	})
	c.stop(2)
	c.start(2) // node 1 dials it, presenting the certificate it kept
	eventually(t, "node 2 connected to node 1 again", func() bool {
		s, _ := c.nodes[2].peer.PeerStats(1)
		return s.Connected
	})
}
