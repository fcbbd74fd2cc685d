package isr

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// testCluster runs ISR partitions on several Managers in one process. It
// is the in-memory fake of two layers, said here as the house rules ask:
// the peer transport's fetch stream is a direct call of the leader's
// HandleFetch (with cuttable links), and group 0 is a coordinator.Metadata
// the test applies commands to at once, without raft. The partition logs
// are real, on disk in temp dirs; group 0's rules are the real ones.
type testCluster struct {
	t       testing.TB
	topicID [16]byte
	lag     time.Duration

	mu   sync.Mutex // serialises applies and publishes
	meta *coordinator.Metadata
	// history is the partition after every command applied (under mu).
	history []coordinator.Partition
	index   uint64

	netMu sync.Mutex
	nodes map[uint64]*testNode
	cut   map[[2]uint64]bool // either direction blocks a fetch
}

type testNode struct {
	id     uint64
	dir    string
	starts int
	m      *Manager
	p      *Partition
}

// newTestCluster starts n nodes with one ISR partition replicated on all
// of them, led by node 1, with the topic's configs.
func newTestCluster(t testing.TB, n int, configs map[string]string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, topicID: [16]byte{7}, lag: 300 * time.Millisecond, meta: coordinator.NewMetadata(),
		nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	cfgs := map[string]string{"replication.mode": coordinator.ModeISR}
	for k, v := range configs {
		cfgs[k] = v
	}
	var replicas []uint64
	for i := 1; i <= n; i++ {
		id := uint64(i)
		replicas = append(replicas, id)
		c.nodes[id] = &testNode{id: id, dir: t.TempDir()}
		c.mustApply(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: id, KafkaAddr: fmt.Sprintf("h:%d", i), Incarnation: fmt.Sprint(i), StartID: "start-0"}})
	}
	c.mustApply(&coordinator.Command{CreateTopic: &coordinator.CreateTopic{Name: "t", ID: c.topicID, Partitions: 1,
		Configs: cfgs, Assignment: [][]uint64{replicas}, AllowISR: true}})
	for _, id := range replicas {
		c.start(id)
	}
	t.Cleanup(c.closeAll)
	return c
}

func (c *testCluster) apply(cmd *coordinator.Command) coordinator.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := cmd.Encode()
	if err != nil {
		c.t.Error(err)
		return coordinator.Result{Err: err}
	}
	c.index++
	res, err := c.meta.Apply(raftgroup.Entry{Index: c.index, Term: 1, Data: data})
	if err != nil {
		c.t.Error(err)
		return coordinator.Result{Err: err}
	}
	c.publishLocked()
	if t := c.meta.View().Topics["t"]; t != nil {
		c.history = append(c.history, t.Partitions[0])
	}
	return res.(coordinator.Result)
}

// saw reports whether the partition was ever in a state cond accepts,
// after any command: a state that lasted only between two polls counts.
func (c *testCluster) saw(cond func(coordinator.Partition) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.history, cond)
}

func (c *testCluster) mustApply(cmd *coordinator.Command) coordinator.Result {
	c.t.Helper()
	r := c.apply(cmd)
	if r.Err != nil {
		c.t.Fatalf("apply %+v: %v", cmd, r.Err)
	}
	return r
}

// publishLocked hands every running replica its partition's new state, as
// the broker's reconcile does on every metadata change.
func (c *testCluster) publishLocked() {
	for _, n := range c.running() {
		n.p.Update(c.stateFor(n.id))
	}
}

func (c *testCluster) part() coordinator.Partition {
	return c.meta.View().Topics["t"].Partitions[0]
}

func (c *testCluster) stateFor(id uint64) State {
	v := c.meta.View()
	t := v.Topics["t"]
	p := t.Partitions[0]
	var epoch uint64
	if b := v.Brokers[id]; b != nil {
		epoch = b.Epoch
	}
	return State{Leader: p.Leader, LeaderEpoch: int32(p.LeaderTerm), PartitionEpoch: p.PartitionEpoch,
		Replicas: p.Replicas, ISR: p.ISR, ELR: p.ELR, Recovering: p.Recovering,
		MinISR: int(t.ConfigInt("min.insync.replicas")), BrokerEpoch: epoch}
}

