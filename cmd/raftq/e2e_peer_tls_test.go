package main

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/tlsfiles"
)

// nodeCAs are the certificate authorities of an mTLS end-to-end run: the
// cluster's, and another one whose certificates must not get in.
type nodeCAs struct {
	cluster, other       *tlsfiles.CA
	clusterDir, otherDir string
}

func newNodeCAs(t *testing.T) *nodeCAs {
	t.Helper()
	cas := &nodeCAs{clusterDir: t.TempDir(), otherDir: t.TempDir()}
	var err error
	if cas.cluster, err = tlsfiles.NewCA("raftq-e2e"); err != nil {
		t.Fatal(err)
	}
	if cas.other, err = tlsfiles.NewCA("raftq-elsewhere"); err != nil {
		t.Fatal(err)
	}
	return cas
}

// issueCert writes a certificate named name for host from ca into dir.
func issueCert(t *testing.T, ca *tlsfiles.CA, dir, name, host string, notAfter time.Time) tlsfiles.Files {
	t.Helper()
	f, err := ca.Issue(dir, name, tlsfiles.Leaf{Subject: pkix.Name{CommonName: name}, Hosts: []string{host}, NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// nodeTLSArgs are the server flags of mutual TLS on the peer port and
// the admin listener, the certificate f's and the CA bundle ca's; node
// N's certificate must be named node-N.
func nodeTLSArgs(f tlsfiles.Files, ca string) []string {
	return []string{"--peer-tls-cert-file", f.Cert, "--peer-tls-key-file", f.Key, "--peer-tls-ca-file", ca, "--peer-tls-node-name", "node-%d",
		"--admin-tls-cert-file", f.Cert, "--admin-tls-key-file", f.Key, "--admin-tls-ca-file", ca, "--admin-tls-client-auth", "required"}
}

// mtlsCluster prepares n node slots whose peer and admin listeners
// require certificates from the cluster's CA, and starts the first
// initial of them; the others join (with --seeds) when the test starts
// them. The cluster's HTTP client presents an operator's certificate.
func mtlsCluster(t *testing.T, cas *nodeCAs, n, initial int) (*chaos.Cluster, tlsfiles.Files) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end cluster tests run real processes; skipped with -short")
	}
	operator := issueCert(t, cas.cluster, cas.clusterDir, "operator", "127.0.0.1", time.Time{})
	store, err := tlsfiles.Load(operator)
	if err != nil {
		t.Fatal(err)
	}
	cfg := chaos.DefaultConfig()
	cfg.Binary, cfg.Nodes, cfg.Dir = raftqBinary, n, t.TempDir()
	grow := growArgs(initial, "--tick-interval", "50ms", "--log-level", "info")
	// Issued before any node starts, so no two starts write the CA's
	// file at once; peers verify the chain only, so the host (chaos puts
	// node N on 127.0.0.N+1) is for show.
	certs := map[int]tlsfiles.Files{}
	for id := 1; id <= n; id++ {
		certs[id] = issueCert(t, cas.cluster, cas.clusterDir, fmt.Sprintf("node-%d", id), fmt.Sprintf("127.0.0.%d", id+1), time.Time{})
	}
	cfg.Args = func(node chaos.Node, all []chaos.Node) []string {
		return append(grow(node, all), nodeTLSArgs(certs[node.ID], certs[node.ID].CA)...)
	}
	cfg.Ready = chaos.HTTPReady("/v1/status")
	cfg.AdminTLS = store.ClientConfig("")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := chaos.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, node := range c.Nodes() {
				if b, err := os.ReadFile(node.LogPath); err == nil {
					t.Logf("---- node %d log (tail) ----\n%s", node.ID, tail(b, 4000))
				}
			}
		}
		c.Close()
	})
	ids := make([]int, initial)
	for i := range ids {
		ids[i] = i + 1
	}
	if err := c.EnsureRunning(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	waitAlive(t, c, ids)
	return c, operator
}

