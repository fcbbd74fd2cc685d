package main

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/raftq/raftq/chaos"
)

// saslCluster is a cluster of real processes whose nodes each serve a
// SASL_PLAINTEXT listener beside their plaintext one; it returns the
// SASL addresses.
func saslCluster(t *testing.T, n int) (*chaos.Cluster, []string) {
	t.Helper()
	addrs := map[int]string{}
	c := e2eClusterNodeArgs(t, n, nil, func(node chaos.Node) []string {
		if addrs[node.ID] == "" {
			addrs[node.ID] = freeAddrOn(t, node.Host.String())
		}
		return []string{"--listeners", "SASL_PLAINTEXT://" + addrs[node.ID]}
	})
	var out []string
	for id := 1; id <= n; id++ {
		out = append(out, addrs[id])
	}
	return c, out
}

func freeAddrOn(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestE2E_SASL: `raftq user create` makes a SCRAM user through the
// plaintext listener; over the SASL listener franz-go (SCRAM-SHA-256)
// and kcat (librdkafka, SCRAM-SHA-512) produce and consume as that user,
// and `raftq topic list` works with --sasl-* flags; a wrong password,
// an unknown user and a client without SASL are refused.
func TestE2E_SASL(t *testing.T) {
	c, sasl := saslCluster(t, 1)
	plain := strings.Join(seeds(c), ",")
	cli(t, 0, "alice-pw\n", "user", "create", "alice", "-b", plain)
	if out := cli(t, 0, "", "user", "list", "-b", plain).stdout; !hasRow(out, "alice", "SCRAM-SHA-512", "8192") || !hasRow(out, "alice", "SCRAM-SHA-256", "8192") {
		t.Fatalf("user list:\n%s", out)
	}
	createTopic(t, c, "secured", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sasl...), kgo.DefaultProduceTopic("secured"),
			kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	alice := client(kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()))
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("from-franz")}).FirstErr(); err != nil {
		t.Fatalf("franz-go over SASL: %v", err)
	}
	for _, tc := range []struct {
		name string
		cl   *kgo.Client
		want error
	}{
		{"wrong password", client(kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism())), kerr.SaslAuthenticationFailed},
		{"unknown user", client(kgo.SASL(scram.Auth{User: "mallory", Pass: "alice-pw"}.AsSha512Mechanism())), kerr.SaslAuthenticationFailed},
		{"no SASL", client(), nil},
	} {
		_, err := tc.cl.Request(ctx, kmsg.NewPtrMetadataRequest())
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	cli(t, 0, "", "topic", "list", "-b", sasl[0], "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--sasl-password", "alice-pw")

	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat; .ci/run installs it)")
	}
	auth := []string{"-b", strings.Join(sasl, ","), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-pw"}
	if out, err := runKcat(t, kcat, "from-kcat\n", append(auth, "-P", "-t", "secured", "-p", "0", "-X", "acks=all")...); err != nil {
		t.Fatalf("kcat produce over SASL: %v\n%s", err, out)
	}
	out, err := runKcat(t, kcat, "", append(auth, "-C", "-t", "secured", "-p", "0", "-o", "beginning", "-c", "2", "-e", "-q", "-f", "%s\n")...)
	if err != nil {
		t.Fatalf("kcat consume over SASL: %v\n%s", err, out)
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
