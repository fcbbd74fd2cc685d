package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/internal/tlsfiles"
	"github.com/raftq/raftq/raftgroup"
)

// testCA makes a throwaway CA and a directory for what it issues.
func testCA(t *testing.T, name string) (*tlsfiles.CA, string) {
	t.Helper()
	ca, err := tlsfiles.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca, t.TempDir()
}

// issueStore issues a certificate for 127.0.0.1 from ca and loads it.
func issueStore(t *testing.T, ca *tlsfiles.CA, dir, name string, notAfter time.Time) *tlsfiles.Store {
	t.Helper()
	f, err := ca.Issue(dir, name, tlsfiles.Leaf{Subject: pkix.Name{CommonName: name}, Hosts: []string{"127.0.0.1"}, NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tlsfiles.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withTLS puts a node's peer port under mutual TLS from s.
func withTLS(s *tlsfiles.Store) func(*Config) {
	return func(c *Config) {
		c.ServerTLS = s.ServerConfig(tls.RequireAndVerifyClientCert)
		c.ClientTLS = s.ClientConfig("")
	}
}

// both applies several config edits.
func both(edits ...func(*Config)) func(*Config) {
	return func(c *Config) {
		for _, e := range edits {
			e(c)
		}
	}
}

// firstBytes records the first byte each accepted connection carried.
type firstBytes struct {
	mu    sync.Mutex
	first []byte
}

func (f *firstBytes) listen(c *Config) {
	c.Listen = func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		return sniffListener{Listener: ln, f: f}, err
	}
}

func (f *firstBytes) seen() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bytes.Clone(f.first)
}

type sniffListener struct {
	net.Listener
	f *firstBytes
}

func (l sniffListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return conn, err
	}
	return &sniffConn{Conn: conn, f: l.f}, nil
}

type sniffConn struct {
	net.Conn
	f    *firstBytes
	once sync.Once
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.once.Do(func() {
			c.f.mu.Lock()
			c.f.first = append(c.f.first, p[0])
			c.f.mu.Unlock()
		})
	}
	return n, err
}

