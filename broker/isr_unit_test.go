package broker

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/isr"
	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/transport/kafka"
)

// These test the ISR wiring's pure parts without an isr.Manager: the
// metadata the node passes on, the flush policy, the error mapping, the
// status and Metadata answers.

// applyMeta applies commands to n's metadata after what is there.
func applyMeta(t *testing.T, n *Node, cmds ...*coordinator.Command) {
	t.Helper()
	for _, c := range cmds {
		data, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		res, err := n.meta.Apply(raftgroup.Entry{Index: n.meta.View().Index + 1, Data: data})
		if err != nil || res.(coordinator.Result).Err != nil {
			t.Fatalf("metadata command %+v: %v %v", c, err, res)
		}
	}
}

// newISRUnitNode is a unit node (node 1 of brokers 1-3) whose metadata
// also holds ISR topic "i", one partition on replicas 1, 2, 3.
func newISRUnitNode(t *testing.T, configs map[string]string) *Node {
	t.Helper()
	n := newUnitNode(t, "t", nil, newFakeReplication(t, 1))
	cfgs := map[string]string{"replication.mode": "isr"}
	for k, v := range configs {
		cfgs[k] = v
	}
	applyMeta(t, n, &coordinator.Command{CreateTopic: &coordinator.CreateTopic{Name: "i", ID: [16]byte{2}, Partitions: 1,
		ReplicationFactor: 3, Configs: cfgs, Assignment: [][]uint64{{1, 2, 3}}, AllowISR: true}})
	return n
}

func isrRef(t *testing.T, n *Node) coordinator.PartitionRef {
	t.Helper()
	ref, ok := n.partitionRef("i", 0)
	if !ok {
		t.Fatal("no partition i-0")
	}
	return ref
}

func TestISRState_FromTheMetadata(t *testing.T) {
	n := newISRUnitNode(t, map[string]string{"min.insync.replicas": "2"})
	ref := isrRef(t, n)
	applyMeta(t, n, &coordinator.Command{AlterPartition: &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{{
		Group: ref.Partition.Group, Leader: 1, LeaderEpoch: int32(ref.Partition.LeaderTerm), PartitionEpoch: ref.Partition.PartitionEpoch,
		ISR: []coordinator.ISRMember{{ID: 1, BrokerEpoch: brokerEpochIn(n.meta.View(), 1)}, {ID: 3, BrokerEpoch: brokerEpochIn(n.meta.View(), 3)}},
	}}}})
	s := n.meta.View()
	ref = isrRef(t, n)
	got := isrState(s, ref, 2)
	if got.Leader != 1 || !slices.Equal(got.ISR, []uint64{1, 3}) || !slices.Equal(got.Replicas, []uint64{1, 2, 3}) {
		t.Errorf("state leader %d isr %v replicas %v, want leader 1, isr [1 3], replicas [1 2 3]", got.Leader, got.ISR, got.Replicas)
	}
	if got.PartitionEpoch != ref.Partition.PartitionEpoch || got.PartitionEpoch == 0 {
		t.Errorf("partition epoch %d, want the metadata's %d (bumped by the alter)", got.PartitionEpoch, ref.Partition.PartitionEpoch)
	}
	if got.MinISR != 2 {
		t.Errorf("min isr %d, want 2", got.MinISR)
	}
	if want := s.Brokers[2].Epoch; got.BrokerEpoch != want || want == 0 {
		t.Errorf("broker epoch %d, want node 2's %d", got.BrokerEpoch, want)
	}
	if got := isrState(s, ref, 9).BrokerEpoch; got != 0 {
		t.Errorf("an unregistered node's broker epoch is %d, want 0", got)
	}
}

