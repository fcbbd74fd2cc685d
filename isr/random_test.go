package isr

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestCluster_RandomFaults drives a 3-node, min.insync.replicas=2 cluster
// through random cuts, kills and restarts while one producer writes, then
// heals everything and checks what Kafka's clean elections promise:
// every acknowledged record is on every replica, once, in the order it
// was acknowledged, and the replicas' logs are the same.
func TestCluster_RandomFaults(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandomFaults(t, seed, 120) })
	}
}

func runRandomFaults(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed))
	c := newTestCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	c.eventually("node 1 leads", func() bool { _, _, l := c.node(1).p.Leadership(); return l })
	var acked, tried []string
	down := map[uint64]bool{}
	for i := range steps {
		id := uint64(rng.IntN(3) + 1)
		switch op := rng.IntN(10); {
		case op < 6:
			v := fmt.Sprintf("s%d-%d", seed, i)
			tried = append(tried, v)
			if c.produceQuick(v) {
				acked = append(acked, v)
			}
		case op == 6:
			c.setCut(id, uint64(rng.IntN(3)+1), rng.IntN(2) == 0)
		case op == 7 && !down[id] && len(down) < 2:
			c.kill(id)
			down[id] = true
		case op >= 8 && down[id]:
			c.restart(id)
			delete(down, id)
		}
	}
	for a := uint64(1); a <= 3; a++ {
		for b := a + 1; b <= 3; b++ {
			c.setCut(a, b, false)
		}
	}
	for id := range down {
		c.restart(id)
	}
	c.eventually("every replica in the ISR", func() bool { return len(c.part().ISR) == 3 && c.part().Leader != 0 })
	leader := c.part().Leader
	c.eventually("the leader leads", func() bool { _, _, l := c.node(leader).p.Leadership(); return l })
	c.mustProduce(leader, "final") // commits everything before it on all three
	var logs [][]string
	for id := uint64(1); id <= 3; id++ {
		c.eventually(fmt.Sprintf("node %d has the final HW", id), func() bool {
			return c.node(id).p.Log().HighWatermark() == c.node(leader).p.Log().EndOffset()
		})
		logs = append(logs, c.values(id, -1))
	}
	for i := 1; i < 3; i++ {
		if !slices.Equal(logs[i], logs[0]) {
			t.Fatalf("seed %d: node %d holds %v, node 1 %v", seed, i+1, logs[i], logs[0])
		}
	}
	checkAcked(t, logs[0], acked, tried)
}

// checkAcked fails if an acknowledged value is missing, any value is
// there twice, or acknowledged values are out of order.
func checkAcked(t *testing.T, log, acked, tried []string) {
	t.Helper()
	pos := map[string]int{}
	for i, v := range log {
		if _, dup := pos[v]; dup {
			t.Fatalf("%q is in the log twice: %v", v, log)
		}
		pos[v] = i
	}
	last := -1
	for _, v := range acked {
		i, ok := pos[v]
		if !ok {
			t.Fatalf("acknowledged %q is lost; log %v, acked %v", v, log, acked)
		}
		if i < last {
			t.Fatalf("acknowledged %q is out of order in %v", v, log)
		}
		last = i
	}
	t.Logf("%d tried, %d acknowledged, %d in the log", len(tried), len(acked), len(log))
}

// produceQuick tries one acks=all produce on whoever leads, briefly.
func (c *testCluster) produceQuick(v string) bool {
	leader := c.part().Leader
	if leader == 0 || c.node(leader).p == nil {
		time.Sleep(5 * time.Millisecond)
		return false
	}
	n := c.node(leader)
	b := testBatch(-1, 0, v)
	info, _ := validate(c.t.(*testing.T), b)
	a, err := n.p.Append(b, info, true)
	if err != nil {
		time.Sleep(5 * time.Millisecond)
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := a.Committed(ctx)
	return err == nil && res.Err == nil
}
