package broker

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/transport/kafka"
)

// fakeReplication is a replication for testing the Kafka API files on
// their own, in milliseconds, without raft: a real partition.Log in a
// temporary directory, with leadership and each append's two stages set
// by the test. By default an append is appended and committed at once,
// with the next offsets of the log.
type fakeReplication struct {
	log *partition.Log

	mu        sync.Mutex
	lead      leadership
	changed   chan struct{} // closed and replaced when lead changes
	epochs    []partition.EpochStart
	caughtUp  bool
	appends   int     // Append calls that appended
	starts    []int64 // AdvanceStart calls
	transfers []uint64
	settling  int    // WaitSettled calls that found leadership settling
	acksAll   []bool // each Append call's acksAll
	// next, when set, answers the next Append instead of the default.
	next func(batch []byte, info partition.BatchInfo) (pendingAppend, error)
}

var _ replication = (*fakeReplication)(nil)

func newFakeReplication(t *testing.T, self uint64) *fakeReplication {
	t.Helper()
	l, err := partition.Open(t.TempDir(), partition.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	f := &fakeReplication{log: l, changed: make(chan struct{}), caughtUp: true,
		epochs: []partition.EpochStart{{Epoch: 1, StartOffset: 0}}}
	f.lead = leadership{Leader: self, Epoch: 1, IsLeader: true}
	return f
}

// setLeadership changes leadership and wakes WaitSettled.
func (f *fakeReplication) setLeadership(l leadership) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lead = l
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitSettling waits until a WaitSettled call is waiting for leadership
// to settle.
func (f *fakeReplication) waitSettling(t *testing.T) {
	t.Helper()
	eventually(t, "a wait for leadership to settle", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.settling > 0
	})
}

func (f *fakeReplication) Leadership() leadership {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lead
}

func (f *fakeReplication) WaitSettled(ctx context.Context) leadership {
	for {
		f.mu.Lock()
		l, changed := f.lead, f.changed
		f.mu.Unlock()
		if !l.Settling {
			return l
		}
		f.mu.Lock()
		f.settling++
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return l
		}
	}
}

func (f *fakeReplication) AwaitLeading(context.Context) leadership { return f.Leadership() }

func (f *fakeReplication) TransferLeadership(_ context.Context, to uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transfers = append(f.transfers, to)
	return nil
}

func (f *fakeReplication) successor([]uint64) uint64 { return 0 }

func (f *fakeReplication) describe() GroupStatus {
	l := f.Leadership()
	return GroupStatus{Term: uint64(l.Epoch), Leader: l.Leader}
}

func (f *fakeReplication) remove(bool) error   { return f.log.Close() }
func (f *fakeReplication) Close() error        { return f.log.Close() }
func (f *fakeReplication) Log() *partition.Log { return f.log }

// Producers: the fake keeps no producer state.
func (f *fakeReplication) Producers() []partition.ProducerInfo { return nil }

func (f *fakeReplication) Epochs() []partition.EpochStart {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epochs
}

func (f *fakeReplication) EndOffsetFor(epoch int32) (int32, int64) {
	eps := f.Epochs()
	for i := len(eps) - 1; i >= 0; i-- {
		if eps[i].Epoch <= epoch {
			if i+1 < len(eps) {
				return eps[i].Epoch, eps[i+1].StartOffset
			}
			return eps[i].Epoch, f.log.HighWatermark()
		}
	}
	return -1, -1
}

func (f *fakeReplication) CaughtUp(epoch int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.caughtUp && epoch == f.lead.Epoch
}

func (f *fakeReplication) Append(_ context.Context, batch []byte, info partition.BatchInfo, acksAll bool) (pendingAppend, error) {
	f.mu.Lock()
	next, lead := f.next, f.lead
	f.next = nil
	f.acksAll = append(f.acksAll, acksAll)
	f.mu.Unlock()
	if !lead.IsLeader {
		return nil, errNotLeader
	}
	if next != nil {
		return next(batch, info)
	}
	pr, err := f.commit(batch)
	if err != nil {
		return nil, err
	}
	return &fakeAppend{base: pr.Base, result: pr}, nil
}