func TestFlushPolicy_DefaultsMeanNever(t *testing.T) {
	for _, c := range []struct {
		msgs, ms string
		want     isr.FlushPolicy
	}{
		{"", "", isr.FlushPolicy{}},
		{fmt.Sprint(int64(math.MaxInt64)), fmt.Sprint(int64(math.MaxInt64)), isr.FlushPolicy{}},
		{"1", "", isr.FlushPolicy{Messages: 1}},
		{"", "250", isr.FlushPolicy{Interval: 250 * time.Millisecond}},
		{"", "0", isr.FlushPolicy{Interval: time.Nanosecond}},
		{"1000", "1000", isr.FlushPolicy{Messages: 1000, Interval: time.Second}},
	} {
		cfgs := map[string]string{}
		if c.msgs != "" {
			cfgs["flush.messages"] = c.msgs
		}
		if c.ms != "" {
			cfgs["flush.ms"] = c.ms
		}
		tp := &coordinator.Topic{Configs: cfgs}
		if got := flushPolicy(tp); got != c.want {
			t.Errorf("flush.messages=%q flush.ms=%q: %+v, want %+v", c.msgs, c.ms, got, c.want)
		}
	}
}

func TestClassifyISR_MapsToTheBrokersErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
		code int16
	}{
		{isr.ErrNotLeader, errNotLeader, kerr.NotLeaderForPartition.Code},
		{isr.ErrLeaderChanged, errLeadershipLost, kerr.RequestTimedOut.Code}, // it may still commit
		{isr.ErrClosed, errReplicaStopped, kerr.KafkaStorageError.Code},
		{kerr.NotEnoughReplicas, kerr.NotEnoughReplicas, kerr.NotEnoughReplicas.Code},
		{fmt.Errorf("after: %w", kerr.NotEnoughReplicasAfterAppend), kerr.NotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend.Code},
	} {
		got := classifyISR(c.err)
		if !errors.Is(got, c.want) || !errors.Is(got, c.err) {
			t.Errorf("classifyISR(%v) = %v, want it to wrap %v and keep the cause", c.err, got, c.want)
		}
		if code := replicationErrCode(got); code != c.code {
			t.Errorf("classifyISR(%v) answers %v, want %v", c.err, kerr.ErrorForCode(code), kerr.ErrorForCode(c.code))
		}
	}
	if classifyISR(nil) != nil {
		t.Error("classifyISR(nil) is not nil")
	}
	if !isLeadershipLoss(classifyISR(isr.ErrLeaderChanged)) {
		t.Error("a leader change before the commit is not a leadership loss")
	}
}

func TestISRGroupStatus_ReportsFollowerLag(t *testing.T) {
	now := time.Now()
	s := isr.Status{Role: isr.RoleLeader, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9, ISR: []uint64{1, 2}, ELR: []uint64{3},
		EndOffset: 100, Followers: []isr.FollowerStatus{
			{ID: 2, EndOffset: 100, LastCaughtUp: now, InISR: true},
			{ID: 3, EndOffset: 40, LastCaughtUp: now.Add(-5 * time.Second)},
			{ID: 4, EndOffset: -1},
		}}
	gs := isrGroupStatus(7, s, now)
	if gs.Mode != "isr" || gs.Role != "leader" || gs.Term != 4 || gs.LeaderEpoch != 4 || gs.PartitionEpoch != 9 {
		t.Errorf("status %+v, want mode isr, role leader, term and leader epoch 4, partition epoch 9", gs)
	}
	if !slices.Equal(gs.ISR, []uint64{1, 2}) || !slices.Equal(gs.ELR, []uint64{3}) {
		t.Errorf("isr %v elr %v, want [1 2] and [3]", gs.ISR, gs.ELR)
	}
	want := []FollowerLag{{ID: 2, EndOffset: 100, Lag: 0, SinceCaughtUpMs: 0, InISR: true},
		{ID: 3, EndOffset: 40, Lag: 60, SinceCaughtUpMs: 5000}, {ID: 4, EndOffset: -1, Lag: -1, SinceCaughtUpMs: -1}}
	if !slices.Equal(gs.Followers, want) {
		t.Errorf("followers %+v, want %+v", gs.Followers, want)
	}
}

