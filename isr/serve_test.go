package isr

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

// fetchAs sends node 1 (the leader) a follower fetch of the test
// partition, as replica `as` would, and returns its partition answer.
func (c *testCluster) fetchAs(as uint64, brokerEpoch int64, mut func(*kmsg.FetchRequestTopicPartition)) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = int32(as), brokerEpoch
	req.MaxWaitMillis = 1
	t := kmsg.NewFetchRequestTopic()
	t.TopicID = c.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.CurrentLeaderEpoch = 0
	rp.LastFetchedEpoch = 0
	rp.FetchOffset = 0
	rp.PartitionMaxBytes = 1 << 20
	mut(&rp)
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	resp, err := decodeFetchResponse(c.node(1).m.HandleFetch(as, encodeFetchRequest(req), time.Now().Add(time.Second)))
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("fetch answer %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// A leader refuses follower fetches that name a stale or unknown leader
// epoch, come from a non-replica or at a stale broker epoch, and answers
// a diverged follower with the epoch it diverged at, without records and
// without taking its offset as its log end.
func TestServe_RefusesAndDiverges(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.mustProduce(1, "a", "b")
	c.kill(3) // its fetcher would race the crafted fetches below
	epoch2 := int64(c.meta.View().Brokers[2].Epoch)
	cases := []struct {
		name  string
		as    uint64
		epoch int64
		mut   func(*kmsg.FetchRequestTopicPartition)
		code  int16
	}{
		{"newer leader epoch", 2, epoch2, func(p *kmsg.FetchRequestTopicPartition) { p.CurrentLeaderEpoch = 5 }, kerr.UnknownLeaderEpoch.Code},
		{"not a replica", 4, 0, func(*kmsg.FetchRequestTopicPartition) {}, kerr.NotLeaderForPartition.Code},
		{"beyond the log end, no epoch", 2, epoch2, func(p *kmsg.FetchRequestTopicPartition) { p.FetchOffset, p.LastFetchedEpoch = 9, -1 }, kerr.OffsetOutOfRange.Code},
	}
	for _, tc := range cases {
		if got := c.fetchAs(tc.as, tc.epoch, tc.mut); got.ErrorCode != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, got.ErrorCode, tc.code)
		}
	}
	// A fetch at broker epoch e, then one from before it.
	if got := c.fetchAs(2, epoch2+10, func(p *kmsg.FetchRequestTopicPartition) { p.FetchOffset = 2 }); got.ErrorCode != 0 {
		t.Fatalf("fetch at a newer broker epoch: code %d", got.ErrorCode)
	}
	if got := c.fetchAs(2, epoch2, func(p *kmsg.FetchRequestTopicPartition) { p.FetchOffset = 2 }); got.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("fetch from an older broker epoch: code %d, want NOT_LEADER_OR_FOLLOWER", got.ErrorCode)
	}
	got := c.fetchAs(2, epoch2+10, func(p *kmsg.FetchRequestTopicPartition) { p.FetchOffset, p.LastFetchedEpoch = 5, 0 })
	if got.ErrorCode != 0 || got.DivergingEpoch.Epoch != 0 || got.DivergingEpoch.EndOffset != 2 || len(got.RecordBatches) != 0 {
		t.Fatalf("diverged fetch: %+v, want diverging epoch 0 ending at 2 without records", got)
	}
	st := c.node(1).p.Status()
	for _, f := range st.Followers {
		if f.ID == 2 && f.EndOffset != 2 {
			t.Fatalf("a diverged fetch moved follower 2's log end to %d", f.EndOffset)
		}
	}
}

// A replica that led an epoch without appending to it, and lost the
// leadership, names that empty epoch in its first fetch as a follower:
// the divergence it gets must make it forget the epoch, not loop.
func TestCluster_EmptyEpochOfAFormerLeader(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.mustProduce(1, "e0")
	c.kill(1)
	c.eventually("a new leader", func() bool { return c.part().Leader != 0 && c.part().Leader != 1 })
	second := c.part().Leader
	c.eventually("it leads", func() bool { _, _, l := c.node(second).p.Leadership(); return l })
	c.kill(second) // led an epoch, appended nothing
	c.restart(1)
	c.eventually("a third leader", func() bool { l := c.part().Leader; return l != 0 && l != second })
	third := c.part().Leader
	c.eventually("it leads", func() bool { _, _, l := c.node(third).p.Leadership(); return l })
	c.mustProduce(third, "after")
	c.restart(second)
	c.eventually("the former leader catches up", func() bool {
		return slices.Equal(c.values(second, c.node(second).p.Log().EndOffset()), []string{"e0", "after"})
	})
}

// With unclean.leader.election.enable, a replica outside the ISR can be
// elected when the ISR's last member dies, and the committed records it
// lacks are lost: every replica ends without them. The test proves the
// loss the mode matrix reports is real, not an artefact.
func TestCluster_UncleanElectionLosesCommittedRecords(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"unclean.leader.election.enable": "true"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.mustProduce(1, "kept")
	c.setCut(1, 2, true)
	c.setCut(1, 3, true)
	b := testBatch(-1, 0, "pushes the followers behind")
	info, _ := validate(t, b)
	if _, err := c.node(1).p.Append(b, info, false); err != nil {
		t.Fatal(err)
	}
	c.eventually("ISR shrinks to {1}", func() bool { return slices.Equal(c.part().ISR, []uint64{1}) })
	c.mustProduce(1, "committed on 1 alone") // min.insync.replicas=1: commits
	c.kill(1)
	c.eventually("an unclean leader", func() bool { l := c.part().Leader; return l == 2 || l == 3 })
	// Its recovery may end (and the ISR grow) before a poll sees it.
	if !c.saw(func(p coordinator.Partition) bool { return (p.Leader == 2 || p.Leader == 3) && p.Recovering }) {
		t.Fatalf("an unclean election did not mark the leader recovering: %+v", c.part())
	}
	leader := c.part().Leader
	c.eventually("it leads", func() bool { _, _, l := c.node(leader).p.Leadership(); return l })
	c.mustProduce(leader, "new")
	c.setCut(1, 2, false)
	c.setCut(1, 3, false)
	c.restart(1)
	want := []string{"kept", "new"}
	c.eventually("node 1 truncated and caught up", func() bool {
		return slices.Equal(c.values(1, c.node(1).p.Log().EndOffset()), want)
	})
}
