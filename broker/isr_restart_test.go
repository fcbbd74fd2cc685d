package broker

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A leader that restarts before group 0 noticed it was gone, having
// lost its log (a power loss without flush), finds itself still leader
// in the metadata it replays. It must not act on that: until its new
// registration (its StartID) is applied, and group 0 has fenced it out of
// the ISR and elected a survivor, it neither leads nor answers fetches,
// or its followers would truncate to its empty log (the matrix's
// i1-n × p1 cell found this loss). Every acknowledged record survives.
func TestISR_RestartedLeaderThatLostItsLogDoesNotLead(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.ElectionTicks = 50 }) // dead after 3 s: the restart is sooner
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	createISRTopic(t, cl, "lost", 1, 3, 1)
	var vals []string
	for i := range 100 {
		vals = append(vals, fmt.Sprintf("a%d", i))
	}
	var acks []acked
	for i, o := range produceSync(t, cl, "lost", 0, vals...) {
		acks = append(acks, acked{vals[i], o})
	}
	victim := c.isrLeader(t, 1, "lost", 0)
	other, third := victim%3+1, (victim+1)%3+1
	dir := c.nodes[victim].logDir("lost", 0)
	// With the victim and a second node down, group 0 has no quorum: the
	// metadata the victim replays on its restart still names it leader,
	// and its registration waits for a new metadata leader.
	c.stop(victim)
	c.stop(third)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	c.start(victim)
	eventually(t, "group 0 to elect a survivor", func() bool {
		p := c.isrPartition(other, "lost", 0)
		return p.Leader != 0 && p.Leader != victim
	})
	vals = vals[:0]
	for i := range 100 {
		vals = append(vals, fmt.Sprintf("b%d", i))
	}
	for i, o := range produceSync(t, cl, "lost", 0, vals...) {
		acks = append(acks, acked{vals[i], o})
	}
	checkAcked(t, consumeAll(t, c, "lost", 0, 200), acks)
	c.start(third)
}
