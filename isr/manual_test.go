package isr

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/vfs"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// manualCluster drives ISR partitions on manual Managers from the test's
// goroutine in virtual time, as the simulator does: a fetch is a direct
// call of the leader's HandleFetch, group 0 is a coordinator.Metadata
// applied at once (an in-memory fake of raft, as testCluster's), and the
// logs live on one vfs.Mem.
type manualCluster struct {
	t       *testing.T
	now     time.Time
	meta    *coordinator.Metadata
	index   uint64
	topicID [16]byte
	disk    *vfs.Mem
	nodes   map[uint64]*manualNode
	cut     map[uint64]bool // a cut node neither fetches nor is fetched from
}

type manualNode struct {
	m *Manager
	p *Partition
}

func newManualCluster(t *testing.T, n int) *manualCluster {
	c := &manualCluster{t: t, now: time.UnixMilli(1_700_000_000_000), meta: coordinator.NewMetadata(), topicID: [16]byte{9},
		disk: vfs.NewMem(), nodes: map[uint64]*manualNode{}, cut: map[uint64]bool{}}
	var replicas []uint64
	for i := uint64(1); i <= uint64(n); i++ {
		replicas = append(replicas, i)
		c.apply(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: i, KafkaAddr: fmt.Sprintf("h:%d", i), Incarnation: fmt.Sprint(i), StartID: "s"}})
	}
	c.apply(&coordinator.Command{CreateTopic: &coordinator.CreateTopic{Name: "t", ID: c.topicID, Partitions: 1, AllowISR: true,
		Configs: map[string]string{"replication.mode": coordinator.ModeISR, "min.insync.replicas": "2"}, Assignment: [][]uint64{replicas}}})
	for _, id := range replicas {
		cfg := DefaultManagerConfig()
		cfg.Self, cfg.Manual, cfg.Clock = id, true, func() time.Time { return c.now }
		cfg.ReplicaLagTimeMax = time.Second
		cfg.Fetch = func(context.Context, uint64, []byte) ([]byte, error) { panic("a manual Manager fetched on its own") }
		cfg.Propose = c.propose
		cfg.BrokerEpoch = func() uint64 { return c.meta.View().Brokers[id].Epoch }
		m, err := NewManager(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lc := partition.DefaultConfig()
		lc.FS, lc.Clock, lc.WritebackBytes = c.disk, cfg.Clock, 0
		p, err := m.Open(PartitionConfig{Group: c.part().Group, TopicID: c.topicID, Dir: fmt.Sprintf("/n%d/t-0", id), Log: lc})
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[id] = &manualNode{m: m, p: p}
	}
	c.publish()
	return c
}

func (c *manualCluster) part() coordinator.Partition { return c.meta.View().Topics["t"].Partitions[0] }

func (c *manualCluster) apply(cmd *coordinator.Command) coordinator.Result {
	data, err := cmd.Encode()
	if err != nil {
		c.t.Fatal(err)
	}
	c.index++
	res, err := c.meta.Apply(raftgroup.Entry{Index: c.index, Term: 1, Data: data})
	if err != nil {
		c.t.Fatal(err)
	}
	return res.(coordinator.Result)
}

// propose applies an AlterPartition at once; the leader gets the answer
// at its next Step.
func (c *manualCluster) propose(it coordinator.AlterPartitionItem) <-chan coordinator.ItemResult {
	ch := make(chan coordinator.ItemResult, 1)
	r := c.apply(&coordinator.Command{AlterPartition: &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{it}}})
	if r.Err != nil {
		ch <- coordinator.ItemResult{Group: it.Group, Err: r.Err}
	} else {
		ch <- r.Items[0]
	}
	return ch
}

