package broker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/raftq/raftq/auth"
	"github.com/raftq/raftq/coordinator"
)

// syncBuffer is a log sink the nodes' goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// aclCluster is a cluster with the authorizer on, super user
// User:admin, a SASL_PLAINTEXT listener per node, and SCRAM users admin
// and alice (written straight to the metadata: with the authorizer on,
// no one may create the first user through Kafka).
type aclCluster struct {
	*testCluster
	sasl map[uint64]string
	logs *syncBuffer
}

func newACLCluster(t *testing.T, nodes int) *aclCluster {
	return newACLClusterWith(t, nodes, nil)
}

// newACLClusterWith is newACLCluster with more users and each node's
// config changed by more (nil for none).
func newACLClusterWith(t *testing.T, nodes int, more func(*Config), users ...string) *aclCluster {
	ac := &aclCluster{sasl: map[uint64]string{}, logs: &syncBuffer{}}
	ac.testCluster = newTestCluster(t, nodes, func(cfg *Config) {
		addr := freeAddr(t)
		ac.sasl[cfg.NodeID] = addr
		cfg.Listeners = []Listener{{Name: "SASL", Addr: addr, Protocol: ProtocolSASLPlaintext}}
		cfg.Authorizer, cfg.SuperUsers = true, []string{"User:admin"}
		cfg.AutoCreateTopics = true
		cfg.Logger = slog.New(slog.NewTextHandler(ac.logs, nil))
		if more != nil {
			more(cfg)
		}
	})
	for _, user := range append([]string{"admin", "alice"}, users...) {
		cred, err := auth.NewCredential(auth.ScramSHA256, user+"-pw", auth.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		ac.propose(&coordinator.Command{AlterScramCredentials: &coordinator.AlterScramCredentials{User: user, Upserts: []auth.Credential{cred}}})
	}
	eventually(t, "every node knows alice", func() bool {
		for _, n := range ac.nodes {
			if _, ok := n.meta.View().ScramUsers["alice"]; !ok {
				return false
			}
		}
		return true
	})
	return ac
}

func (ac *aclCluster) propose(cmd *coordinator.Command) {
	ac.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		for _, n := range ac.nodes {
			res, err := n.ctl.Propose(ctx, cmd)
			if err == nil && res.Err == nil {
				return
			}
			if ctx.Err() != nil {
				ac.t.Fatalf("propose %+v: %v %v", cmd, err, res.Err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// saslClient is a client of user over the SASL listeners.
func (ac *aclCluster) saslClient(user string, opts ...kgo.Opt) *kgo.Client {
	ac.t.Helper()
	var seeds []string
	for _, a := range ac.sasl {
		seeds = append(seeds, a)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha256Mechanism()),
		kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		ac.t.Fatal(err)
	}
	ac.t.Cleanup(cl.Close)
	return cl
}

// aliceACLs: alice may produce to and consume topic a, in group g, and
// run transaction tx-a; the nodes' anonymous inter-broker connections
// from loopback may do CLUSTER_ACTION (the raftq answer for a PLAINTEXT
// inter-broker listener, as Kafka's: an ACL, README "ACLs").
func aliceACLs() *kadm.ACLBuilder {
	return kadm.NewACLs().Allow("User:alice").Topics("a").Groups("g").TransactionalIDs("tx-a").
		Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
}

func interBrokerACL() *kadm.ACLBuilder {
	return kadm.NewACLs().Allow(auth.AnonymousPrincipal).AllowHosts("127.0.0.1").Clusters().
		Operations(kadm.OpClusterAction)
}

// TestAuthorizer_AliceMayUseTopicA: alice produces to and consumes
// topic a, commits offsets in group g and runs a transaction; topic b,
// group h and transactional id tx-b answer Kafka's authorization
// errors; Metadata hides b from a list of all topics and refuses it by
// name; she may not manage ACLs; each refusal is audited in the log and
// counted; an ACL deleted takes her access away.
func TestAuthorizer_AliceMayUseTopicA(t *testing.T) {
	ac := newACLCluster(t, 3)
	ctx := testCtx(t)
	adminCl := ac.saslClient("admin")
	admin := kadm.NewClient(adminCl)
	for _, b := range []*kadm.ACLBuilder{aliceACLs(), interBrokerACL()} {
		res, err := admin.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create acl %+v: %v", r, r.Err)
			}
		}
	}
	if _, err := admin.CreateTopics(ctx, 1, 3, nil, "a", "b"); err != nil {
		t.Fatalf("%v\n%s", err, lastLines(ac.logs.String(), 40))
	}
	eventually(t, "every node holds the acls", func() bool {
		for _, n := range ac.nodes {
			if len(n.meta.View().ACLs) != 7 {
				return false
			}
		}
		return true
	})

	alice := ac.saslClient("alice", kgo.DefaultProduceTopic("a"))
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatalf("alice produces to a: %v", err)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	aliceAdm := kadm.NewClient(alice)
	offs, err := aliceAdm.ListEndOffsets(ctx, "a")
	if o, _ := offs.Lookup("a", 0); err != nil || o.Err != nil || o.Offset != 1 {
		t.Errorf("end offset of a: %+v %v", o, err)
	}
	offs, err = aliceAdm.ListEndOffsets(ctx, "b")
	if o, ok := offs.Lookup("b", 0); ok && err == nil {
		err = o.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("end offset of b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	checkMetadataHidesB(t, ctx, alice)

	consumer := ac.saslClient("alice", kgo.ConsumeTopics("a"), kgo.ConsumerGroup("g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	fs := consumer.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "one" {
		t.Fatalf("alice consumed %v (errors %v)", recs, fs.Errors())
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits in g: %v", err)
	}
	checkFetchB(t, ctx, ac, alice)
	cres, err := aliceAdm.CommitOffsets(ctx, "h", kadm.OffsetsFromRecords(kgo.Record{Topic: "a", Partition: 0, Offset: 0}))
	if err == nil {
		err = cres.Error()
	}
	if !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("alice commits in h: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	checkListGroupsHides(t, ctx, admin, aliceAdm)
	checkAuthorizedOps(t, ctx, alice, aliceAdm)
	checkAliceTransactions(t, ctx, ac)

	if res, _ := aliceAdm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("b").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)); len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice creates an acl: %+v, want CLUSTER_AUTHORIZATION_FAILED", res)
	}
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp, err := alice.Request(ctx, dreq); err != nil || resp.(*kmsg.DescribeACLsResponse).ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("alice describes acls: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, resp)
	}
	if resp, err := adminCl.Request(ctx, dreq); err != nil || len(resp.(*kmsg.DescribeACLsResponse).Resources) != 4 {
		t.Errorf("admin describes acls: %v %+v, want 4 resources", err, resp)
	}
	var denied float64
	for _, n := range ac.nodes {
		denied += counterValue(t, n.metrics.denied.WithLabelValues("Metadata", "TOPIC"))
	}
	if denied < 1 {
		t.Errorf("raftq_authorization_denied_total{api=Metadata,resource_type=TOPIC} = %v", denied)
	}
	logs := ac.logs.String()
	if !strings.Contains(logs, `component=audit principal=User:alice host=127.0.0.1 api=Metadata resource_type=TOPIC resource=b operation=DESCRIBE`) {
		t.Errorf("no audit line for alice's metadata of b in:\n%s", auditLines(logs))
	}

	del, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("a").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 1 {
		t.Fatalf("delete alice's READ on a: %v %+v", err, del)
	}
	fetchA := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "a", ac.nodes[1].meta.View().Topics["a"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetchA.Topics = append(fetchA.Topics, ft)
	fetchA.MaxWaitMillis = 10
	eventually(t, "a fetch of a refused", func() bool {
		for _, n := range ac.nodes {
			if len(n.meta.View().ACLs) != 6 {
				return false
			}
		}
		resp, err := alice.Request(ctx, fetchA)
		if err != nil {
			return false
		}
		r := resp.(*kmsg.FetchResponse)
		return len(r.Topics) == 1 && r.Topics[0].Partitions[0].ErrorCode == kerr.TopicAuthorizationFailed.Code
	})
	checkCreateWithoutDescribeConfigs(t, ctx, ac, admin, alice)
}

func auditLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "component=audit") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func checkMetadataHidesB(t *testing.T, ctx context.Context, alice *kgo.Client) {
	t.Helper()
	all := kmsg.NewPtrMetadataRequest()
	resp, err := alice.Request(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
		names = append(names, *mt.Topic)
	}
	if len(names) != 1 || names[0] != "a" {
		t.Errorf("alice's metadata of all topics lists %v, want [a]", names)
	}
	named := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"a", "b", "nope"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		named.Topics = append(named.Topics, rt)
	}
	named.AllowAutoTopicCreation = true
	resp, err = alice.Request(ctx, named)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"a": 0, "b": kerr.TopicAuthorizationFailed.Code, "nope": kerr.TopicAuthorizationFailed.Code}
	for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
		if got := mt.ErrorCode; got != want[*mt.Topic] {
			t.Errorf("metadata of %s: %v, want %v", *mt.Topic, kerr.ErrorForCode(got), kerr.ErrorForCode(want[*mt.Topic]))
		}
		if *mt.Topic == "b" && len(mt.Partitions) > 0 {
			t.Error("metadata of b shows its partitions")
		}
	}
}

