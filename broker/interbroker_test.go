package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/internal/tlsfiles"
)

// Each inter-broker setting a node cannot use is refused at start with
// what is missing.
func TestConfig_InterBrokerListener(t *testing.T) {
	sasl := Listener{Name: "INTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolSASLPlaintext}
	ssl := Listener{Name: "TLS", Addr: "127.0.0.1:0", Protocol: ProtocolSSL}
	id := SASLIdentity{Mechanism: auth.ScramSHA512, User: "broker", Password: "pw"}
	for _, tc := range []struct {
		name      string
		listeners []Listener
		listener  string
		id        SASLIdentity
		ssl       tlsfiles.Files
		want      string // "" for valid
	}{
		{"main listener", nil, "", SASLIdentity{}, tlsfiles.Files{}, ""},
		{"main listener by name", nil, ProtocolPlaintext, SASLIdentity{}, tlsfiles.Files{}, ""},
		{"sasl", []Listener{sasl}, "INTERNAL", id, tlsfiles.Files{}, ""},
		{"unknown name", []Listener{sasl}, "OTHER", id, tlsfiles.Files{}, `"OTHER" is not one of the listeners`},
		{"sasl without mechanism", []Listener{sasl}, "INTERNAL", SASLIdentity{User: "broker", Password: "pw"}, tlsfiles.Files{}, "SASL mechanism"},
		{"sasl oauth", []Listener{sasl}, "INTERNAL", SASLIdentity{Mechanism: "OAUTHBEARER", User: "b", Password: "p"}, tlsfiles.Files{}, "SASL mechanism"},
		{"sasl without password", []Listener{sasl}, "INTERNAL", SASLIdentity{Mechanism: auth.Plain, User: "broker"}, tlsfiles.Files{}, "needs a SASL user and password"},
		{"identity on the main listener", nil, "", id, tlsfiles.Files{}, "needs a SASL inter-broker listener"},
		{"identity on ssl", []Listener{ssl}, "TLS", id, tlsfiles.Files{Cert: "c", Key: "k", CA: "ca"}, "a SASL identity does not apply"},
		{"ssl without ca", []Listener{ssl}, "TLS", SASLIdentity{}, tlsfiles.Files{Cert: "c", Key: "k"}, "needs the SSL CA bundle"},
		{"ssl", []Listener{ssl}, "TLS", SASLIdentity{}, tlsfiles.Files{Cert: "c", Key: "k", CA: "ca"}, ""},
	} {
		cfg := DefaultConfig()
		cfg.Listeners, cfg.InterBrokerListener, cfg.InterBrokerSASL, cfg.SSL = tc.listeners, tc.listener, tc.id, tc.ssl
		err := cfg.validateInterBroker()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestAuthorizer_InterBrokerOverSASL: with the inter-broker listener a
// SASL one and the nodes' user a super user, transactions across nodes
// commit without any ACL for User:ANONYMOUS: the markers and the
// verifications go authenticated, and nothing is refused on the way.
func TestAuthorizer_InterBrokerOverSASL(t *testing.T) {
	ac := newACLClusterWith(t, 3, func(cfg *Config) {
		cfg.InterBrokerListener = "SASL"
		cfg.InterBrokerSASL = SASLIdentity{Mechanism: auth.ScramSHA256, User: "broker", Password: "broker-pw"}
		cfg.SuperUsers = append(cfg.SuperUsers, "User:broker")
	}, "broker")
	commitAcrossNodes(t, func(opts ...kgo.Opt) *kgo.Client { return ac.saslClient("admin", opts...) })
	if a := auditLines(ac.logs.String()); a != "" {
		t.Errorf("refusals on the way:\n%s", a)
	}
}

// TestAuthorizer_InterBrokerOverMTLS: the same over an SSL listener that
// requires client certificates: each node presents its certificate,
// whose mapped subject (User:node) is a super user, and verifies the
// others' against the CA.
func TestAuthorizer_InterBrokerOverMTLS(t *testing.T) {
	issue := clientsCA(t)
	node := issue("node", "127.0.0.1")
	var seeds []string
	newTestCluster(t, 3, func(cfg *Config) {
		addr := freeAddr(t)
		seeds = append(seeds, addr)
		cfg.Listeners = []Listener{{Name: "MTLS", Addr: addr, Protocol: ProtocolSSL}}
		cfg.SSL, cfg.SSLClientAuth = node, SSLClientAuthRequired
		cfg.SSLPrincipalMappingRules = "RULE:^CN=([^,]+),OU=clients$/$1/"
		cfg.Authorizer, cfg.SuperUsers = true, []string{"User:admin", "User:node"}
		cfg.InterBrokerListener = "MTLS"
	})
	st, err := tlsfiles.Load(issue("admin"))
	if err != nil {
		t.Fatal(err)
	}
	commitAcrossNodes(t, func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(st.ClientConfig("")),
			kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	})
}

// commitAcrossNodes creates topic x, of three partitions led by more
// than one node, commits a transaction over all three as the client that
// client makes, and reads the three records back read_committed: the
// markers and verifications between nodes must have gone through.
func commitAcrossNodes(t *testing.T, client func(...kgo.Opt) *kgo.Client) {
	t.Helper()
	ctx := testCtx(t)
	admin := kadm.NewClient(client())
	if _, err := admin.CreateTopic(ctx, 3, 3, nil, "x"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "x's partitions led by more than one node", func() bool {
		md, err := admin.Metadata(ctx, "x")
		if err != nil {
			return false
		}
		leaders := map[int32]bool{}
		for _, p := range md.Topics["x"].Partitions {
			if p.Leader < 0 {
				return false
			}
			leaders[p.Leader] = true
		}
		return len(leaders) > 1
	})
	tx := client(kgo.TransactionalID("tx-x"), kgo.DefaultProduceTopic("x"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Second))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := tx.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("txn")}).FirstErr(); err != nil {
			t.Fatalf("transactional produce to x/%d: %v", p, err)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	rc := client(kgo.ConsumeTopics("x"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 3 && ctx.Err() == nil {
		got += len(rc.PollFetches(ctx).Records())
	}
	if got != 3 {
		t.Fatalf("read committed %d records, want 3", got)
	}
}