// publish hands every node the partition's state, as reconcile does.
func (c *manualCluster) publish() {
	v := c.meta.View()
	t, p := v.Topics["t"], c.part()
	for _, id := range slices.Sorted(mapKeys(c.nodes)) {
		c.nodes[id].p.Update(State{Leader: p.Leader, LeaderEpoch: int32(p.LeaderTerm), PartitionEpoch: p.PartitionEpoch,
			Replicas: p.Replicas, ISR: p.ISR, ELR: p.ELR, LastKnownLeader: p.LastKnownLeader, Recovering: p.Recovering, MinISR: int(t.ConfigInt("min.insync.replicas")), BrokerEpoch: v.Brokers[id].Epoch})
	}
}

// tick advances the clock 10 ms, steps every Manager, delivers every
// fetch round that no cut stops, and publishes group 0's state.
func (c *manualCluster) tick() {
	c.now = c.now.Add(10 * time.Millisecond)
	for _, id := range slices.Sorted(mapKeys(c.nodes)) {
		c.nodes[id].m.Step()
	}
	for _, id := range slices.Sorted(mapKeys(c.nodes)) {
		for _, r := range c.nodes[id].m.FetchRounds() {
			if c.cut[id] || c.cut[r.Leader] {
				continue
			}
			r.Done(c.nodes[r.Leader].m.HandleFetch(id, r.Request, c.now.Add(time.Second)), nil)
		}
	}
	c.publish()
}

func mapKeys[V any](m map[uint64]V) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// produce appends values as acks=all on the leader and ticks until the
// batch commits, at most limit ticks.
func (c *manualCluster) produce(limit int, values ...string) partition.ProduceResult {
	c.t.Helper()
	leader := c.nodes[c.part().Leader].p
	b := testBatch(-1, 0, values...)
	info, err := partition.ValidateBatch(b, 1<<20)
	if err != nil {
		c.t.Fatal(err)
	}
	a, err := leader.Append(b, info, true)
	if err != nil {
		c.t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel() // Committed only polls
	for range limit {
		if res, err := a.Committed(done); err == nil {
			return res
		}
		c.tick()
	}
	c.t.Fatalf("batch %v not committed in %d ticks (HW %d)", values, limit, leader.Log().HighWatermark())
	return partition.ProduceResult{}
}

// A manual Manager starts no goroutine, and replicates and commits an
// acks=all batch when driven by Step and FetchRounds alone.
func TestManual_ReplicatesWithoutGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newManualCluster(t, 3)
	var last partition.ProduceResult
	for i := range 20 {
		last = c.produce(50, fmt.Sprintf("v%d", i))
	}
	for range 5 {
		c.tick() // the followers learn the last HW
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after running manual Managers, %d before", n, before)
	}
	leaderLog := c.nodes[c.part().Leader].p.Log()
	want, err := leaderLog.Read(0, 1<<20, last.Last+1)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range c.nodes {
		got, err := n.p.Log().Read(0, 1<<20, last.Last+1)
		if err != nil || string(got) != string(want) || n.p.Log().HighWatermark() != last.Last+1 {
			t.Fatalf("node %d: %d bytes (err %v), HW %d; the leader has %d bytes up to %d", id, len(got), err, n.p.Log().HighWatermark(), len(want), last.Last+1)
		}
	}
}

// A follower that stops fetching while the leader appends leaves the ISR
// once the virtual clock passes replica.lag.time.max, through the
// Manager's Step alone (the acks=all batch waits for it); it comes back
// once it fetches again.
func TestManual_ShrinksAndExpandsInVirtualTime(t *testing.T) {
	c := newManualCluster(t, 3)
	c.produce(50, "a")
	c.cut[3] = true
	start := c.now
	c.produce(300, "b")
	if waited := c.now.Sub(start); waited < time.Second {
		t.Fatalf("a batch committed after %s without node 3, inside the 1 s lag time", waited)
	}
	if isr := c.part().ISR; slices.Contains(isr, 3) || len(isr) != 2 {
		t.Fatalf("ISR %v after node 3 stopped fetching past the lag time", isr)
	}
	delete(c.cut, 3)
	for range 100 {
		c.tick()
		if slices.Contains(c.part().ISR, 3) {
			return
		}
	}
	t.Fatalf("node 3 not back in the ISR %v after fetching again", c.part().ISR)
}

