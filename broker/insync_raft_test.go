package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// underReplicatedRaftGauge reads raftq_under_replicated_partitions{mode="raft"}
// from the node's registry, as a scrape would.
func underReplicatedRaftGauge(t *testing.T, n *Node) float64 {
	t.Helper()
	mfs, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "raftq_under_replicated_partitions" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "mode" && l.GetValue() == "raft" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatal(`no raftq_under_replicated_partitions{mode="raft"}`)
	return 0
}

func partitionISR(t *testing.T, cl *kgo.Client, node uint64, topic string) (isr, offline []int32) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = new(topic)
	req.Topics = append(req.Topics, rt)
	resp := requestFrom[*kmsg.MetadataResponse](t, cl, int32(node), req)
	p := resp.Topics[0].Partitions[0]
	return p.ISR, p.OfflineReplicas
}

// A raft follower that stops taking its leader's entries, while its node
// stays alive, leaves the ISR that the leader's node reports once it has
// lagged for ReplicaLagTimeMax (it is not offline), and the leader counts
// the partition under-replicated; other nodes, which cannot see raft
// progress, still list every live replica.
func TestNode_RaftISRLeavesLaggingFollower(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.ReplicaLagTimeMax = 300 * time.Millisecond
		cfg.LeaderBalanceInterval = 0
	})
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "lag", 1, 3)
	produceSync(t, cl, "lag", 0, "a")
	leader := leaderOfPartition(t, c, "lag", 0)
	eventually(t, "every replica in the leader's ISR", func() bool {
		isr, _ := partitionISR(t, cl, leader, "lag")
		return len(isr) == 3 && underReplicatedRaftGauge(t, c.nodes[leader]) == 0
	})
	var follower, other uint64
	for id := range c.nodes {
		switch {
		case id == leader:
		case follower == 0:
			follower = id
		default:
			other = id
		}
	}
	gid := c.nodes[follower].replicaFor("lag", 0).gid
	if err := c.nodes[follower].host.RemoveGroup(gid, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lagging follower out of the leader's ISR", func() bool {
		produceSync(t, cl, "lag", 0, "more")
		isr, offline := partitionISR(t, cl, leader, "lag")
		return len(isr) == 2 && !slices.Contains(isr, int32(follower)) && len(offline) == 0
	})
	if got := underReplicatedRaftGauge(t, c.nodes[leader]); got != 1 {
		t.Errorf("the leader's under-replicated raft partitions: %v, want 1", got)
	}
	if isr, _ := partitionISR(t, cl, other, "lag"); len(isr) != 3 {
		t.Errorf("node %d, not the leader, reports ISR %v; want every live replica", other, isr)
	}
	if got := underReplicatedRaftGauge(t, c.nodes[other]); got != 0 {
		t.Errorf("node %d leads nothing but counts %v under-replicated", other, got)
	}
}