// TestTLS_EveryStreamKindOverTLS runs raft messages, a snapshot, a fetch
// and a join between nodes whose certificates come from one CA, and
// checks that every connection node 2 accepted opened with a TLS record.
func TestTLS_EveryStreamKindOverTLS(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	var sniff firstBytes
	n1 := startNode(t, 1, both(withTLS(issueStore(t, ca, dir, "node-1", time.Time{})), withHandler(echo)))
	n2 := startNode(t, 2, both(withTLS(issueStore(t, ca, dir, "node-2", time.Time{})), withHandler(echo), sniff.listen,
		func(c *Config) {
			c.JoinHandler = func(context.Context, uint64, string, []byte) []byte { return []byte("welcome") }
		}))
	connect(n1, n2)
	exchange(t, n1, n2, 1)

	body := bytes.Repeat([]byte("snapshot body over TLS "), 100_000) // 2.3 MB: many records
	var got bytes.Buffer
	n2.recv.snap = func(_ uint64, _ raftgroup.Envelope, r io.Reader) error {
		_, err := io.Copy(&got, r)
		return err
	}
	res := newResult()
	n1.SendSnapshot(2, snapEnv(9), &trackedBody{Reader: bytes.NewReader(body)}, res.done)
	if err := res.wait(t); err != nil {
		t.Fatalf("snapshot over TLS: %v", err)
	}
	if !bytes.Equal(got.Bytes(), body) {
		t.Fatalf("snapshot body over TLS: got %d bytes, want %d", got.Len(), len(body))
	}
	if got := string(fetchOK(t, n1, 2, []byte("ping"))); got != "from 1: ping" {
		t.Fatalf("fetch over TLS answered %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	joiner := issueStore(t, ca, dir, "node-9", time.Time{})
	a, err := Join(ctx, JoinConfig{NodeID: 9, TLS: joiner.ClientConfig("")}, n2.Addr().String(), []byte("hi"))
	if err != nil || string(a.Response) != "welcome" {
		t.Fatalf("join over TLS: %+v, %v", a, err)
	}

	seen := sniff.seen()
	if len(seen) < 4 {
		t.Fatalf("node 2 accepted %d connections, want raft, snapshot, fetch and join", len(seen))
	}
	for i, b := range seen {
		if b != 0x16 {
			t.Errorf("accepted connection %d opened with byte %#x, not a TLS handshake record", i, b)
		}
	}
	if st := n2.Stats(); st.TLSRefusedInbound != 0 || st.RefusedInbound != 0 {
		t.Errorf("node 2 refused connections among its own cluster: %+v", st)
	}
}

// TestTLS_ForeignCertificateRefusedBeforeHello lets a node whose
// certificate comes from another CA, one with an expired certificate,
// one with none, and one without TLS dial a cluster node: each is
// refused at the TLS handshake (the hello's checks never run), counted,
// and gets no message through, while the cluster's own nodes go on.
func TestTLS_ForeignCertificateRefusedBeforeHello(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	other, otherDir := testCA(t, "other")
	foreign := issueStore(t, other, otherDir, "node-1", time.Time{})
	expired := issueStore(t, ca, dir, "expired", time.Now().Add(-time.Minute))
	good := issueStore(t, ca, dir, "node-1", time.Time{})
	noCert := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: good.Pool(), ServerName: "127.0.0.1"}
	cases := []struct {
		name   string
		edit   func(*Config)
		wantIn string // what the intruder's log says
	}{
		{"certificate from another CA", withTLS(foreign), "TLS handshake failed"},
		{"expired certificate", withTLS(expired), "TLS handshake failed"},
		{"no certificate", func(c *Config) { c.ServerTLS, c.ClientTLS = good.ServerConfig(tls.NoClientCert), noCert }, "TLS handshake failed"},
		{"no TLS at all", nil, "requires TLS on its peer port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n2 := startNode(t, 2, withTLS(issueStore(t, ca, dir, "node-2", time.Time{})))
			n3 := startNode(t, 3, withTLS(issueStore(t, ca, dir, "node-3", time.Time{})))
			connect(n2, n3)
			intruder := startNode(t, 1, tc.edit) // the lower id: it dials
			connect(intruder, n2)
			for i := range 20 {
				intruder.Send(2, []raftgroup.Envelope{heartbeat(uint64(i))})
			}
			eventually(t, "node 2 refuses and counts the intruder's TLS handshakes", func() bool {
				return n2.Stats().TLSRefusedInbound >= 2
			})
			eventually(t, "the intruder's log says why", func() bool {
				return logHas(intruder.logs, "cannot connect to peer", tc.wantIn)
			})
			if !logHas(n2.logs, "level=ERROR", "refusing peer connection") {
				t.Errorf("node 2 did not log the refusal:\n%s", n2.logs.String())
			}
			if st := n2.Stats(); st.RefusedInbound != 0 {
				t.Errorf("%d refusals reached the hello's checks, want all at the TLS handshake", st.RefusedInbound)
			}
			if got := len(n2.recv.from(1)); got != 0 {
				t.Errorf("node 2 received %d messages from the intruder", got)
			}
			if st := intruder.Stats(); st.TLSFailedOutbound == 0 && st.RefusedOutbound == 0 {
				t.Errorf("the intruder counted no failed dial: %+v", st)
			}
			exchange(t, n2, n3, 7) // the cluster goes on
		})
	}
}

// TestTLS_ClusterNodeRefusesForeignServer checks the other direction: a
// cluster node dialling a node whose server certificate comes from
// another CA refuses it and counts it.
func TestTLS_ClusterNodeRefusesForeignServer(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	other, otherDir := testCA(t, "other")
	n1 := startNode(t, 1, withTLS(issueStore(t, ca, dir, "node-1", time.Time{})))
	impostor := startNode(t, 2, withTLS(issueStore(t, other, otherDir, "node-2", time.Time{})))
	connect(n1, impostor)
	n1.Send(2, []raftgroup.Envelope{heartbeat(1)})
	eventually(t, "node 1 counts its failed TLS dials", func() bool { return n1.Stats().TLSFailedOutbound >= 2 })
	eventually(t, "node 1 says why", func() bool {
		return logHas(n1.logs, "level=ERROR", "cannot connect to peer", "TLS handshake failed", "certificate")
	})
	if got := impostor.recv.msgs.Load(); got != 0 {
		t.Errorf("the impostor received %d messages", got)
	}
}

