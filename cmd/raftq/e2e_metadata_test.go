package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

// TestE2E_MetadataAcrossNodes runs four nodes (three metadata voters and
// a learner) and creates a topic through node 2 with four partitions of
// three replicas, so each partition has one node that hosts no replica of
// it. The topic must appear on every node, each node must host exactly
// the replicas placed on it, and after the leader of a partition is killed
// the Metadata answer of the node without a replica must converge to the
// new raft leader and its term (it knows them only from leadership hints).
func TestE2E_MetadataAcrossNodes(t *testing.T) {
	c := e2eCluster(t, 4)
	const topic, parts = "spread", 4
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	createThrough(t, nodeBroker(t, c, 2), topic, parts, 3)
	replicas := map[int32][]int32{}
	for _, id := range c.NodeIDs() {
		waitFor(t, 30*time.Second, fmt.Sprintf("node %d to know %s", id, topic), func(ctx context.Context) bool {
			mt, err := topicMetadata(ctx, nodeBroker(t, c, id), topic)
			if err != nil || mt.ErrorCode != 0 || len(mt.Partitions) != parts {
				return false
			}
			for _, mp := range mt.Partitions {
				if r, ok := replicas[mp.Partition]; ok && !slices.Equal(r, mp.Replicas) {
					t.Fatalf("node %d places %s-%d on %v, another node on %v", id, topic, mp.Partition, mp.Replicas, r)
				}
				replicas[mp.Partition] = mp.Replicas
			}
			return true
		})
	}
	checkPlacement(t, replicas, len(c.NodeIDs()))
	waitHostsMatch(t, c, topic, replicas)

	// A partition, its leader, and a node that hosts none of it.
	const p = 0
	leader := partitionLeader(t, c, topic, p)
	outsider := outsiderOf(replicas[p], c.NodeIDs())
	ob := nodeBroker(t, c, outsider)
	waitMetadataLeader(t, c, ob, topic, p, leader)

	t.Logf("kill -9 node %d, leader of %s-%d; node %d hosts no replica of it", leader, topic, p, outsider)
	if err := c.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	next := partitionLeader(t, c, topic, p)
	if next == leader {
		t.Fatalf("killed node %d still leads", leader)
	}
	waitMetadataLeader(t, c, ob, topic, p, next)

	// And a client that bootstraps from the outsider alone can produce.
	on, _ := c.Node(outsider)
	cl, err := kgo.NewClient(kgo.SeedBrokers(on.KafkaAddr()), kgo.Dialer(c.DialContext), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceValues(t, cl, topic, p, "after-the-kill")
	if got, _ := readPartition(t, c, topic, p); !slices.Equal(got, []string{"after-the-kill"}) {
		t.Errorf("%s-%d holds %v", topic, p, got)
	}
	checkNoCrashes(t, c)
}

func createThrough(t *testing.T, b *kgo.Broker, topic string, parts int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, rf
	req.Topics = append(req.Topics, rt)
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.(*kmsg.CreateTopicsResponse).Topics[0]; st.ErrorCode != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(st.ErrorCode))
	}
}

func topicMetadata(ctx context.Context, b *kgo.Broker, topic string) (kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := b.Request(ctx, req)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 {
		return kmsg.MetadataResponseTopic{}, fmt.Errorf("%d topics in the answer", len(mr.Topics))
	}
	return mr.Topics[0], nil
}

// checkPlacement wants every partition on distinct nodes and replicas
// spread evenly: no node holds more than one replica above another.
func checkPlacement(t *testing.T, replicas map[int32][]int32, nodes int) {
	t.Helper()
	count := make([]int, nodes+1)
	for p, rs := range replicas {
		if len(rs) != 3 || len(slices.Compact(slices.Sorted(slices.Values(rs)))) != 3 {
			t.Errorf("partition %d on %v: want 3 distinct nodes", p, rs)
		}
		for _, id := range rs {
			count[id]++
		}
	}
	lo, hi := slices.Min(count[1:]), slices.Max(count[1:])
	if hi-lo > 1 {
		t.Errorf("replicas per node %v: uneven", count[1:])
	}
}

// waitHostsMatch waits until each node's /v1/status lists exactly the
// partitions of topic placed on it.
func waitHostsMatch(t *testing.T, c *chaos.Cluster, topic string, replicas map[int32][]int32) {
	t.Helper()
	for p, rs := range replicas {
		want := make([]int, len(rs))
		for i, id := range rs {
			want[i] = int(id)
		}
		slices.Sort(want)
		waitFor(t, 30*time.Second, fmt.Sprintf("%s-%d hosted on exactly %v", topic, p, want), func(ctx context.Context) bool {
			return slices.Equal(hostsOf(ctx, c, topic, p), want)
		})
	}
}

func outsiderOf(replicas []int32, all []int) int {
	for _, id := range all {
		if !slices.Contains(replicas, int32(id)) {
			return id
		}
	}
	return 0
}

// waitMetadataLeader waits until node b's Metadata names leader for
// topic-p, with the leader epoch equal to that node's raft term.
func waitMetadataLeader(t *testing.T, c *chaos.Cluster, b *kgo.Broker, topic string, p int32, leader int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("metadata to name node %d leader of %s-%d", leader, topic, p), func(ctx context.Context) bool {
		got, epoch, err := metadataLeader(ctx, b, topic, p)
		if err != nil || got != int32(leader) {
			return false
		}
		s, err := nodeStatus(ctx, c, leader)
		if err != nil {
			return false
		}
		for _, ps := range s.Partitions {
			if ps.Topic == topic && ps.Partition == p {
				return ps.Role == "leader" && uint64(epoch) == ps.Term
			}
		}
		return false
	})
}
