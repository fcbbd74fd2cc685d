package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/isr"
	"github.com/raftq/raftq/partition"
)

// These drive the ISR adapter over a real isr.Partition on a manager with
// no peers: node 1, told its role by hand as reconcile would.

func newISRAdapter(t *testing.T) (*isrReplication, *[]uint64) {
	t.Helper()
	cfg := isr.DefaultManagerConfig()
	cfg.Self = 1
	cfg.Fetch = func(context.Context, uint64, []byte) ([]byte, error) { return nil, errors.New("no peers") }
	cfg.Propose = func(it coordinator.AlterPartitionItem) <-chan coordinator.ItemResult {
		return make(chan coordinator.ItemResult) // never answered
	}
	m, err := isr.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	p, err := m.Open(isr.PartitionConfig{Group: 5, TopicID: [16]byte{5}, Dir: t.TempDir(), Log: partition.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	elected := &[]uint64{}
	r := &isrReplication{p: p, gid: 5,
		preferred: func() (uint64, bool) { return 2, true },
		electPreferred: func(context.Context) error {
			*elected = append(*elected, 2)
			return nil
		}}
	t.Cleanup(func() { _ = r.Close() })
	return r, elected
}

func appendOne(t *testing.T, r *isrReplication, acksAll bool, v string) (pendingAppend, error) {
	t.Helper()
	b := testBatch(t, -1, 0, 0, v)
	info, err := partition.ValidateBatch(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return r.Append(context.Background(), b, info, acksAll)
}

func TestISRReplication_LeaderAppendsAndCommits(t *testing.T) {
	r, _ := newISRAdapter(t)
	if l := r.Leadership(); !l.Settling || l.IsLeader {
		t.Fatalf("before any state: %+v, want settling and not leading", l)
	}
	r.p.Update(isr.State{Leader: 1, LeaderEpoch: 3, Replicas: []uint64{1}, ISR: []uint64{1}, MinISR: 1, BrokerEpoch: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l := r.WaitSettled(ctx); !l.IsLeader || l.Leader != 1 || l.Epoch != 3 || l.Settling {
		t.Fatalf("leading: %+v, want node 1 leading epoch 3", l)
	}
	for i, acksAll := range []bool{false, true} {
		pa, err := appendOne(t, r, acksAll, "v")
		if err != nil {
			t.Fatal(err)
		}
		if base, err := pa.Appended(ctx); err != nil || base != int64(i) {
			t.Fatalf("append %d: appended at %d (%v), want %d", i, base, err, i)
		}
		if pr, err := pa.Committed(ctx); err != nil || pr.Err != nil || pr.Base != int64(i) {
			t.Fatalf("append %d: committed %+v (%v), want offset %d", i, pr, err, i)
		}
	}
	if hw := r.Log().HighWatermark(); hw != 2 {
		t.Errorf("high watermark %d, want 2 (an ISR of one)", hw)
	}
	if gs := r.describe(); gs.Mode != "isr" || gs.Role != "leader" || gs.LeaderEpoch != 3 || gs.EndOffset != 2 {
		t.Errorf("describe %+v, want mode isr, leader at epoch 3, log end 2", gs)
	}
}

// Below min.insync.replicas acks=all is refused before the append with
// NOT_ENOUGH_REPLICAS; acks=1 appends. A follower's append is
// NOT_LEADER, and a closed replica's is a stopped replica.
func TestISRReplication_Refusals(t *testing.T) {
	r, _ := newISRAdapter(t)
	r.p.Update(isr.State{Leader: 1, LeaderEpoch: 1, Replicas: []uint64{1, 2}, ISR: []uint64{1}, MinISR: 2, BrokerEpoch: 1})
	if _, err := appendOne(t, r, true, "refused"); !errors.Is(err, kerr.NotEnoughReplicas) || replicationErrCode(err) != kerr.NotEnoughReplicas.Code {
		t.Errorf("acks=all below min ISR: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if end := r.Log().EndOffset(); end != 0 {
		t.Errorf("log end %d after the refusal, want 0: nothing appended", end)
	}
	if _, err := appendOne(t, r, false, "ok"); err != nil {
		t.Errorf("acks=1 below min ISR: %v, want it appended", err)
	}
	r.p.Update(isr.State{Leader: 2, LeaderEpoch: 2, Replicas: []uint64{1, 2}, ISR: []uint64{2}, MinISR: 2, BrokerEpoch: 1})
	if _, err := appendOne(t, r, false, "x"); !errors.Is(err, errNotLeader) {
		t.Errorf("append on a follower: %v, want errNotLeader", err)
	}
	if l := r.Leadership(); l.IsLeader || l.Leader != 2 || l.Epoch != 2 {
		t.Errorf("follower's leadership %+v, want node 2 at epoch 2", l)
	}
	_ = r.Close()
	if _, err := appendOne(t, r, false, "x"); !errors.Is(err, errReplicaStopped) {
		t.Errorf("append after close: %v, want errReplicaStopped", err)
	}
}

// Leadership moves only to the preferred replica, by an election.
func TestISRReplication_TransferOnlyToThePreferredReplica(t *testing.T) {
	r, elected := newISRAdapter(t)
	r.p.Update(isr.State{Leader: 1, LeaderEpoch: 1, Replicas: []uint64{2, 1}, ISR: []uint64{2, 1}, MinISR: 1, BrokerEpoch: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := r.TransferLeadership(ctx, 3); err == nil || !strings.Contains(err.Error(), "preferred replica 2") || len(*elected) != 0 {
		t.Errorf("transfer to a non-preferred replica: %v (elections %v), want a refusal naming replica 2 and no election", err, *elected)
	}
	// The election is asked for; the replica then waits to learn of it.
	if err := r.TransferLeadership(ctx, 2); !errors.Is(err, context.DeadlineExceeded) || len(*elected) != 1 {
		t.Errorf("transfer to the preferred replica: %v (elections %v), want one election, then a wait", err, *elected)
	}
	go r.p.Update(isr.State{Leader: 2, LeaderEpoch: 2, Replicas: []uint64{2, 1}, ISR: []uint64{2, 1}, MinISR: 1, BrokerEpoch: 1})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := r.TransferLeadership(ctx2, 2); err != nil {
		t.Errorf("transfer once the metadata names 2: %v", err)
	}
}

// A replica whose node's metadata already has it elected waits for
// reconcile to hand it the role (AwaitLeading), so that a produce arriving
// in that moment is appended; one the metadata does not elect returns at
// once.
func TestISRReplication_AwaitLeadingWaitsForAnElectionOnItsWay(t *testing.T) {
	r, _ := newISRAdapter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l := r.AwaitLeading(ctx); l.IsLeader || ctx.Err() != nil {
		t.Fatalf("with no election in the metadata: %+v (%v), want an answer at once, not leading", l, ctx.Err())
	}
	r.electedAfter = func(epoch int32) bool { return epoch < 3 } // group 0 elected node 1 at epoch 3
	waiting := make(chan leadership, 1)
	go func() { waiting <- r.AwaitLeading(ctx) }()
	select {
	case l := <-waiting:
		t.Fatalf("returned %+v before the replica took its role", l)
	case <-time.After(50 * time.Millisecond):
	}
	r.p.Update(isr.State{Leader: 1, LeaderEpoch: 3, Replicas: []uint64{1}, ISR: []uint64{1}, MinISR: 1, BrokerEpoch: 1})
	if l := <-waiting; !l.IsLeader || l.Epoch != 3 {
		t.Fatalf("after the role arrived: %+v, want leading epoch 3", l)
	}
}
