package isr

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// An acks=all batch commits once every ISR member has it, and every
// replica ends with the same records.
func TestCluster_ReplicatesAndCommits(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	for i := range 20 {
		c.mustProduce(1, "a", "b", string(rune('c'+i%20)))
	}
	want := c.values(1, -1)
	if len(want) != 60 {
		t.Fatalf("leader holds %d committed records, want 60", len(want))
	}
	for _, id := range []uint64{2, 3} {
		c.eventually("follower HW", func() bool { return c.node(id).p.Log().HighWatermark() == 60 })
		if got := c.values(id, -1); !slices.Equal(got, want) {
			t.Fatalf("node %d: %v, leader %v", id, got, want)
		}
	}
}

// A follower that stops fetching leaves the ISR after the lag time, the
// ISR goes on committing without it, and it rejoins once it catches up.
func TestCluster_ShrinkAndExpand(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.mustProduce(1, "before")
	c.setCut(1, 3, true)
	start := time.Now()
	c.mustProduce(1, "cut") // node 3 still counts as caught up: the HW waits for it
	if d := time.Since(start); d < c.lag/2 {
		t.Fatalf("a produce committed %v after the cut, before the lag time could drop node 3", d)
	}
	c.eventually("ISR shrinks to {1,2}", func() bool { return slices.Equal(c.part().ISR, []uint64{1, 2}) })
	c.mustProduce(1, "without 3")
	c.setCut(1, 3, false)
	c.eventually("ISR expands to {1,2,3}", func() bool { return slices.Equal(c.part().ISR, []uint64{1, 2, 3}) })
	if got, want := c.values(3, 3), []string{"before", "cut", "without 3"}; !slices.Equal(got, want) {
		t.Fatalf("node 3 after rejoining: %v, want %v", got, want)
	}
}

// Below min.insync.replicas an acks=all produce is refused before it is
// appended, and nothing is appended.
func TestCluster_NotEnoughReplicas(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.mustProduce(1, "x")
	c.setCut(1, 2, true)
	c.setCut(1, 3, true)
	// A follower at the leader's log end stays in sync however long it is
	// silent (Kafka's isCaughtUp); an acks=1 append leaves them behind.
	b := testBatch(-1, 0, "acks=1")
	info, _ := validate(t, b)
	if _, err := c.node(1).p.Append(b, info, false); err != nil {
		t.Fatal(err)
	}
	c.eventually("ISR shrinks to {1}", func() bool { return slices.Equal(c.part().ISR, []uint64{1}) })
	end := c.node(1).p.Log().EndOffset()
	_, err := c.produce(1, -1, 0, "refused")
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("produce below min ISR: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if got := c.node(1).p.Log().EndOffset(); got != end {
		t.Fatalf("a refused batch was appended: log end %d, was %d", got, end)
	}
}

// With the leader killed, group 0 elects an ISR member; the old leader's
// unreplicated tail is cut when it comes back as a follower, and every
// committed record survives on every replica.
func TestCluster_FailoverTruncatesUncommittedTail(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.mustProduce(1, "c1", "c2")
	c.setCut(1, 2, true)
	c.setCut(1, 3, true)
	// Appended on the leader alone: it never commits.
	b := testBatch(-1, 0, "lost")
	info, _ := validate(t, b)
	if _, err := c.node(1).p.Append(b, info, false); err != nil {
		t.Fatal(err)
	}
	c.kill(1)
	c.eventually("a new leader", func() bool { l := c.part().Leader; return l == 2 || l == 3 })
	leader := c.part().Leader
	c.eventually("the new leader leads", func() bool { _, _, l := c.node(leader).p.Leadership(); return l })
	c.mustProduce(leader, "c3")
	c.setCut(1, 2, false)
	c.setCut(1, 3, false)
	c.restart(1)
	c.eventually("node 1 rejoins the ISR", func() bool { return slices.Contains(c.part().ISR, 1) })
	want := []string{"c1", "c2", "c3"}
	for _, id := range []uint64{1, 2, 3} {
		c.eventually(fmt.Sprintf("node %d caught up", id), func() bool { return c.node(id).p.Log().HighWatermark() == 3 })
		if got := c.values(id, -1); !slices.Equal(got, want) {
			t.Fatalf("node %d holds %v, want %v", id, got, want)
		}
	}
}