// commit appends batch to the log and moves the high watermark past it.
func (f *fakeReplication) commit(batch []byte) (partition.ProduceResult, error) {
	base, last, err := f.log.Append(batch, f.Leadership().Epoch)
	if err != nil {
		return partition.ProduceResult{}, err
	}
	if err := f.log.SetHighWatermark(last + 1); err != nil {
		return partition.ProduceResult{}, err
	}
	f.mu.Lock()
	f.appends++
	f.mu.Unlock()
	return partition.ProduceResult{Base: base, Last: last, LogStart: f.log.StartOffset()}, nil
}

func (f *fakeReplication) AdvanceStart(_ context.Context, offset int64) error {
	f.mu.Lock()
	f.starts = append(f.starts, offset)
	f.mu.Unlock()
	return f.log.AdvanceStart(offset)
}

// fakeAppend is an append whose stages the test releases: Appended
// returns once appended is closed (nil: at once), Committed once
// committed is (nil: at once), or when the waiter's context ends.
type fakeAppend struct {
	appended, committed chan struct{}
	base                int64 // what Appended returns
	appendErr           error
	result              partition.ProduceResult
	commitErr           error
}

func (a *fakeAppend) Appended(ctx context.Context) (int64, error) {
	if err := wait(ctx, a.appended); err != nil {
		return -1, err
	}
	if a.appendErr != nil {
		return -1, a.appendErr
	}
	return a.base, nil
}

func (a *fakeAppend) Committed(ctx context.Context) (partition.ProduceResult, error) {
	if err := wait(ctx, a.committed); err != nil {
		return partition.ProduceResult{}, err
	}
	return a.result, a.commitErr
}

func wait(ctx context.Context, c chan struct{}) error {
	if c == nil {
		return nil
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newUnitNode returns a node that serves the Kafka APIs from the given
// fake replicas of topic's partitions (partition i from reps[i]), with
// no raft, network or listener: a metadata state with brokers 1 to 3
// alive and the topic placed on them. It is node 1.
func newUnitNode(t *testing.T, topic string, configs map[string]string, reps ...*fakeReplication) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = 1
	cfg.TickInterval, cfg.ElectionTicks = cfg.TickInterval/10, 5 // a short settle wait
	n := &Node{cfg: cfg, log: logging.Discard(nil), meta: coordinator.NewMetadata(), replicas: map[uint64]*replica{},
		offline: map[uint64]OfflineReplica{}, metrics: newMetrics()}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	t.Cleanup(n.cancel)
	index := uint64(0)
	apply := func(c *coordinator.Command) {
		t.Helper()
		data, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		index++
		res, err := n.meta.Apply(raftgroup.Entry{Index: index, Data: data})
		if err != nil || res.(coordinator.Result).Err != nil {
			t.Fatalf("metadata command %+v: %v %v", c, err, res)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		apply(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: id, KafkaAddr: "127.0.0.1:" + strconv.FormatUint(9091+id, 10)}})
	}
	apply(&coordinator.Command{CreateTopic: &coordinator.CreateTopic{Name: topic, ID: [16]byte{1}, Partitions: int32(len(reps)),
		ReplicationFactor: 3, Configs: configs}})
	tp := n.meta.View().Topics[topic]
	for i, f := range reps {
		p := tp.Partitions[i]
		d := &dataPartition{repl: f}
		d.setProduceLimits(tp)
		n.replicas[p.Group] = &replica{topic: topic, index: p.Index, gid: p.Group, lead: f, data: d}
	}
	return n
}

// result waits for a Pending and returns its response.
func result(t *testing.T, p kafka.Pending) kmsg.Response {
	t.Helper()
	<-p.Done()
	resp, err := p.Result()
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