// running returns a copy of each running node, taken under netMu.
func (c *testCluster) running() []testNode {
	c.netMu.Lock()
	defer c.netMu.Unlock()
	var out []testNode
	for _, n := range c.nodes {
		if n.m != nil {
			out = append(out, *n)
		}
	}
	return out
}

// start opens node id's Manager and replica (again, after a kill).
func (c *testCluster) start(id uint64) {
	c.t.Helper()
	n := c.nodes[id]
	cfg := DefaultManagerConfig()
	cfg.Self = id
	cfg.ReplicaLagTimeMax = c.lag
	cfg.ReplicaFetchWaitMax = 50 * time.Millisecond
	cfg.Fetch = c.fetchFrom(id)
	cfg.Propose = c.propose
	cfg.Eligible = func(b, epoch uint64) bool {
		br := c.meta.View().Brokers[b]
		return br != nil && br.Alive && br.Epoch == epoch
	}
	cfg.BrokerEpoch = func() uint64 {
		if br := c.meta.View().Brokers[id]; br != nil {
			return br.Epoch
		}
		return 0
	}
	m, err := NewManager(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := m.Open(PartitionConfig{Group: c.part().Group, TopicID: c.topicID, Index: 0, Dir: n.dir, Log: partition.DefaultConfig()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.netMu.Lock()
	n.m, n.p = m, p
	n.starts++
	c.netMu.Unlock()
	c.mu.Lock()
	p.Update(c.stateFor(id))
	c.mu.Unlock()
}

// kill stops node id as a crash would (its page cache survives: the logs
// are closed, not cut), and group 0 learns it is dead.
func (c *testCluster) kill(id uint64) {
	c.t.Helper()
	c.netMu.Lock()
	n := c.nodes[id]
	m, p := n.m, n.p
	n.m, n.p = nil, nil
	c.netMu.Unlock()
	if m == nil {
		return
	}
	_ = p.Close(false)
	m.Close()
	c.mustApply(&coordinator.Command{SetAlive: &coordinator.SetAlive{ID: id, Alive: false}})
}

// restart starts a killed node and registers it with a new StartID, which
// fences it out of every ISR until it catches up.
func (c *testCluster) restart(id uint64) {
	c.t.Helper()
	c.start(id)
	n := c.node(id)
	c.mustApply(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: id, KafkaAddr: fmt.Sprintf("h:%d", id), Incarnation: fmt.Sprint(id), StartID: fmt.Sprintf("start-%d", n.starts)}})
}

func (c *testCluster) closeAll() {
	for _, n := range c.running() {
		_ = n.p.Close(false)
		n.m.Close()
	}
}

// setCut blocks (or heals) fetches between a and b.
func (c *testCluster) setCut(a, b uint64, cut bool) {
	c.netMu.Lock()
	defer c.netMu.Unlock()
	c.cut[[2]uint64{min(a, b), max(a, b)}] = cut
}

var errCut = errors.New("test: link cut")

func (c *testCluster) fetchFrom(from uint64) func(context.Context, uint64, []byte) ([]byte, error) {
	return func(ctx context.Context, to uint64, req []byte) ([]byte, error) {
		c.netMu.Lock()
		n := c.nodes[to]
		m := n.m
		cut := c.cut[[2]uint64{min(from, to), max(from, to)}]
		c.netMu.Unlock()
		if cut || m == nil {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil, errCut
		}
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Now().Add(time.Second)
		}
		resp := m.HandleFetch(from, slices.Clone(req), dl)
		c.netMu.Lock()
		cut = c.cut[[2]uint64{min(from, to), max(from, to)}]
		c.netMu.Unlock()
		if cut { // a long-poll answered after the cut is lost with it
			return nil, errCut
		}
		return resp, nil
	}
}

