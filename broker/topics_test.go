package broker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// walLayouts runs a test on the shared node WAL (the default) and on a WAL
// per raft group.
func walLayouts(t *testing.T, f func(t *testing.T, mod func(*Config))) {
	t.Run("wal=shared", func(t *testing.T) { f(t, nil) })
	t.Run("wal=group", func(t *testing.T) { f(t, func(c *Config) { c.SharedWAL = false }) })
	t.Run("wal=shared/async-writes", func(t *testing.T) { f(t, func(c *Config) { c.AsyncStorageWrites = true }) })
}

func TestNode_TopicLifecycleThroughAnyNode(t *testing.T) { walLayouts(t, testTopicLifecycle) }

func testTopicLifecycle(t *testing.T, mod func(*Config)) {
	c := newTestCluster(t, 3, mod)
	cl := c.client()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	res, err := adm.CreateTopic(ctx, 4, 3, map[string]*string{"retention.ms": new("60000")}, "life")
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	eventually(t, "every node to host its replicas", func() bool {
		for _, n := range c.nodes {
			for p := int32(0); p < 4; p++ {
				if n.replicaFor("life", p) == nil {
					return false
				}
			}
		}
		return true
	})
	if res, _ := adm.CreateTopic(ctx, 1, 1, nil, "life"); !errorsIs(res.Err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", res.Err)
	}
	if res, _ := adm.CreateTopic(ctx, 1, 5, nil, "toobig"); !errorsIs(res.Err, kerr.InvalidReplicationFactor) {
		t.Errorf("RF 5 on 3 nodes: %v, want INVALID_REPLICATION_FACTOR", res.Err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("life", nil)
	found := false
	for _, cfg := range rc.Configs {
		if cfg.Key == "retention.ms" && cfg.MaybeValue() == "60000" {
			found = true
			// As Kafka: the topic's value, then the broker config
			// holding the default it overrides.
			if len(cfg.Synonyms) != 2 || cfg.Synonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
				cfg.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig || cfg.Synonyms[1].Key != "log.retention.hours" || *cfg.Synonyms[1].Value != "168" {
				t.Errorf("retention.ms synonyms %+v, want the topic's value then log.retention.hours=168", cfg.Synonyms)
			}
		}
		if cfg.Key == "segment.bytes" && len(cfg.Synonyms) != 1 {
			t.Errorf("segment.bytes, a default, has synonyms %+v, want the default alone", cfg.Synonyms)
		}
	}
	if !found {
		t.Errorf("retention.ms=60000 not described: %+v", rc.Configs)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "life", []string{"retention.ms"}
	req.Resources = append(req.Resources, rr)
	rr.ResourceName = "no-such-topic"
	req.Resources = append(req.Resources, rr)
	dresp := rawRequest(t, c, 1, req).(*kmsg.DescribeConfigsResponse)
	if got := dresp.Resources[0].Configs; len(got) != 1 || got[0].ConfigType != kmsg.ConfigTypeLong {
		t.Errorf("retention.ms described as %+v, want one entry of type LONG", got)
	}
	if miss := dresp.Resources[1]; miss.ErrorCode != kerr.UnknownTopicOrPartition.Code || miss.ErrorMessage == nil {
		t.Errorf("a missing topic: error %d, message %v; want UNKNOWN_TOPIC_OR_PARTITION with a message", miss.ErrorCode, miss.ErrorMessage)
	}
	if _, err := adm.CreatePartitions(ctx, 2, "life"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new partitions on every node", func() bool {
		for _, n := range c.nodes {
			if n.replicaFor("life", 5) == nil {
				return false
			}
		}
		return true
	})
	dir := c.nodes[1].logDir("life", 0)
	if _, err := adm.DeleteTopics(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every replica and its data to go", func() bool {
		for _, n := range c.nodes {
			if n.replicaFor("life", 0) != nil || len(n.replicaList()) != 0 {
				return false
			}
		}
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
}

func errorsIs(err, target error) bool {
	for err != nil {
		if err == target {
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func TestNode_LeaderFailoverAndCatchUp(t *testing.T) { walLayouts(t, testLeaderFailover) }

func testLeaderFailover(t *testing.T, mod func(*Config)) {
	c := newTestCluster(t, 3, mod)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "fo", 1, 3)
	produceSync(t, cl, "fo", 0, "a", "b", "c")
	old := leaderOfPartition(t, c, "fo", 0)
	c.stop(old)
	produceSync(t, cl, "fo", 0, "d", "e")
	c.start(old)
	produceSync(t, cl, "fo", 0, "f")
	recs := consumeAll(t, c, "fo", 0, 6)
	for i, want := range []string{"a", "b", "c", "d", "e", "f"} {
		if string(recs[i].Value) != want || recs[i].Offset != int64(i) {
			t.Fatalf("record %d: %q at %d, want %q", i, recs[i].Value, recs[i].Offset, want)
		}
	}
	eventually(t, "the restarted node to catch up", func() bool {
		r := c.nodes[old].replicaFor("fo", 0)
		return r != nil && logOf(r).HighWatermark() == 6
	})
	want := segmentBytes(t, c.nodes[leaderOfPartition(t, c, "fo", 0)].logDir("fo", 0))
	for id, n := range c.nodes {
		if got := segmentBytes(t, n.logDir("fo", 0)); !bytes.Equal(got, want) {
			t.Errorf("node %d's segments differ from the leader's (%d vs %d bytes)", id, len(got), len(want))
		}
	}
}

// segmentBytes concatenates a partition's .log files in order.
func segmentBytes(t testing.TB, dir string) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func TestNode_RefusesDataDirOfAnotherNode(t *testing.T) {
	dir := t.TempDir()
	first, err := claimDataDir(dir, "a", 1)
	if err != nil || first == "" {
		t.Fatalf("claim: incarnation %q, %v", first, err)
	}
	if again, err := claimDataDir(dir, "a", 1); err != nil || again != first {
		t.Errorf("same identity: incarnation %q (want %q), %v", again, first, err)
	}
	if _, err := claimDataDir(dir, "b", 1); err == nil {
		t.Error("a data dir of cluster a was accepted for cluster b")
	}
	if _, err := claimDataDir(dir, "a", 2); err == nil {
		t.Error("node 1's data dir was accepted for node 2")
	}
	if other, _ := claimDataDir(t.TempDir(), "a", 1); other == first {
		t.Error("a new data dir got the old one's incarnation")
	}
}

func TestNode_LeadershipReturnsToPreferredReplica(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaderBalanceInterval = 200 * time.Millisecond })
	cl := c.client()
	createTopic(t, cl, "pref", 1, 3)
	ref, _ := c.nodes[1].partitionRef("pref", 0)
	preferred := ref.Partition.Replicas[0]
	eventually(t, "the preferred replica to lead", func() bool { return leaderOfPartition(t, c, "pref", 0) == preferred })
	c.stop(preferred)
	eventually(t, "another leader", func() bool {
		for id, n := range c.nodes {
			if r := n.replicaFor("pref", 0); r != nil && raftOf(r).Status().IsLeader() && id != preferred {
				return true
			}
		}
		return false
	})
	c.start(preferred)
	eventually(t, "leadership back on the preferred replica", func() bool {
		r := c.nodes[preferred].replicaFor("pref", 0)
		return r != nil && raftOf(r).Status().IsLeader()
	})
}

// A new topic's partitions start led by their preferred replicas, so that
// no leader balance has to move them (and their producers) seconds later.
func TestNode_NewTopicStartsOnPreferredLeaders(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaderBalanceInterval = 0 })
	createTopic(t, c.client(), "fresh", 12, 3)
	for p := int32(0); p < 12; p++ {
		ref, _ := c.nodes[1].partitionRef("fresh", p)
		want := ref.Partition.Replicas[0]
		if got := leaderOfPartition(t, c, "fresh", p); got != want {
			t.Errorf("partition %d: first leader %d, preferred %d", p, got, want)
		}
	}
}