// TestTLS_GarbageAndPlaintextOnTLSPort sends garbage, an HTTP request and
// a plaintext hello to a TLS peer port: each is refused and counted, the
// plaintext peer is told why in its own protocol, and the node serves on.
func TestTLS_GarbageAndPlaintextOnTLSPort(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	n1 := startNode(t, 1, withTLS(issueStore(t, ca, dir, "node-1", time.Time{})))
	n2 := startNode(t, 2, withTLS(issueStore(t, ca, dir, "node-2", time.Time{})))
	n2.AddPeer(3, "127.0.0.1:1")
	for i, b := range [][]byte{[]byte("\x16\x03\x01\x00\x05garbage"), []byte("GET / HTTP/1.1\r\n\r\n"), bytes.Repeat([]byte{0xff}, 4096)} {
		conn, err := net.Dial("tcp", n2.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		conn.Write(b)
		if _, err := conn.Read(make([]byte, 1<<10)); err == nil {
			// crypto/tls may answer with an alert; what matters is that it closes
			_, err = conn.Read(make([]byte, 1<<10))
			if err == nil {
				t.Errorf("garbage %d: connection left open", i)
			}
		}
		conn.Close()
	}
	hello := appendHello(nil, hello{version: protoVersion, stream: streamSnapshot, from: 3, to: 2, cluster: "test-cluster"})
	rp, _ := rawDial(t, n2, hello)
	err := judgeReply(rp, 2, "test-cluster", nil)
	if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), "requires TLS") {
		t.Errorf("plaintext peer told %v, want ErrTLS saying TLS is required", err)
	}
	eventually(t, "all four refusals counted", func() bool { return n2.Stats().TLSRefusedInbound == 4 })
	if st := n2.Stats(); st.RefusedInbound != 0 {
		t.Errorf("refusals reached the hello's checks: %+v", st)
	}
	connect(n1, n2)
	exchange(t, n1, n2, 3)
}

// TestTLS_PlaintextNodeExplainsTLSDialler: a TLS node dialling a node
// without peer TLS learns that the other side answered in the clear, and
// the plaintext node says it was offered TLS.
func TestTLS_PlaintextNodeExplainsTLSDialler(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	n1 := startNode(t, 1, withTLS(issueStore(t, ca, dir, "node-1", time.Time{})))
	n2 := startNode(t, 2, nil)
	connect(n1, n2)
	n1.Send(2, []raftgroup.Envelope{heartbeat(1)})
	eventually(t, "node 1 says node 2 answered in the clear", func() bool {
		return logHas(n1.logs, "cannot connect to peer", "answered in the clear")
	})
	eventually(t, "node 2 says it was offered TLS", func() bool {
		return logHas(n2.logs, "refusing peer connection", "opened a TLS handshake")
	})
	if n1.Stats().TLSFailedOutbound == 0 {
		t.Error("node 1 counted no failed TLS dial")
	}
}

