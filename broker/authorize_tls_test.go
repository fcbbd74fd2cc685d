package broker

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/internal/tlsfiles"
)

// TestAuthorizer_CertificatePrincipal: on an SSL listener requiring
// client certificates, the principal the ACLs see is the certificate's
// subject as the mapping rules name it: admin's certificate makes a super
// user, who creates topics and an ACL for alice; alice's certificate
// then writes topic a and is refused topic b with
// TOPIC_AUTHORIZATION_FAILED; a certificate for a name no ACL covers is
// refused a too.
func TestAuthorizer_CertificatePrincipal(t *testing.T) {
	issue := clientsCA(t)
	node := issue("node", "127.0.0.1")
	mtls := map[uint64]string{}
	newTestCluster(t, 3, func(cfg *Config) {
		mtls[cfg.NodeID] = freeAddr(t)
		cfg.Listeners = []Listener{{Name: "MTLS", Addr: mtls[cfg.NodeID], Protocol: ProtocolSSL}}
		cfg.SSL, cfg.SSLClientAuth = node, SSLClientAuthRequired
		cfg.SSLPrincipalMappingRules = "RULE:^CN=([^,]+),OU=clients$/$1/"
		cfg.Authorizer, cfg.SuperUsers = true, []string{"User:admin"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(cn string) *kgo.Client {
		st, err := tlsfiles.Load(issue(cn))
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(mtls[1], mtls[2], mtls[3]), kgo.DialTLSConfig(st.ClientConfig("")),
			kgo.RetryTimeout(5*time.Second), kgo.RequestRetries(2), kgo.RecordRetries(2))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(client("admin"))
	for _, topic := range []string{"a", "b"} {
		if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
			t.Fatalf("the super user's certificate creates topic %s: %v", topic, err)
		}
	}
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("a").Operations(kadm.OpWrite, kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	alice := client("alice")
	eventually(t, "alice's certificate to write topic a", func() bool {
		return alice.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("x")}).FirstErr() == nil
	})
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's certificate on topic b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := client("mallory").ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("a certificate no ACL names, on topic a: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// clientsCA makes a throwaway CA and returns what issues its
// certificates under the test's temp dir, for subject CN=cn,OU=clients
// (and the hosts given).
func clientsCA(t *testing.T) func(cn string, hosts ...string) tlsfiles.Files {
	dir := t.TempDir()
	ca, err := tlsfiles.NewCA("test ca")
	if err != nil {
		t.Fatal(err)
	}
	return func(cn string, hosts ...string) tlsfiles.Files {
		t.Helper()
		f, err := ca.Issue(dir, cn, tlsfiles.Leaf{Subject: pkix.Name{CommonName: cn, OrganizationalUnit: []string{"clients"}}, Hosts: hosts})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}