// restart closes node id's Manager and opens it again on the same disk
// (no crash: what it wrote stays) after damage ran over its files, and
// registers the node's new start.
func (c *manualCluster) restart(id uint64, start string, damage func(path string)) {
	c.t.Helper()
	n := c.nodes[id]
	n.m.Close()
	for _, path := range c.disk.Paths() {
		if strings.HasPrefix(path, fmt.Sprintf("/n%d/", id)) {
			damage(path)
		}
	}
	cfg := n.m.cfg
	m, err := NewManager(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := m.Open(n.p.cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id] = &manualNode{m: m, p: p}
	c.apply(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: id, KafkaAddr: fmt.Sprintf("h:%d", id), Incarnation: fmt.Sprint(id), StartID: start}})
	c.publish()
}

// The last ISR member restarts with a batch in the middle of its log
// damaged: recovery cuts the log there, and group 0 (ELR off) elects it
// again, as Kafka would. It must not lead: it resigns, the partition goes
// leaderless, and the replicas that kept the acknowledged records keep
// them (nobody truncated to the damaged log).
func TestManual_LeaderThatLostDataResigns(t *testing.T) {
	c := newManualCluster(t, 3)
	var last partition.ProduceResult
	for i := range 10 {
		last = c.produce(50, fmt.Sprintf("v%d", i))
	}
	for range 5 {
		c.tick()
	}
	leader := c.part().Leader
	var others []uint64
	for id := range mapKeys(c.nodes) {
		if id != leader {
			c.cut[id] = true
			others = append(others, id)
		}
	}
	b := testBatch(-1, 0, "unacknowledged")
	info, err := partition.ValidateBatch(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[leader].p.Append(b, info, true); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300 && len(c.part().ISR) > 1; i++ {
		c.tick()
	}
	if isr := c.part().ISR; len(isr) != 1 || isr[0] != leader {
		t.Fatalf("ISR %v, want the leader %d alone", isr, leader)
	}
	clear(c.cut)
	// Group 0 holds the others for dead, so that the partition stays
	// offline once the damaged leader resigns.
	for _, id := range others {
		c.apply(&coordinator.Command{SetAlive: &coordinator.SetAlive{ID: id, Alive: false}})
	}
	damaged := false
	c.restart(leader, "s-2", func(path string) {
		if strings.HasSuffix(path, ".log") {
			damaged = true
			if err := c.disk.Damage(path, func(b []byte) []byte { b[len(b)/3] ^= 0x40; return b }); err != nil {
				t.Fatal(err)
			}
		}
	})
	if !damaged || !c.nodes[leader].p.log.LostData() {
		t.Fatalf("the damaged log does not report lost data (damaged %v)", damaged)
	}
	for range 100 {
		c.tick()
	}
	if p := c.part(); p.Leader != 0 || len(p.ISR) != 0 || p.LastKnownLeader != 0 {
		t.Fatalf("the replica that lost data is still a candidate: %+v", p)
	}
	if _, _, leads := c.nodes[leader].p.Leadership(); leads {
		t.Fatal("the replica that lost data leads")
	}
	// Back, every replica reports its log end and the longest leads: the
	// acknowledged records survive, on every replica.
	for _, id := range others {
		c.apply(&coordinator.Command{SetAlive: &coordinator.SetAlive{ID: id, Alive: true}})
	}
	c.publish()
	for i := 0; i < 1000 && (c.part().Leader == 0 || len(c.part().ISR) < 3); i++ {
		c.tick()
	}
	p := c.part()
	if p.Leader == 0 || p.Leader == leader || len(p.ISR) != 3 {
		t.Fatalf("after every replica reported: %+v, want another replica leading all three", p)
	}
	for id, n := range c.nodes {
		if end := n.p.Log().EndOffset(); end <= last.Last {
			t.Fatalf("node %d ends at %d: acknowledged records up to %d are gone", id, end, last.Last)
		}
	}
}