// checkFetchB: a fetch of a and b answers a and refuses b.
func checkFetchB(t *testing.T, ctx context.Context, ac *aclCluster, alice *kgo.Client) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 10
	names := map[[16]byte]string{}
	for _, name := range []string{"a", "b"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = name, ac.nodes[1].meta.View().Topics[name].ID
		names[ft.TopicID] = name
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
	}
	var r *kmsg.FetchResponse
	eventually(t, "a fetch from the leader", func() bool {
		resp, err := alice.Request(ctx, req)
		if err != nil {
			return false
		}
		r = resp.(*kmsg.FetchResponse)
		return len(r.Topics) == 2 && r.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code
	})
	for _, ft := range r.Topics {
		name, want := names[ft.TopicID], int16(0)
		if ft.Topic != "" {
			name = ft.Topic
		}
		if name == "b" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if got := ft.Partitions[0].ErrorCode; got != want {
			t.Errorf("fetch of %s: %v, want %v", name, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
}

// checkAliceTransactions: alice commits a transaction as tx-a, whose
// markers the nodes write to each other under the inter-broker ACL; tx-b
// is refused.
func checkAliceTransactions(t *testing.T, ctx context.Context, ac *aclCluster) {
	t.Helper()
	tx := ac.saslClient("alice", kgo.TransactionalID("tx-a"), kgo.DefaultProduceTopic("a"), kgo.TransactionTimeout(10*time.Second))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("txn")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v\n%s", err, auditLines(ac.logs.String()))
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	rc := ac.saslClient("alice", kgo.ConsumeTopics("a"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		for _, r := range rc.PollFetches(ctx).Records() {
			got = append(got, string(r.Value))
		}
	}
	if len(got) != 2 || got[1] != "txn" {
		t.Fatalf("read committed %v, want [one txn]", got)
	}
	txb := ac.saslClient("alice", kgo.TransactionalID("tx-b"), kgo.DefaultProduceTopic("a"))
	err := txb.BeginTransaction() // fails once the client's InitProducerId has
	if err == nil {
		err = txb.ProduceSync(ctx, &kgo.Record{Value: []byte("no")}).FirstErr()
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("a transaction as tx-b: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
}

// TestAuthorizer_InterBrokerClusterAction: the nodes' WriteTxnMarkers
// come anonymous over the PLAINTEXT listener; without CLUSTER_ACTION for
// User:ANONYMOUS from their host they are refused, with it they are
// served. The ACL APIs answer SECURITY_DISABLED when the authorizer is
// off.
func TestAuthorizer_InterBrokerClusterAction(t *testing.T) {
	ac := newACLCluster(t, 1)
	addr := ac.cfgs[1].KafkaAddr
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "t", []int32{0}
	m.ProducerID, m.Committed, m.Topics = 1, true, []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
	req.Markers = append(req.Markers, m)
	code := func() int16 {
		resp := rawKafka(t, addr, req).(*kmsg.WriteTxnMarkersResponse)
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	if got := code(); got != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("anonymous markers without the acl: %v", kerr.ErrorForCode(got))
	}
	res, err := kadm.NewClient(ac.saslClient("admin")).CreateACLs(testCtx(t), interBrokerACL())
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("create the inter-broker acl: %v %+v", err, res)
	}
	eventually(t, "markers past the authorizer", func() bool { return code() != kerr.ClusterAuthorizationFailed.Code })

	off := newTestCluster(t, 1, nil)
	d := kmsg.NewPtrDescribeACLsRequest()
	if got := rawKafka(t, off.cfgs[1].KafkaAddr, d).(*kmsg.DescribeACLsResponse).ErrorCode; got != kerr.SecurityDisabled.Code {
		t.Errorf("describe acls without authorizer: %v", kerr.ErrorForCode(got))
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	ops := kadm.DecodeACLOperations(rawKafka(t, off.cfgs[1].KafkaAddr, dc).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations)
	if len(ops) != len(supportedOps[kmsg.ACLResourceTypeCluster]) {
		t.Errorf("cluster operations without authorizer: %v, want all supported", ops)
	}
}

// checkListGroupsHides: alice lists g, not the group admin made, which
// admin (a super user) sees too.
func checkListGroupsHides(t *testing.T, ctx context.Context, admin, alice *kadm.Client) {
	t.Helper()
	res, err := admin.CommitOffsets(ctx, "secret", kadm.OffsetsFromRecords(kgo.Record{Topic: "b", Partition: 0, Offset: 0}))
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("admin commits in secret: %v", err)
	}
	groups := func(adm *kadm.Client) []string {
		ls, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("list groups: %v", err)
		}
		return ls.Groups()
	}
	eventually(t, "admin lists g and secret", func() bool { return len(groups(admin)) == 2 })
	if got := groups(alice); len(got) != 1 || got[0] != "g" {
		t.Errorf("alice lists groups %v, want [g]", got)
	}
}

// checkAuthorizedOps: KIP-430's fields answer what alice may do: READ
// and DESCRIBE on group g, READ, WRITE and DESCRIBE on topic a.
func checkAuthorizedOps(t *testing.T, ctx context.Context, alice *kgo.Client, aliceAdm *kadm.Client) {
	t.Helper()
	dg, err := aliceAdm.DescribeGroups(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := dg["g"].AuthorizedOperations; !slices.Equal(got, []kadm.ACLOperation{kadm.OpRead, kadm.OpDescribe}) {
		t.Errorf("alice's operations on g: %v", got)
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("a")
	req.Topics, req.IncludeTopicAuthorizedOperations = []kmsg.MetadataRequestTopic{rt}, true
	resp, err := alice.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := kadm.DecodeACLOperations(resp.(*kmsg.MetadataResponse).Topics[0].AuthorizedOperations)
	if want := []kadm.ACLOperation{kadm.OpRead, kadm.OpWrite, kadm.OpDescribe}; !slices.Equal(got, want) {
		t.Errorf("alice's operations on a: %v, want %v", got, want)
	}
}

// checkCreateWithoutDescribeConfigs: with CREATE on topic c alone, alice
// creates it but is not shown its configs.
func checkCreateWithoutDescribeConfigs(t *testing.T, ctx context.Context, ac *aclCluster, admin *kadm.Client, alice *kgo.Client) {
	t.Helper()
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("c").Operations(kadm.OpCreate).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("allow alice to create c: %v %+v", err, res)
	}
	eventually(t, "every node lets alice create c", func() bool {
		for _, n := range ac.nodes {
			if len(n.meta.View().ACLs) != 7 {
				return false
			}
		}
		return true
	})
	resp, err := alice.Request(ctx, createTopicReq("c", 1, 3, false, nil))
	if err != nil {
		t.Fatal(err)
	}
	ct := resp.(*kmsg.CreateTopicsResponse).Topics[0]
	if ct.ErrorCode != 0 || ct.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(ct.Configs) > 0 {
		t.Errorf("alice creates c: %v, config error %v, %d configs; want created, TOPIC_AUTHORIZATION_FAILED for its configs",
			kerr.ErrorForCode(ct.ErrorCode), kerr.ErrorForCode(ct.ConfigErrorCode), len(ct.Configs))
	}
}
