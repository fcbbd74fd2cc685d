package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/raftgroup"
)

// underReplicatedRaftGauge reads raftq_under_replicated_partitions{mode="raft"}.
func underReplicatedRaftGauge(t *testing.T, n *Node) float64 {
	t.Helper()
	return underReplicatedGauge(t, n, "raft")
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

// laggingFake is a fake replication whose raft progress the test sets.
type laggingFake struct {
	*fakeReplication
	ids   map[uint64]bool
	leads bool
}

func (f laggingFake) lagging(time.Time, time.Duration) (map[uint64]bool, bool) { return f.ids, f.leads }

// Metadata drops lagging replicas from the ISR without calling them
// offline; the gauge counts a partition led here with a lagging or dead
// replica, and none that another node leads.
func TestNode_UnderReplicatedRaftRule(t *testing.T) {
	reps := []*fakeReplication{newFakeReplication(t, 1), newFakeReplication(t, 1), newFakeReplication(t, 1)}
	n := newUnitNode(t, "u", nil, reps...)
	st := n.meta.View()
	tp := st.Topics["u"]
	set := func(i int, ids map[uint64]bool, leads bool) {
		n.replicas[tp.Partitions[i].Group].lead = laggingFake{reps[i], ids, leads}
	}
	set(0, map[uint64]bool{3: true}, true)
	set(1, nil, true)
	set(2, map[uint64]bool{2: true}, false) // led elsewhere: not counted
	if got := n.underReplicatedRaft(); got != 1 {
		t.Errorf("under-replicated: %d, want 1 (partition 0)", got)
	}
	mp := n.partitionMetadata(st, &tp.Partitions[0])
	if !slices.Equal(mp.ISR, []int32{1, 2}) || len(mp.OfflineReplicas) != 0 {
		t.Errorf("partition 0: ISR %v offline %v, want [1 2] and none", mp.ISR, mp.OfflineReplicas)
	}
	data, err := (&coordinator.Command{SetAlive: &coordinator.SetAlive{ID: 2, Alive: false}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.meta.Apply(raftgroup.Entry{Index: n.meta.View().Index + 1, Data: data}); err != nil {
		t.Fatal(err)
	}
	if got := n.underReplicatedRaft(); got != 2 {
		t.Errorf("under-replicated with broker 2 dead: %d, want 2 (partitions 0 and 1)", got)
	}
}
