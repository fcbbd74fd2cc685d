package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2E_ACLs_OverTLS: the authorizer on a node serving SASL_SSL and an
// SSL listener requiring client certificates. kcat (librdkafka) as alice
// over SASL_SSL with SCRAM-SHA-512, and franz-go with alice's client
// certificate (its subject mapped to the principal User:alice), each
// produce to and consume topic a, which an ACL allows, and get the
// authorization error on topic b, which none does.
func TestE2E_ACLs_OverTLS(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat; .ci/run installs it)")
	}
	p := newE2EPKI(t)
	var saslSSL, mtls string
	c := securedCluster(t, func(host string) []string {
		if saslSSL == "" {
			saslSSL, mtls = freeAddrOn(t, host), freeAddrOn(t, host)
		}
		return append([]string{"--listeners", "SASL_SSL://" + saslSSL + ",SSL://" + mtls,
			"--listener-ssl-client-auth", "SSL:required",
			"--ssl-principal-mapping-rules", "RULE:^CN=([^,]+),O=raftq$/$1/"}, p.serverArgs("none")...)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli(t, 0, "", "acl", "add", "--allow-principal", "User:alice", "--operation", "Read,Write", "--topic", "a",
		"-b", saslSSL, "--tls-ca-file", p.node.CA, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin", "--sasl-password", "admin-pw")

	auth := []string{"-b", saslSSL, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + p.node.CA,
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-pw"}
	if out, err := runKcat(t, kcat, "from-kcat\n", append(auth, "-P", "-t", "a", "-p", "0", "-X", "acks=all")...); err != nil {
		t.Fatalf("kcat produces to a over SASL_SSL: %v\n%s", err, out)
	}
	// kcat exits 1, saying nothing, when Metadata refuses it the topic;
	// the audit log says why.
	if out, err := runKcat(t, kcat, "no\n", append(auth, "-P", "-t", "b", "-p", "0", "-X", "acks=all")...); err == nil {
		t.Errorf("kcat produced to b:\n%s", out)
	}
	n1, _ := c.Node(1)
	waitFor(t, 30*time.Second, "kcat's refusal on b audited", func(context.Context) bool {
		b, err := os.ReadFile(n1.LogPath)
		return err == nil && strings.Contains(string(b), "component=audit principal=User:alice host=") &&
			strings.Contains(string(b), "resource_type=TOPIC resource=b")
	})

	alice := e2eKgo(t, []string{mtls}, "a", kgo.DialTLSConfig(p.clientTLS(t, p.alice)), kgo.RecordRetries(2))
	produceConsume(t, alice, "from-franz-mtls")
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("franz-go with alice's certificate produces to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	out, err := runKcat(t, kcat, "", append(auth, "-C", "-t", "a", "-p", "0", "-o", "beginning", "-c", "2", "-e", "-q", "-f", "%s\n")...)
	if err != nil {
		t.Fatalf("kcat consumes a over SASL_SSL: %v\n%s", err, out)
	}
	if got := lines(out); !slices.Equal(got, []string{"from-kcat", "from-franz-mtls"}) {
		t.Errorf("kcat read %v of a, want [from-kcat from-franz-mtls]", got)
	}
	if out, err := runKcat(t, kcat, "", append(auth, "-C", "-t", "b", "-p", "0", "-o", "beginning", "-c", "1", "-e", "-q")...); err == nil {
		t.Errorf("kcat consumed b:\n%s", out)
	}
}
