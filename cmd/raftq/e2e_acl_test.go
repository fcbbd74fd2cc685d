package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/raftq/raftq/chaos"
)

// aclE2ECluster is a one-node cluster with a SASL_PLAINTEXT listener
// (securedCluster); it returns the SASL address.
func aclE2ECluster(t *testing.T) (*chaos.Cluster, string) {
	t.Helper()
	var saslAddr string
	c := securedCluster(t, func(host string) []string {
		if saslAddr == "" {
			saslAddr = freeAddrOn(t, host)
		}
		return []string{"--listeners", "SASL_PLAINTEXT://" + saslAddr}
	})
	return c, saslAddr
}

// securedCluster is a one-node cluster serving the listeners listen
// gives (called at every start, with the node's host), where users admin
// and alice and topics a and b were made before the node restarted with
// --authorizer and super user User:admin: the way to bootstrap a secured
// cluster (the first user cannot be created through an authorizer that
// knows no one).
func securedCluster(t *testing.T, listen func(host string) []string) *chaos.Cluster {
	t.Helper()
	authz := false
	c := e2eClusterNodeArgs(t, 1, nil, func(node chaos.Node) []string {
		args := listen(node.Host.String())
		if authz {
			args = append(args, "--authorizer", "--super-users", "User:admin")
		}
		return args
	})
	plain := strings.Join(seeds(c), ",")
	for _, u := range []string{"admin", "alice"} {
		cli(t, 0, u+"-pw\n", "user", "create", u, "-b", plain)
	}
	createTopic(t, c, "a", 1, 1, nil)
	createTopic(t, c, "b", 1, 1, nil)
	authz = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitAllRegistered(t, c)
	return c
}

