package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// After a leadership transfer the old leader answers a produce with
// NOT_LEADER_OR_FOLLOWER naming the new leader, its epoch and its
// address, so that a client moves without a metadata refresh (KIP-951).
func TestNode_ProduceAfterTransferNamesNewLeader(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaderBalanceInterval = 0 })
	createTopic(t, c.client(), "lc", 1, 3)
	old := leaderOfPartition(t, c, "lc", 0)
	to := old%3 + 1
	if err := raftOf(c.nodes[old].replicaFor("lc", 0)).TransferLeadership(testCtx(t), to); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the transfer", func() bool { return raftOf(c.nodes[to].replicaFor("lc", 0)).Status().IsLeader() })
	term := raftOf(c.nodes[to].replicaFor("lc", 0)).Status().Term

	resp := rawRequest(t, c, old, produceRequest("lc", 0, -1, testBatch(t, -1, 0, 0, "x"))).(*kmsg.ProduceResponse)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to the old leader: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp.CurrentLeader.LeaderID != int32(to) || sp.CurrentLeader.LeaderEpoch != int32(term) {
		t.Errorf("leader hint %d at epoch %d, want %d at %d", sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch, to, term)
	}
	host, port := splitHostPort(c.cfgs[to].KafkaAddr)
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != int32(to) || resp.Brokers[0].Host != host || resp.Brokers[0].Port != port {
		t.Errorf("endpoints %+v, want node %d at %s:%d", resp.Brokers, to, host, port)
	}
}

// A produce that arrives while the leader is handing leadership over
// (raft refuses proposals then) is answered only once the transfer has
// ended, so that the answer can name the outcome. Here the transferee is
// down and the transfer times out: the answer names the same leader at
// the same epoch, which clients retry after a backoff, and nothing is
// written.
func TestNode_ProduceDuringTransferWaitsForIt(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LeaderBalanceInterval = 0
		cfg.ElectionTicks = 50 // a transfer window of a second
	})
	cl := c.client()
	createTopic(t, cl, "lt", 1, 3)
	leader := leaderOfPartition(t, c, "lt", 0)
	to := leader%3 + 1
	if _, err := cl.Broker(int(leader)).Request(testCtx(t), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err) // connected before the window opens
	}
	c.stop(to)
	g := raftOf(c.nodes[leader].replicaFor("lt", 0))
	term := g.Status().Term
	go func() { _ = g.TransferLeadership(context.Background(), to) }()
	eventually(t, "the transfer to start", func() bool { return g.Status().LeadTransferee == to })

	resp, err := cl.Broker(int(leader)).Request(testCtx(t), produceRequest("lt", 0, -1, testBatch(t, -1, 0, 0, "x")))
	if err != nil {
		t.Fatal(err)
	}
	if st := g.Status(); st.LeadTransferee != 0 {
		t.Errorf("answered while the transfer to %d was still under way", st.LeadTransferee)
	}
	sp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != int32(leader) || sp.CurrentLeader.LeaderEpoch != int32(term) {
		t.Errorf("produce during a failed transfer: %v, leader hint %d at %d; want NOT_LEADER_OR_FOLLOWER naming %d at %d",
			kerr.ErrorForCode(sp.ErrorCode), sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch, leader, term)
	}
	if hw := logOf(c.nodes[leader].replicaFor("lt", 0)).HighWatermark(); hw != 0 {
		t.Errorf("high watermark %d: the refused batch was written", hw)
	}
}
