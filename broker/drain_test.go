package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Drain moves every leadership off the metadata leader's node: its raft
// partitions to other voters, its ISR partitions by its controlled
// shutdown (it leaves every ISR too), and group 0 last. Leader balance,
// every 100 ms, hands none back while the node still runs, and acks=all
// writes go on while it runs and once it has stopped.
func TestNode_DrainMovesEveryLeadership(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaderBalanceInterval = 100 * time.Millisecond })
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(t, cl, "r", 3, 3)
	createISRTopic(t, cl, "i", 3, 3, 2)
	produceEvery(t, cl, "before")
	victim := c.metadataLeader(t)
	eventually(t, fmt.Sprintf("node %d to lead a raft and an ISR partition", victim), func() bool {
		return c.leadsOf(victim, "r") > 0 && c.leadsOf(victim, "i") > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := c.nodes[victim].Drain(ctx)
	t.Logf("node %d drained: %+v", victim, rep)
	if len(rep.Left) > 0 || rep.Moved != rep.Led || rep.Led < 2 {
		t.Errorf("drain report %+v: want every one of at least 2 partitions moved", rep)
	}
	if rep.MetadataTo == 0 || rep.MetadataTo == victim {
		t.Errorf("group 0 handed to %d, want another node", rep.MetadataTo)
	}
	other := rep.MetadataTo
	if other == 0 {
		other = victim%3 + 1
	}
	eventually(t, "the other nodes to see the metadata leader move", func() bool {
		l := c.nodes[other].ctl.Leader()
		return l != 0 && l != victim
	})
	c.checkDrained(t, victim, other)
	produceEvery(t, cl, "draining")
	time.Sleep(500 * time.Millisecond) // five leader-balance rounds
	c.checkDrained(t, victim, other)
	c.stop(victim)
	produceEvery(t, cl, "stopped")
}

// checkDrained checks that node victim leads nothing, is marked in
// controlled shutdown and is in no ISR, as node from sees the metadata.
func (c *testCluster) checkDrained(t *testing.T, victim, from uint64) {
	t.Helper()
	if led := c.nodes[victim].ledGroups(); len(led) > 0 {
		t.Errorf("node %d still leads groups %v", victim, led)
	}
	st := c.nodes[from].Metadata()
	if b := st.Brokers[victim]; b == nil || !b.ShuttingDown {
		t.Errorf("node %d's registration %+v, want it in controlled shutdown", victim, b)
	}
	for _, p := range st.Topics["i"].Partitions {
		if p.Leader == victim || slices.Contains(p.ISR, victim) {
			t.Errorf("ISR partition %d: leader %d, ISR %v; want node %d in neither", p.Index, p.Leader, p.ISR, victim)
		}
	}
}

// produceEvery writes one acks=all record to each of the three
// partitions of topics r and i.
func produceEvery(t *testing.T, cl *kgo.Client, value string) {
	t.Helper()
	for _, topic := range []string{"r", "i"} {
		for p := range int32(3) {
			produceSync(t, cl, topic, p, value)
		}
	}
}

// metadataLeader returns the node that leads group 0, once one does.
func (c *testCluster) metadataLeader(t *testing.T) uint64 {
	t.Helper()
	var leader uint64
	eventually(t, "a metadata leader", func() bool {
		for id, n := range c.nodes {
			if n.ctl.Status().IsLeader() {
				leader = id
				return true
			}
		}
		return false
	})
	return leader
}

// leadsOf counts the partitions of topic that node id leads.
func (c *testCluster) leadsOf(id uint64, topic string) int {
	count := 0
	for _, r := range c.nodes[id].replicaList() {
		if r.topic == topic && r.lead.Leadership().IsLeader {
			count++
		}
	}
	return count
}

// A node alone has nobody to hand its leaderships to: its drain returns
// at once rather than at its deadline, its raft partition left led
// here, its ISR partition leaderless (no other replica may lead) and
// group 0 staying.
func TestNode_DrainAloneReturnsAtOnce(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(t, cl, "r", 1, 1)
	createISRTopic(t, cl, "i", 1, 1, 1)
	produceSync(t, cl, "r", 0, "a")
	produceSync(t, cl, "i", 0, "a")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := c.nodes[1].Drain(ctx)
	if ctx.Err() != nil {
		t.Fatalf("the drain ran until its deadline: %+v", rep)
	}
	raft := c.isrPartition(1, "r", 0).Group
	if rep.Led != 2 || rep.Moved != 1 || !slices.Equal(rep.Left, []uint64{raft}) || rep.MetadataTo != 0 {
		t.Errorf("drain report %+v, want 2 led, the ISR one moved, raft group %d left and group 0 kept", rep, raft)
	}
	if p := c.isrPartition(1, "i", 0); p.Leader != 0 {
		t.Errorf("ISR partition led by %d after the controlled shutdown, want none", p.Leader)
	}
}

// After its leaderships moved, a draining node serves on for drainQuiet,
// and while produce requests still reach it (clients learning where
// their partitions went) until none has for drainQuiet, or until its
// context ends; a node that moved nothing and answered no produce
// request returns at once.
func TestNode_LingerForClients(t *testing.T) {
	n := &Node{metrics: newMetrics()}
	if d := n.lingerForClients(context.Background(), time.Time{}); d >= drainQuiet {
		t.Errorf("lingered %s with nothing moved and no produce request ever answered", d)
	}
	if d := n.lingerForClients(context.Background(), time.Now()); d < drainQuiet {
		t.Errorf("lingered %s after leaderships moved, want at least %s", d, drainQuiet)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	busy := func(d time.Duration) { // a produce request every 10 ms for d
		n.metrics.lastProduce.Store(time.Now().UnixNano())
		go func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for end := time.Now().Add(d); time.Now().Before(end); {
				select {
				case <-tick.C:
					n.metrics.lastProduce.Store(time.Now().UnixNano())
				case <-done:
					return
				}
			}
		}()
	}
	busy(2 * drainQuiet)
	if d := n.lingerForClients(context.Background(), time.Time{}); d < 2*drainQuiet {
		t.Errorf("lingered %s while produce requests came for %s", d, 2*drainQuiet)
	}
	busy(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), drainQuiet)
	defer cancel()
	if d := n.lingerForClients(ctx, time.Now()); d >= drainLingerMax {
		t.Errorf("lingered %s past its context's end (%s)", d, drainQuiet)
	}
}