// propose applies an AlterPartition at once, like a group 0 that is
// always reachable.
func (c *testCluster) propose(it coordinator.AlterPartitionItem) <-chan coordinator.ItemResult {
	ch := make(chan coordinator.ItemResult, 1)
	go func() {
		r := c.apply(&coordinator.Command{AlterPartition: &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{it}}})
		if r.Err != nil {
			ch <- coordinator.ItemResult{Group: it.Group, Err: r.Err}
			return
		}
		ch <- r.Items[0]
	}()
	return ch
}

// node returns a copy of node id, taken under netMu.
func (c *testCluster) node(id uint64) testNode {
	c.netMu.Lock()
	defer c.netMu.Unlock()
	return *c.nodes[id]
}

// eventually retries cond until it holds or a few seconds pass.
func (c *testCluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s; metadata %+v; %s", what, c.part(), c.describe())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produce appends values as one batch on node id and waits for acks=all.
func (c *testCluster) produce(id uint64, pid int64, seq int32, values ...string) (partition.ProduceResult, error) {
	c.t.Helper()
	n := c.node(id)
	if n.p == nil {
		return partition.ProduceResult{}, ErrClosed
	}
	b := testBatch(pid, seq, values...)
	info, err := partition.ValidateBatch(b, 1<<20)
	if err != nil {
		c.t.Fatal(err)
	}
	a, err := n.p.Append(b, info, true)
	if err != nil {
		return partition.ProduceResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.Committed(ctx)
}

func (c *testCluster) mustProduce(id uint64, values ...string) partition.ProduceResult {
	c.t.Helper()
	res, err := c.produce(id, -1, 0, values...)
	if err != nil || res.Err != nil {
		c.t.Fatalf("produce %v on %d: %v %v", values, id, err, res.Err)
	}
	return res
}

// values reads node id's log up to end (its HW when end < 0).
func (c *testCluster) values(id uint64, end int64) []string {
	c.t.Helper()
	l := c.node(id).p.Log()
	if end < 0 {
		end = l.HighWatermark()
	}
	var out []string
	for off := l.StartOffset(); off < end; {
		b, err := l.Read(off, 1<<20, end)
		if err != nil {
			c.t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		err = splitBatches(b, func(batch []byte) error {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(batch); err != nil {
				return err
			}
			recs := rb.Records
			for i := int32(0); i < rb.NumRecords; i++ {
				var r kmsg.Record
				n, size := binary.Varint(recs)
				if err := r.ReadFrom(recs[:size+int(n)]); err != nil {
					return err
				}
				recs = recs[size+int(n):]
				out = append(out, string(r.Value))
			}
			off = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			return nil
		})
		if err != nil {
			c.t.Fatal(err)
		}
	}
	return out
}

// testBatch is a producer's v2 batch of values (uncompressed), idempotent
// when pid >= 0.
func testBatch(pid int64, seq int32, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)[1:]
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	epoch := int16(-1)
	if pid >= 0 {
		epoch = 0
	} else {
		seq = -1
	}
	rb := kmsg.RecordBatch{
		Length: int32(partition.BatchHeaderSize - 12 + len(recs)), PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: 1, MaxTimestamp: 1,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(len(values)), Records: recs,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func validate(t *testing.T, b []byte) (partition.BatchInfo, error) {
	t.Helper()
	info, err := partition.ValidateBatch(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return info, nil
}

func (c *testCluster) describe() string {
	var out string
	for _, n := range c.running() {
		s := n.p.Status()
		out += fmt.Sprintf("[node %d: %s leader %d epoch %d hw %d leo %d epochs %v isr %v] ", n.id, s.Role, s.Leader, s.LeaderEpoch, s.HighWatermark, s.EndOffset, n.p.Epochs(), s.ISR)
	}
	return out
}