// Metadata for an ISR partition is group 0's: its ISR (not every live
// replica, as raft's shows), its elected leader, and as offline the
// replicas of dead brokers.
func TestMetadata_ISRPartitionFromGroup0(t *testing.T) {
	n := newISRUnitNode(t, nil)
	ref := isrRef(t, n)
	applyMeta(t, n, &coordinator.Command{AlterPartition: &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{{
		Group: ref.Partition.Group, Leader: 1, LeaderEpoch: int32(ref.Partition.LeaderTerm), PartitionEpoch: ref.Partition.PartitionEpoch,
		ISR: []coordinator.ISRMember{{ID: 1, BrokerEpoch: brokerEpochIn(n.meta.View(), 1)}},
	}}}})
	partitionMD := func() (int16, int32, []int32, []int32) {
		st := n.meta.View()
		mp := n.topicMetadata(st, st.Topics["i"], 12).Partitions[0]
		return mp.ErrorCode, mp.Leader, mp.ISR, mp.OfflineReplicas
	}
	if code, leader, isr, offline := partitionMD(); code != 0 || leader != 1 || !slices.Equal(isr, []int32{1}) || len(offline) != 0 {
		t.Errorf("metadata %v leader %d isr %v offline %v, want leader 1, isr [1], none offline", kerr.ErrorForCode(code), leader, isr, offline)
	}
	applyMeta(t, n, &coordinator.Command{SetAlive: &coordinator.SetAlive{ID: 3, Alive: false}})
	if _, leader, isr, offline := partitionMD(); leader != 1 || !slices.Equal(isr, []int32{1}) || !slices.Equal(offline, []int32{3}) {
		t.Errorf("with node 3 dead: leader %d isr %v offline %v, want leader 1, isr [1], offline [3]", leader, isr, offline)
	}
	p := n.meta.View().Topics["i"].Partitions[0]
	if leader, term := n.leaderOf(&p); leader != 1 || term != p.LeaderTerm {
		t.Errorf("leaderOf = %d at %d, want group 0's 1 at %d", leader, term, p.LeaderTerm)
	}
}

func describePartitions(t *testing.T, n *Node, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	return result(t, n.serveDescribeTopicPartitions(nil, &kafka.Request{Body: req})).(*kmsg.DescribeTopicPartitionsResponse)
}

// DescribeTopicPartitions shows an ISR partition's ISR and ELR (KIP-966)
// and pages through topics with its cursor.
func TestDescribeTopicPartitions_ISRAndELR(t *testing.T) {
	n := newISRUnitNode(t, map[string]string{"min.insync.replicas": "2"})
	ref := isrRef(t, n)
	epochOfBroker := func(id uint64) uint64 { return brokerEpochIn(n.meta.View(), id) }
	applyMeta(t, n, &coordinator.Command{UpdateFeatures: &coordinator.UpdateFeatures{EligibleLeaderReplicas: true}},
		&coordinator.Command{AlterPartition: &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{{
			Group: ref.Partition.Group, Leader: 1, LeaderEpoch: int32(ref.Partition.LeaderTerm), PartitionEpoch: ref.Partition.PartitionEpoch,
			ISR: []coordinator.ISRMember{{ID: 1, BrokerEpoch: epochOfBroker(1)}},
		}}}})
	p := n.meta.View().Topics["i"].Partitions[0]
	if len(p.ELR) == 0 {
		t.Fatalf("the coordinator put no replica in the ELR of %+v: the test needs one", p)
	}
	resp := describePartitions(t, n, 0, nil, "i", "nope")
	if len(resp.Topics) != 2 || resp.NextCursor != nil {
		t.Fatalf("%d topics, cursor %+v; want i and nope, no cursor", len(resp.Topics), resp.NextCursor)
	}
	if got := resp.Topics[1]; *got.Topic != "nope" || got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic %s answered %v, want UNKNOWN_TOPIC_OR_PARTITION", *got.Topic, kerr.ErrorForCode(got.ErrorCode))
	}
	dp := resp.Topics[0].Partitions[0]
	wantELR := make([]int32, 0, len(p.ELR))
	for _, id := range p.ELR {
		wantELR = append(wantELR, int32(id))
	}
	if dp.LeaderID != 1 || !slices.Equal(dp.ISR, []int32{1}) || !slices.Equal(dp.EligibleLeaderReplicas, wantELR) {
		t.Errorf("partition leader %d isr %v elr %v, want leader 1, isr [1], elr %v", dp.LeaderID, dp.ISR, dp.EligibleLeaderReplicas, wantELR)
	}

	first := describePartitions(t, n, 1, nil)
	if len(first.Topics) != 1 || *first.Topics[0].Topic != "i" || first.NextCursor == nil || first.NextCursor.Topic != "t" {
		t.Fatalf("first page %+v, want topic i and a cursor at t", first)
	}
	c := &kmsg.DescribeTopicPartitionsRequestCursor{Topic: first.NextCursor.Topic, Partition: first.NextCursor.Partition}
	second := describePartitions(t, n, 1, c)
	if len(second.Topics) != 1 || *second.Topics[0].Topic != "t" || len(second.Topics[0].Partitions) != 1 || second.NextCursor != nil {
		t.Fatalf("second page %+v, want topic t's partition and no cursor", second)
	}
}