// TestTLS_JoinNeedsTheClusterCA: a joiner with a certificate from the
// cluster's CA is answered; one from another CA, or without TLS, is
// refused with ErrTLS and the handler never runs.
func TestTLS_JoinNeedsTheClusterCA(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	other, otherDir := testCA(t, "other")
	var calls int
	var mu sync.Mutex
	n1 := startNode(t, 1, both(withTLS(issueStore(t, ca, dir, "node-1", time.Time{})), func(c *Config) {
		c.JoinHandler = func(context.Context, uint64, string, []byte) []byte {
			mu.Lock()
			calls++
			mu.Unlock()
			return []byte("welcome")
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name     string
		tls      *tls.Config
		wantCert bool // a certificate verdict, which retrying cannot change
	}{
		{"another CA", issueStore(t, other, otherDir, "node-9", time.Time{}).ClientConfig(""), true},
		{"no TLS", nil, false},
	} {
		_, err := Join(ctx, JoinConfig{NodeID: 9, TLS: tc.tls}, n1.Addr().String(), []byte("hi"))
		if !errors.Is(err, ErrTLS) || errors.Is(err, ErrCertificate) != tc.wantCert {
			t.Errorf("join with %s: %v, want ErrTLS (ErrCertificate %t)", tc.name, err, tc.wantCert)
		}
	}
	if _, err := Join(ctx, JoinConfig{NodeID: 9, TLS: issueStore(t, ca, dir, "node-9", time.Time{}).ClientConfig("")}, n1.Addr().String(), nil); err != nil {
		t.Fatalf("join with the cluster's CA: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("join handler ran %d times, want once (the refused joins never reach it)", calls)
	}
	if got := n1.Stats().TLSRefusedInbound; got != 2 {
		t.Errorf("TLSRefusedInbound = %d, want 2", got)
	}
}

// TestTLS_ReloadedCertificateLetsTheNodeIn: a node refused for its
// certificate gets in once its files hold one from the cluster's CA and
// its Store reloads, without a restart.
func TestTLS_ReloadedCertificateLetsTheNodeIn(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	other, _ := testCA(t, "other")
	n2 := startNode(t, 2, withTLS(issueStore(t, ca, dir, "node-2", time.Time{})))
	// The intruder's files live in their own directory, CA included.
	ownDir := t.TempDir()
	s := issueStore(t, other, ownDir, "node-1", time.Time{})
	n1 := startNode(t, 1, withTLS(s))
	connect(n1, n2)
	n1.Send(2, []raftgroup.Envelope{heartbeat(1)})
	eventually(t, "refused first", func() bool { return n2.Stats().TLSRefusedInbound > 0 })
	if _, err := ca.Issue(ownDir, "node-1", tlsfiles.Leaf{Subject: pkix.Name{CommonName: "node-1"}, Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	exchange(t, n1, n2, 5)
}

func TestConfig_TLSTogether(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	s := issueStore(t, ca, dir, "node-1", time.Time{})
	for _, tc := range []struct {
		server, client *tls.Config
		ok             bool
	}{
		{nil, nil, true},
		{s.ServerConfig(tls.RequireAndVerifyClientCert), s.ClientConfig(""), true},
		{s.ServerConfig(tls.RequireAndVerifyClientCert), nil, false},
		{nil, s.ClientConfig(""), false},
	} {
		cfg := testConfig(1, &logging.Buffer{})
		cfg.ServerTLS, cfg.ClientTLS = tc.server, tc.client
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("server %t client %t: Validate = %v", tc.server != nil, tc.client != nil, err)
		}
	}
}

// cnIsNode is a CheckPeerCertificate that wants node-N as the common
// name of node N's certificate.
func cnIsNode(node uint64, cert *x509.Certificate) error {
	if want := fmt.Sprintf("node-%d", node); cert.Subject.CommonName != want {
		return fmt.Errorf("common name %q, want %q", cert.Subject.CommonName, want)
	}
	return nil
}

// TestTLS_CheckPeerCertificateTiesCertificateToNodeID: with
// CheckPeerCertificate, a certificate of the cluster's CA issued for
// another name cannot stand for a node, in either direction, nor join.
func TestTLS_CheckPeerCertificateTiesCertificateToNodeID(t *testing.T) {
	ca, dir := testCA(t, "cluster")
	check := func(c *Config) { c.CheckPeerCertificate = cnIsNode }
	n2 := startNode(t, 2, both(withTLS(issueStore(t, ca, dir, "node-2", time.Time{})), check,
		func(c *Config) {
			c.JoinHandler = func(context.Context, uint64, string, []byte) []byte { return []byte("welcome") }
		}))
	n3 := startNode(t, 3, both(withTLS(issueStore(t, ca, dir, "node-3", time.Time{})), check))
	connect(n2, n3)
	exchange(t, n2, n3, 1)

	operator := issueStore(t, ca, dir, "operator", time.Time{})
	intruder := startNode(t, 1, both(withTLS(operator), check)) // the lower id: it dials
	connect(intruder, n2)
	intruder.Send(2, []raftgroup.Envelope{heartbeat(1)})
	eventually(t, "node 2 refuses the certificate named for no node", func() bool {
		return logHas(n2.logs, "level=ERROR", "refusing peer connection", `common name \"operator\", want \"node-1\"`)
	})
	eventually(t, "the intruder is told", func() bool {
		return logHas(intruder.logs, "cannot connect to peer", "certificate refused")
	})
	if n2.Stats().RefusedInbound == 0 {
		t.Error("node 2 counted no refusal")
	}

	// Node 3 dialling "node 4" at an address where node-2's certificate answers.
	n3.AddPeer(4, n2.Addr().String())
	n3.Send(4, []raftgroup.Envelope{heartbeat(2)})
	eventually(t, "node 3 refuses a certificate not named for the node it dialled", func() bool {
		return logHas(n3.logs, "cannot connect to peer", "peer=4", `want \"node-4\"`)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Join(ctx, JoinConfig{NodeID: 9, TLS: operator.ClientConfig("")}, n2.Addr().String(), nil)
	if !errors.Is(err, ErrCertificate) {
		t.Errorf("join as node 9 with the operator's certificate: %v, want ErrCertificate", err)
	}
	if _, err := Join(ctx, JoinConfig{NodeID: 9, TLS: issueStore(t, ca, dir, "node-9", time.Time{}).ClientConfig("")}, n2.Addr().String(), nil); err != nil {
		t.Errorf("join as node 9 with node-9's certificate: %v", err)
	}
	exchange(t, n2, n3, 2)
}
