package broker

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestListeners_SASLBesidePlaintext: each node serves a SASL_PLAINTEXT
// listener beside its plaintext one. A SCRAM user made through the
// plaintext listener produces and consumes through the SASL ones, whose
// Metadata names the SASL addresses; a wrong password and a client
// without SASL get nothing there.
func TestListeners_SASLBesidePlaintext(t *testing.T) {
	sasl := map[uint64]string{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		addr := freeAddr(t)
		sasl[cfg.NodeID] = addr
		cfg.Listeners = []Listener{{Name: "SASL", Addr: addr, Protocol: ProtocolSASLPlaintext}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Password: "alice-pw"}}); err != nil || res.Error() != nil {
		t.Fatalf("create alice: %v %v", err, res.Error())
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "secured"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every node knows alice", func() bool {
		for _, n := range c.nodes {
			if _, ok := n.meta.View().ScramUsers["alice"]; !ok {
				return false
			}
		}
		return true
	})
	seeds := []string{sasl[1], sasl[2], sasl[3]}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("secured"),
			kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	alice := client(kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()),
		kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("alice produces over SASL: %v", err)
	}
	fs := alice.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
		t.Fatalf("alice consumed %v (errors %v)", recs, fs.Errors())
	}
	meta, err := kadm.NewClient(alice).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range meta.Brokers {
		if got := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); got != sasl[uint64(b.NodeID)] {
			t.Errorf("metadata over SASL names broker %d at %s, want its SASL listener %s", b.NodeID, got, sasl[uint64(b.NodeID)])
		}
	}
	wrong := client(kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism()))
	if _, err := wrong.Request(ctx, kmsg.NewPtrMetadataRequest()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	anon := client()
	if _, err := anon.Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("a client without SASL got metadata from a SASL listener")
	}
}

func TestConfig_ValidateListeners(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"sasl listener", func(c *Config) {
			c.Listeners = []Listener{{Name: "SASL", Addr: "127.0.0.1:9093", Protocol: ProtocolSASLPlaintext}}
		}, true},
		{"SSL without a certificate", func(c *Config) {
			c.Listeners = []Listener{{Name: "SSL", Addr: "127.0.0.1:9093", Protocol: "SSL"}}
		}, false},
		{"the main listener's name", func(c *Config) {
			c.Listeners = []Listener{{Name: ProtocolPlaintext, Addr: "127.0.0.1:9093", Protocol: ProtocolPlaintext}}
		}, false},
		{"a wildcard without an advertised address", func(c *Config) {
			c.Listeners = []Listener{{Name: "SASL", Addr: "0.0.0.0:9093", Protocol: ProtocolSASLPlaintext}}
		}, false},
		{"a wildcard with one", func(c *Config) {
			c.Listeners = []Listener{{Name: "SASL", Addr: "0.0.0.0:9093", Advertised: "kafka.example:9093", Protocol: ProtocolSASLPlaintext}}
		}, true},
		{"an unknown mechanism", func(c *Config) { c.SASLMechanisms = []string{"GSSAPI"} }, false},
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