// ISR changes count only within an epoch this node leads: a new epoch or
// another node's leadership is no change.
func TestISRReplication_CountsISRChangesOfItsEpoch(t *testing.T) {
	r := &isrReplication{}
	st := func(leader uint64, epoch int32, ids ...uint64) isr.State {
		return isr.State{Leader: leader, LeaderEpoch: epoch, ISR: ids}
	}
	for i, c := range []struct {
		s               isr.State
		changed, expand bool
	}{
		{st(1, 1, 1, 2, 3), false, false}, // first state
		{st(1, 1, 1, 2), true, false},     // shrink
		{st(1, 1, 1, 2), false, false},    // the same again
		{st(1, 1, 1, 2, 3), true, true},   // expand
		{st(1, 2, 1, 3), false, false},    // a new epoch
		{st(2, 3, 2, 3), false, false},    // another leader
		{st(2, 3, 2), false, false},       // its shrink is not ours
	} {
		if changed, expand := r.isrChange(c.s, 1); changed != c.changed || expand != c.expand {
			t.Errorf("step %d (%+v): changed %v expand %v, want %v %v", i, c.s, changed, expand, c.changed, c.expand)
		}
	}
}

// Eligible is "registered at that broker epoch and alive" in the node's
// metadata; BrokerEpoch is the node's own epoch there.
func TestISRNode_EligibleAndBrokerEpoch(t *testing.T) {
	n := newISRUnitNode(t, nil)
	e2 := brokerEpochIn(n.meta.View(), 2)
	if e2 == 0 || n.brokerEpoch() != brokerEpochIn(n.meta.View(), 1) || n.brokerEpoch() == 0 {
		t.Fatalf("broker epochs: node 2 %d, self %d; want both set", e2, n.brokerEpoch())
	}
	if !n.isrEligible(2, e2) {
		t.Error("an alive broker at its epoch is not eligible")
	}
	if n.isrEligible(2, e2-1) || n.isrEligible(9, 0) {
		t.Error("a stale broker epoch or an unknown broker is eligible")
	}
	applyMeta(t, n, &coordinator.Command{SetAlive: &coordinator.SetAlive{ID: 2, Alive: false}})
	if n.isrEligible(2, e2) {
		t.Error("a fenced (dead) broker is eligible")
	}
}

// Once the node's ISR side closed, a proposal's channel closes at once
// without a result (the isr leader drops it rather than resend), and it
// starts nothing that Close would have to wait for.
func TestISRNode_ProposeAfterCloseFails(t *testing.T) {
	n := newISRUnitNode(t, nil)
	n.closeISR()
	select {
	case res, ok := <-n.proposeAlter(coordinator.AlterPartitionItem{Group: 7}):
		if ok {
			t.Errorf("result %+v after close, want the channel closed without one", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the channel of a proposal after close stays open")
	}
	if _, err := n.isrManager(); !errors.Is(err, isr.ErrClosed) {
		t.Errorf("manager after close: %v, want isr.ErrClosed", err)
	}
}