// TestE2E_ACLs: on real processes with the authorizer on, `raftq acl`
// lets alice produce to and consume topic a (group g); franz-go over
// SCRAM-SHA-256, sarama over PLAIN and kafkajs over SCRAM-SHA-256 each
// produce and consume a, and get TOPIC_AUTHORIZATION_FAILED for b; an anonymous client on the
// plaintext listener gets nothing; `raftq acl list` shows the ACLs and
// `raftq acl remove` takes alice's WRITE away.
func TestE2E_ACLs(t *testing.T) {
	c, sasl := aclE2ECluster(t)
	asAdmin := []string{"-b", sasl, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "admin", "--sasl-password", "admin-pw"}
	cli(t, 0, "", append([]string{"acl", "add", "--allow-principal", "User:alice", "--operation", "Read,Write", "--topic", "a", "--group", "g"}, asAdmin...)...)
	out := cli(t, 0, "", append([]string{"acl", "list"}, asAdmin...)...).stdout
	for _, row := range [][]string{
		{"TOPIC", "a", "LITERAL", "User:alice", "*", "READ", "ALLOW"},
		{"TOPIC", "a", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"},
		{"GROUP", "g", "LITERAL", "User:alice", "*", "READ", "ALLOW"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("acl list lacks %v:\n%s", row, out)
		}
	}
	aliceAsUser := []string{"-b", sasl, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "alice", "--sasl-password", "alice-pw"}
	if res := cli(t, 1, "", append([]string{"acl", "add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "b"}, aliceAsUser...)...); !strings.Contains(res.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Errorf("alice adds an acl: %s", res.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	franzACLs(t, ctx, sasl)
	saramaACLs(t, sasl)
	t.Run("kafkajs", func(t *testing.T) { kafkajsACLs(t, sasl) })

	anon, err := kgo.NewClient(kgo.SeedBrokers(seeds(c)...), kgo.DefaultProduceTopic("a"), kgo.RecordRetries(1), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if err := anon.ProduceSync(ctx, &kgo.Record{Value: []byte("anon")}).FirstErr(); !isAuthzErr(err) {
		t.Errorf("anonymous produce to a: %v, want an authorization error", err)
	}

	out = cli(t, 0, "", append([]string{"acl", "remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "a"}, asAdmin...)...).stdout
	if !strings.Contains(out, "removed ALLOW User:alice from *: WRITE on TOPIC a") {
		t.Errorf("acl remove:\n%s", out)
	}
	alice := franzClient(t, sasl, kgo.RecordRetries(1))
	// Without WRITE on any topic her idempotent producer is refused its
	// id (CLUSTER_AUTHORIZATION_FAILED) before it produces, as in Kafka.
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("late")}).FirstErr(); !isAuthzErr(err) {
		t.Errorf("alice produces to a after the removal: %v, want an authorization error", err)
	}
}

// isAuthzErr: the producer got one of Kafka's authorization errors
// (kgo's idempotent producer asks for CLUSTER IDEMPOTENT_WRITE first).
func isAuthzErr(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

func franzClient(t *testing.T, sasl string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sasl),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()),
		kgo.RetryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// franzACLs: franz-go as alice over SCRAM-SHA-256.
func franzACLs(t *testing.T, ctx context.Context, sasl string) {
	t.Helper()
	p := franzClient(t, sasl)
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("franz")}).FirstErr(); err != nil {
		t.Fatalf("franz-go produces to a: %v", err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("franz-go produces to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	cons := franzClient(t, sasl, kgo.ConsumeTopics("a"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if recs := fs.Records(); len(recs) < 1 || string(recs[0].Value) != "franz" {
		t.Fatalf("franz-go consumed %v (errors %v)", recs, fs.Errors())
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("franz-go commits in g: %v", err)
	}
	cons.Close() // leaves g, for kafkajs's member (another protocol)
	other := franzClient(t, sasl, kgo.ConsumeTopics("b"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs = other.PollFetches(ctx)
	var authzErr bool
	fs.EachError(func(_ string, _ int32, err error) {
		authzErr = authzErr || errors.Is(err, kerr.TopicAuthorizationFailed)
	})
	if !authzErr || len(fs.Records()) > 0 {
		t.Errorf("franz-go consumes b: %d records, errors %v; want TOPIC_AUTHORIZATION_FAILED", len(fs.Records()), fs.Errors())
	}
}

// saramaACLs: sarama as alice over SASL/PLAIN.
func saramaACLs(t *testing.T, sasl string) {
	t.Helper()
	cfg := saramaConfig(sarama.V2_8_0_0)
	cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-pw"
	cfg.Producer.Retry.Max = 1
	sp, err := sarama.NewSyncProducer([]string{sasl}, cfg)
	if err != nil {
		t.Fatalf("sarama producer over PLAIN: %v", err)
	}
	defer sp.Close()
	if _, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: "a", Value: sarama.StringEncoder("sarama")}); err != nil {
		t.Fatalf("sarama produces to a: %v", err)
	}
	if _, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: "b", Value: sarama.StringEncoder("no")}); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Errorf("sarama produces to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	cons, err := sarama.NewConsumer([]string{sasl}, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("a", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama consumes a: %v", err)
	}
	defer pc.AsyncClose()
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < 2 {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case cerr := <-pc.Errors():
			t.Fatalf("sarama consumer of a: %v", cerr.Err)
		case <-timeout:
			t.Fatalf("sarama read %v of a in 30s", got)
		}
	}
	if got[0] != "franz" || got[1] != "sarama" {
		t.Errorf("sarama read %v, want [franz sarama]", got)
	}
	if _, err := cons.ConsumePartition("b", 0, sarama.OffsetOldest); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Errorf("sarama consumes b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// kafkajsACLs: kafkajs as alice over SCRAM-SHA-256 produces to a and
// consumes it in group g, and is refused b, to produce and to consume.
func kafkajsACLs(t *testing.T, sasl string) {
	node, env := kafkajsEnv(t)
	env = append(env, "RAFTQ_KAFKAJS_SASL=scram-sha-256:alice:alice-pw")
	if out := runKafkajs(t, node, env, "produce", sasl, "a", "0", "kjs", "10"); out != "ack 0 2" {
		t.Fatalf("kafkajs produce to a: %q, want ack 0 2", out)
	}
	// From g's committed offset, 1 (franz-go read "franz").
	got := lines(runKafkajs(t, node, env, "consume", sasl, "g", "a", "3"))
	if len(got) < 3 || got[0] != "0 1 sarama" || got[1] != "0 2 kjs-0" {
		t.Errorf("kafkajs consumed %q, want 0 1 sarama, 0 2 kjs-0, ...", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := startKafkajs(ctx, t, node, env, "produce", sasl, "b", "0", "kjs", "1")
	for range p.lines {
	}
	if err := p.wait(); err == nil || !strings.Contains(p.stderr.String(), "Not authorized to access topics") {
		t.Errorf("kafkajs produce to b: %v, stderr:\n%s", err, p.stderr.String())
	}
	c := startKafkajs(ctx, t, node, env, "consume", sasl, "g", "b", "1")
	for l := range c.lines {
		t.Errorf("kafkajs consumed %q from b", l)
	}
	if err := c.wait(); err == nil || !strings.Contains(c.stderr.String(), "Not authorized to access topics") {
		t.Errorf("kafkajs consume of b: %v, stderr:\n%s", err, c.stderr.String())
	}
}
