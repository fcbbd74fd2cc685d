package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

// electAt sends r to node id alone and returns its answer.
func (c *testCluster) electAt(t *testing.T, id uint64, r *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.cfgs[id].KafkaAddr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("ElectLeaders to node %d: %v", id, err)
	}
	return resp
}

// raftLeads reports whether node id's replica of topic-p leads its raft
// group.
func (c *testCluster) raftLeads(id uint64, topic string, p int32) bool {
	n := c.nodes[id]
	r := n.replicaFor(topic, p)
	return r != nil && r.lead.Leadership().IsLeader
}

// A preferred election of a raft partition asked of the node that
// neither leads it nor is its preferred replica reaches the leader
// through its admin API and returns once the preferred replica leads and
// the asked node's metadata says so; a second one needs none.
func TestElectLeaders_RaftThroughTheLeader(t *testing.T) {
	electThroughTheLeader(t, func(*Config) {})
}

// electThroughTheLeader is TestElectLeaders_RaftThroughTheLeader on
// nodes that mod configures.
func electThroughTheLeader(t *testing.T, mod func(*Config)) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LeaderBalanceInterval = 0
		mod(cfg)
	})
	cl := c.client()
	createTopic(t, cl, "r", 1, 3)
	p := c.isrPartition(1, "r", 0)
	pref := p.Replicas[0]
	eventually(t, "the preferred replica to lead", func() bool { return c.raftLeads(pref, "r", 0) })
	other, third := pref%3+1, (pref+1)%3+1
	if err := c.nodes[pref].replicaFor("r", 0).lead.TransferLeadership(testCtx(t), other); err != nil {
		t.Fatalf("transfer away from the preferred replica: %v", err)
	}
	eventually(t, "the third node to see the new leader", func() bool {
		return c.nodes[third].Metadata().Topics["r"].Partitions[0].Leader == other
	})
	resp := c.electAt(t, third, electRequest(2, electPreferred, map[string][]int32{"r": {0}}))
	wantElect(t, resp, "r", 0, nil, "")
	if !c.raftLeads(pref, "r", 0) {
		t.Errorf("node %d answered the election before the preferred replica %d led", third, pref)
	}
	if got := c.nodes[third].Metadata().Topics["r"].Partitions[0].Leader; got != pref {
		t.Errorf("node %d's metadata names %d the leader after the election, want %d", third, got, pref)
	}
	resp = c.electAt(t, other, electRequest(2, electPreferred, map[string][]int32{"r": {0}}))
	wantElect(t, resp, "r", 0, kerr.ElectionNotNeeded, "")
	produceSync(t, cl, "r", 0, "after")
}

// ISR partitions, through group 0: a preferred election while the
// preferred replica is dead cannot be made, once it is back in the ISR
// it is, and then needs none; an unclean election of a led partition
// needs none, of one with no live replica finds none, and of one whose
// ISR is empty (ELR on, its only member dead) elects the live replica
// outside it. Without a metadata leader the answer is NOT_CONTROLLER.
func TestElectLeaders_ISR(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LeaderBalanceInterval = 0
		cfg.EligibleLeaderReplicas = true
	})
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createISRTopic(t, cl, "i", 1, 3, 1)
	createAssignedISRTopic(t, cl, "u", []int32{2, 3})
	createAssignedISRTopic(t, cl, "solo", []int32{2})
	i := func(id uint64) coordinator.Partition { return c.isrPartition(id, "i", 0) }
	pref := i(1).Replicas[0]
	other := pref%3 + 1
	c.stop(pref)
	eventually(t, "another replica to lead i-0", func() bool { l := i(other).Leader; return l != 0 && l != pref })
	wantElect(t, c.electAt(t, other, electRequest(2, electPreferred, map[string][]int32{"i": {0}})), "i", 0, kerr.PreferredLeaderNotAvailable, "")
	c.start(pref)
	eventually(t, "the preferred replica back in the ISR", func() bool { return slices.Contains(i(other).ISR, pref) })
	wantElect(t, c.electAt(t, other, electRequest(2, electPreferred, map[string][]int32{"i": {0}})), "i", 0, nil, "")
	if got := i(other).Leader; got != pref {
		t.Errorf("i-0 led by %d after the election, want the preferred replica %d", got, pref)
	}
	resp := c.electAt(t, other, electRequest(2, electPreferred, map[string][]int32{"i": {0}}))
	wantElect(t, resp, "i", 0, kerr.ElectionNotNeeded, "")
	resp = c.electAt(t, other, electRequest(2, electUnclean, map[string][]int32{"i": {0}}))
	wantElect(t, resp, "i", 0, kerr.ElectionNotNeeded, "")

	// u on [2 3]: 3 leaves the ISR, then 2, its only member, stops while
	// 3 is down; 3 comes back to an empty ISR.
	c.stop(3)
	eventually(t, "u's ISR to be [2]", func() bool { return slices.Equal(c.isrPartition(1, "u", 0).ISR, []uint64{2}) })
	produceSync(t, cl, "u", 0, "only on 2")
	c.stop(2)
	c.start(3)
	eventually(t, "u leaderless with an empty ISR, node 3 registered", func() bool {
		st := c.nodes[1].Metadata()
		p := st.Topics["u"].Partitions[0]
		return p.Leader == 0 && len(p.ISR) == 0 && !st.Brokers[2].Alive && st.Brokers[3].Alive && c.nodes[3].ctl.Registered()
	})
	resp = c.electAt(t, 1, electRequest(2, electUnclean, map[string][]int32{"solo": {0}}))
	wantElect(t, resp, "solo", 0, kerr.EligibleLeadersNotAvailable, "")
	resp = c.electAt(t, 1, electRequest(2, electPreferred, map[string][]int32{"u": {0}}))
	wantElect(t, resp, "u", 0, kerr.PreferredLeaderNotAvailable, "")
	resp = c.electAt(t, 1, electRequest(2, electUnclean, map[string][]int32{"u": {0}}))
	wantElect(t, resp, "u", 0, nil, "")
	if p := c.isrPartition(1, "u", 0); p.Leader != 3 {
		t.Errorf("u-0 after the unclean election: %+v, want led by 3", p)
	}
	produceSync(t, cl, "u", 0, "on 3")

	c.stop(3) // node 1 is left alone: no metadata leader
	eventually(t, "node 1 to know no metadata leader", func() bool { return c.nodes[1].ctl.Leader() == 0 })
	resp = c.electAt(t, 1, electRequest(2, electUnclean, map[string][]int32{"u": {0}}))
	wantElect(t, resp, "u", 0, kerr.NotController, "")
}

// createAssignedISRTopic creates a one-partition ISR topic
// (min.insync.replicas 1) on the given replicas.
func createAssignedISRTopic(t *testing.T, cl *kgo.Client, name string, replicas []int32) {
	t.Helper()
	req := createTopicReq(name, -1, -1, false, map[string]string{"replication.mode": coordinator.ModeISR, "min.insync.replicas": "1"})
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	req.Topics[0].ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{a}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err == nil && resp.Topics[0].ErrorCode != 0 {
		err = fmt.Errorf("%v: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode), resp.Topics[0].ErrorMessage)
	}
	if err != nil {
		t.Fatalf("create %s on %v: %v", name, replicas, err)
	}
}