// An idempotent producer's retry after a failover gets the offsets its
// first copy got, also on the new leader.
func TestCluster_DedupAcrossFailover(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	first, err := c.produce(1, 9, 0, "once")
	if err != nil || first.Err != nil {
		t.Fatal(err, first.Err)
	}
	c.kill(1)
	c.eventually("a new leader", func() bool { l := c.part().Leader; return l == 2 || l == 3 })
	leader := c.part().Leader
	c.eventually("the new leader leads", func() bool { _, _, l := c.node(leader).p.Leadership(); return l })
	again, err := c.produce(leader, 9, 0, "once")
	if err != nil || again.Err != nil {
		t.Fatal(err, again.Err)
	}
	if !again.Duplicate || again.Base != first.Base {
		t.Fatalf("retry got %+v, want a duplicate at %d", again, first.Base)
	}
	if got := c.values(leader, -1); !slices.Equal(got, []string{"once"}) {
		t.Fatalf("log holds %v", got)
	}
}

// Under flush.messages=1 a batch commits, and acks=1 answers, only once
// the leader's log is flushed past it; without a flush policy nothing is
// flushed on the produce path at all.
func TestCluster_FlushMessagesOne(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		flushed bool
	}{
		{map[string]string{"flush.messages": "1"}, true},
		{nil, false},
	} {
		c := newTestCluster(t, 3, tc.configs)
		c.node(1).p.SetFlush(flushPolicyOf(tc.configs))
		for _, id := range []uint64{2, 3} {
			c.node(id).p.SetFlush(flushPolicyOf(tc.configs))
		}
		c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
		p := c.node(1).p
		for range 20 {
			b := testBatch(-1, 0, "v")
			info, _ := validate(t, b)
			a, err := p.Append(b, info, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Durable(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := p.flushedEnd.Load() > a.Result().Last; got != tc.flushed {
				t.Fatalf("%v: acks=1 answered with flushed end %d, batch ends at %d", tc.configs, p.flushedEnd.Load(), a.Result().Last)
			}
		}
		res := c.mustProduce(1, "all")
		if got := p.flushedEnd.Load() > res.Last; got != tc.flushed {
			t.Fatalf("%v: acks=all committed with flushed end %d, batch ends at %d", tc.configs, p.flushedEnd.Load(), res.Last)
		}
	}
}

func flushPolicyOf(cfgs map[string]string) FlushPolicy {
	if cfgs["flush.messages"] == "1" {
		return FlushPolicy{Messages: 1}
	}
	return FlushPolicy{}
}

// A leader answers a consumer's OffsetForLeaderEpoch from its log, not
// clamped to its HW: a new leader's HW lags until its followers fetch in
// the new epoch, and an answer below a consumer's position is, to the
// consumer, a truncation, after which it resets.
func TestCluster_LeaderAnswersEpochEndsBeyondItsHW(t *testing.T) {
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	c.mustProduce(1, "x", "y")
	c.setCut(1, 2, true)
	c.setCut(1, 3, true)
	b := testBatch(-1, 0, "beyond the HW")
	info, _ := validate(t, b)
	p := c.node(1).p
	if _, err := p.Append(b, info, false); err != nil {
		t.Fatal(err)
	}
	if hw := p.Log().HighWatermark(); hw != 2 {
		t.Fatalf("HW %d, want 2", hw)
	}
	if e, end := p.EndOffsetFor(0); e != 0 || end != 3 {
		t.Fatalf("epoch 0 ends at (%d, %d), want (0, 3): the log's end, past the HW", e, end)
	}
}