// TestE2E_PeerMTLS runs a 3-node cluster with mutual TLS on the peer
// transport and the admin listeners while a franz-go idempotent
// acks=all producer loads a topic. Nodes with a certificate from another
// CA, with an expired one, or with no peer TLS at all try to join
// through a seed: each exits saying why, the seed's /metrics counts the
// refused TLS handshakes, and the cluster keeps serving; a node whose
// certificate comes from the cluster's CA but is not named for it
// (--peer-tls-node-name) is refused too. Then a fourth node with its own
// certificate from the cluster's CA joins and serves; the CLI reads
// cluster status over HTTPS with a client certificate, and is told to
// use HTTPS without one. Every acknowledged record reads back once, in
// order.
func TestE2E_PeerMTLS(t *testing.T) {
	cas := newNodeCAs(t)
	c, operator := mtlsCluster(t, cas, 4, 3)
	const topic = "mtls"
	createTopic(t, c, topic, 3, 3, nil)
	ld := startLoad(t, c, topic, failoverLoad{parts: 3, maxRecords: 1_000_000, loadTimeout: 90 * time.Second, rate: 300})
	awaitLoad(t, ld, 3, 100)

	n1, _ := c.Node(1)
	refusedBefore := peerTLSRefused(t, c, n1)
	joiner := func(tlsArgs ...string) []string {
		return append([]string{"server", "--node-id", "9", "--data-dir", filepath.Join(t.TempDir(), "data"),
			"--kafka-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--tick-interval", "50ms", "--seeds", n1.PeerAddr(), "--join-timeout", "20s"}, tlsArgs...)
	}
	foreign := issueCert(t, cas.other, cas.otherDir, "node-9", "127.0.0.1", time.Time{})
	expired := issueCert(t, cas.cluster, cas.clusterDir, "expired", "127.0.0.1", time.Now().Add(-time.Minute))
	clusterCA := operator.CA
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// It trusts the cluster's CA, so that it is the cluster that
		// refuses it, not the reverse.
		{"certificate from another CA", joiner(nodeTLSArgs(foreign, clusterCA)...), "refused this node's certificate"},
		{"expired certificate", joiner(nodeTLSArgs(expired, clusterCA)...), "expired certificate"},
		{"no peer TLS", joiner(), "requires TLS on its peer port"},
		// The operator's certificate comes from the cluster's CA, but
		// is not node 9's.
		{"certificate of the CA not named for the node", joiner(nodeTLSArgs(operator, clusterCA)...), `is not named "node-9"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := cli(t, 1, "", tc.args...)
			t.Logf("the joiner says: %s", lines(out.stderr)[len(lines(out.stderr))-1])
			if !strings.Contains(out.stderr, tc.want) || !strings.Contains(out.stderr, "join: seed") {
				t.Errorf("stderr does not say %q:\n%s", tc.want, out.stderr)
			}
		})
		awaitLoad(t, ld, 3, 50) // the cluster serves on
	}
	if got := peerTLSRefused(t, c, n1); got < refusedBefore+3 {
		t.Errorf("node 1 counted %v refused TLS handshakes, want at least %v (the misnamed certificate is refused after TLS)", got, refusedBefore+3)
	}
	s, err := nodeStatus(context.Background(), c, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Brokers) != 3 || len(s.Metadata.Learner) != 0 {
		t.Errorf("after the refused joins: %d brokers, learners %v", len(s.Brokers), s.Metadata.Learner)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx, 4); err != nil {
		t.Fatalf("join node 4 with the cluster's CA: %v", err)
	}
	waitAlive(t, c, []int{1, 2, 3, 4})
	checkPlacedOn(t, c, "mtls-after-4", 4)
	checkISROverTLS(t, c)
	awaitLoad(t, ld, 3, 100)

	adminTLS := []string{"--admin", n1.AdminAddr(), "--admin-tls-ca-file", operator.CA, "--admin-tls-cert-file", operator.Cert, "--admin-tls-key-file", operator.Key}
	status := cli(t, 0, "", append([]string{"cluster", "status"}, adminTLS...)...)
	for id := range 4 {
		if !hasRow(status.stdout, strconv.Itoa(id+1), "*", "*", "*", "true", "*", "*", "*") {
			t.Errorf("cluster status over HTTPS does not show node %d reachable:\n%s", id+1, status.stdout)
		}
	}
	plain := cli(t, 1, "", "cluster", "status", "--admin", n1.AdminAddr())
	if !strings.Contains(plain.stderr, "serves HTTPS") {
		t.Errorf("cluster status over plain HTTP: %q, want a hint to use HTTPS", plain.stderr)
	}

	sent, acked, failed := ld.stop(t)
	t.Logf("sent %d, acknowledged %d, failed %d", countAll(sent), len(acked), failed)
	if failed > 0 {
		t.Errorf("%d records failed while nodes were refused and joined", failed)
	}
	for p := range int32(3) {
		got, _ := readPartition(t, c, topic, p)
		checkLog(t, fmt.Sprintf("%s-%d", topic, p), got, sent[p], acked)
	}
	checkNoCrashes(t, c)
}

// checkISROverTLS writes to an ISR topic, whose followers fetch from
// their leader over the peer transport's fetch streams (TLS here), and
// checks that every replica holds what was acknowledged.
func checkISROverTLS(t *testing.T, c *chaos.Cluster) {
	t.Helper()
	const topic = "mtls-isr"
	createTopic(t, c, topic, 1, 3, isrTopic.with(nil))
	values := seq(topic, 50)
	produceValues(t, e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())), topic, 0, values...)
	got, _ := readPartition(t, c, topic, 0)
	checkLog(t, topic+"-0", got, values, allAcked(values))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitReplicasEqual(t, c, topic, 0, hostsOf(ctx, c, topic, 0))
}

// peerTLSRefused reads from n's /metrics how many peer connections it
// refused at the TLS handshake.
func peerTLSRefused(t *testing.T, c *chaos.Cluster, n chaos.Node) float64 {
	t.Helper()
	resp, err := c.HTTPClient().Get(c.AdminURL(n, "/metrics"))
	if err != nil {
		t.Fatalf("metrics of node %d: %v", n.ID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics of node %d: %s %v", n.ID, resp.Status, err)
	}
	const name = `raftq_peer_handshakes_refused_total{direction="inbound",stage="tls"} `
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("node %d's /metrics has no %s", n.ID, name)
	return 0
}
