package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// These tests serve Produce from fake replications (replication_fake_test.go):
// the broker's produce logic on its own, without raft or the network.

func produceOne(t *testing.T, n *Node, acks int16, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := result(t, n.produce(context.Background(), produceRequest("t", 0, acks, batch), ""))
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func wantCode(t *testing.T, sp kmsg.ProduceResponseTopicPartition, want *kerr.Error) {
	t.Helper()
	if sp.ErrorCode != want.Code {
		t.Fatalf("produce answered %v, want %v", kerr.ErrorForCode(sp.ErrorCode), want)
	}
}

func TestProduce_AcksAllAnswersCommittedOffsets(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	for i, want := range []int64{0, 2, 4} {
		sp := produceOne(t, n, -1, testBatch(t, -1, 0, 0, "a", "b"))
		if sp.ErrorCode != 0 || sp.BaseOffset != want {
			t.Fatalf("batch %d: %v at %d, want offset %d", i, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset, want)
		}
	}
	if got := f.log.HighWatermark(); got != 6 {
		t.Errorf("high watermark %d, want 6", got)
	}
}

// acks=all waits for the commit even when the offset is known earlier:
// the answer carries the committed result's offset.
func TestProduce_AcksAllWaitsForTheCommit(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	commit := make(chan struct{})
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return &fakeAppend{base: 7, committed: commit, result: partition.ProduceResult{Base: 9, Last: 9}}, nil
	}
	p := n.produce(context.Background(), produceRequest("t", 0, -1, testBatch(t, -1, 0, 0, "a")), "")
	close(commit)
	sp := result(t, p).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 || sp.BaseOffset != 9 {
		t.Fatalf("acks=all answered %v at %d, want the committed offset 9", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
}

// acks=1 answers once appended, with the offset the replication knows
// then, while the commit is still out.
func TestProduce_Acks1AnswersOnceAppended(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	never := make(chan struct{})
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return &fakeAppend{base: 7, committed: never}, nil
	}
	sp := produceOne(t, n, 1, testBatch(t, -1, 0, 0, "a"))
	if sp.ErrorCode != 0 || sp.BaseOffset != 7 {
		t.Fatalf("acks=1 answered %v at %d, want offset 7 before the commit", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
}

// When the replication cannot tell the offset at the appended stage
// (raft's projection dropped), acks=1 waits for the commit.
func TestProduce_Acks1WaitsForTheCommitWithoutAnOffset(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	commit := make(chan struct{})
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return &fakeAppend{base: -1, committed: commit, result: partition.ProduceResult{Base: 5, Last: 5}}, nil
	}
	p := n.produce(context.Background(), produceRequest("t", 0, 1, testBatch(t, -1, 0, 0, "a")), "")
	close(commit)
	sp := result(t, p).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 || sp.BaseOffset != 5 {
		t.Fatalf("acks=1 answered %v at %d, want the committed offset 5", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
}

func TestProduce_Acks0AppendsAndAnswersNothing(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	if resp := result(t, n.produce(context.Background(), produceRequest("t", 0, 0, testBatch(t, -1, 0, 0, "a")), "")); resp != nil {
		t.Fatalf("acks=0 got a response: %+v", resp)
	}
	if f.appends != 1 {
		t.Errorf("%d appends, want 1", f.appends)
	}
}

// A follower answers NOT_LEADER naming the leader, its epoch and its
// address (KIP-951), and appends nothing.
func TestProduce_NotLeaderNamesTheLeader(t *testing.T) {
	f := newFakeReplication(t, 1)
	f.setLeadership(leadership{Leader: 2, Epoch: 4})
	n := newUnitNode(t, "t", nil, f)
	resp := result(t, n.produce(context.Background(), produceRequest("t", 0, -1, testBatch(t, -1, 0, 0, "a")), "")).(*kmsg.ProduceResponse)
	sp := resp.Topics[0].Partitions[0]
	wantCode(t, sp, kerr.NotLeaderForPartition)
	if sp.CurrentLeader.LeaderID != 2 || sp.CurrentLeader.LeaderEpoch != 4 {
		t.Errorf("leader hint %d at %d, want 2 at 4", sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Port != 9093 {
		t.Errorf("endpoints %+v, want node 2 at port 9093", resp.Brokers)
	}
	if f.appends != 0 {
		t.Errorf("a follower appended %d batches", f.appends)
	}
}

// During an election the answer waits for its winner, and names it.
func TestProduce_DuringAnElectionNamesTheWinner(t *testing.T) {
	f := newFakeReplication(t, 1)
	f.setLeadership(leadership{Epoch: 4, Settling: true})
	n := newUnitNode(t, "t", nil, f)
	n.cfg.ElectionTicks = 1000 // a settle wait far longer than the test
	p := n.produce(context.Background(), produceRequest("t", 0, -1, testBatch(t, -1, 0, 0, "a")), "")
	f.waitSettling(t)
	f.setLeadership(leadership{Leader: 3, Epoch: 5})
	sp := result(t, p).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	wantCode(t, sp, kerr.NotLeaderForPartition)
	if sp.CurrentLeader.LeaderID != 3 || sp.CurrentLeader.LeaderEpoch != 5 {
		t.Errorf("leader hint %d at %d, want the election's winner 3 at 5", sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch)
	}
}

// A batch whose append is lost to a new leader is answered once the
// change settles, naming the new leader.
func TestProduce_LeadershipLostMidProduce(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	n.cfg.ElectionTicks = 1000
	commit := make(chan struct{})
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return &fakeAppend{base: -1, committed: commit, commitErr: fmt.Errorf("%w: test", errAppendLost)}, nil
	}
	p := n.produce(context.Background(), produceRequest("t", 0, -1, testBatch(t, -1, 0, 0, "a")), "")
	f.setLeadership(leadership{Epoch: 1, Settling: true})
	close(commit)
	f.waitSettling(t)
	f.setLeadership(leadership{Leader: 2, Epoch: 6})
	sp := result(t, p).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	wantCode(t, sp, kerr.NotLeaderForPartition)
	if sp.CurrentLeader.LeaderID != 2 || sp.CurrentLeader.LeaderEpoch != 6 || sp.BaseOffset != -1 {
		t.Errorf("leader hint %d at %d, base %d; want 2 at 6, base -1", sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch, sp.BaseOffset)
	}
}

// An idempotent retry is answered with the offsets and, on a
// LogAppendTime topic, the append time the batch got the first time.
func TestProduce_IdempotentRetryGetsTheFirstOutcome(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", map[string]string{"message.timestamp.type": "LogAppendTime"}, f)
	f.next = func(_ []byte, info partition.BatchInfo) (pendingAppend, error) {
		if !info.LogAppendTime() {
			t.Error("the batch was not stamped with LogAppendTime before its append")
		}
		return &fakeAppend{base: -1, result: partition.ProduceResult{Base: 3, Last: 4, MaxTimestamp: 12345, Duplicate: true}}, nil
	}
	sp := produceOne(t, n, -1, testBatch(t, 7, 0, 0, "a", "b"))
	if sp.ErrorCode != 0 || sp.BaseOffset != 3 || sp.LogAppendTime != 12345 {
		t.Fatalf("retry answered %v at %d, time %d; want offset 3, time 12345", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset, sp.LogAppendTime)
	}
}

// A batch the commit refuses (a sequence gap, found at apply) is answered
// with the refusal's code and message.
func TestProduce_RefusedAtCommit(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return &fakeAppend{base: -1, result: partition.ProduceResult{LogStart: 0, Err: kerr.OutOfOrderSequenceNumber}}, nil
	}
	sp := produceOne(t, n, -1, testBatch(t, 7, 0, 5, "a"))
	wantCode(t, sp, kerr.OutOfOrderSequenceNumber)
	if sp.ErrorMessage == nil || sp.BaseOffset != -1 {
		t.Errorf("message %v, base %d; want a message and base -1", sp.ErrorMessage, sp.BaseOffset)
	}
}

// A commit that does not come within the request's timeout is answered
// REQUEST_TIMED_OUT.
func TestProduce_TimesOutWaitingForTheCommit(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return &fakeAppend{base: -1, committed: make(chan struct{})}, nil
	}
	req := produceRequest("t", 0, -1, testBatch(t, -1, 0, 0, "a"))
	req.TimeoutMillis = 20
	sp := result(t, n.produce(context.Background(), req, "")).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	wantCode(t, sp, kerr.RequestTimedOut)
}

// Appending after leadership moved: the replication refuses with
// errNotLeader, and the answer names the new leader once settled.
func TestProduce_AppendRefusedAsNotLeader(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return nil, fmt.Errorf("%w: moved", errNotLeader)
	}
	sp := produceOne(t, n, -1, testBatch(t, -1, 0, 0, "a"))
	wantCode(t, sp, kerr.NotLeaderForPartition)
}

// The projection gives exact offsets for the batches of one term while
// nothing failed, and gives up (acks=1 then waits for the commit) on a
// new term, an idempotent batch, or with proposals of an old projection
// still in flight.
func TestProjection_ExactOnlyWhileItCanBe(t *testing.T) {
	end := int64(10)
	endFn := func() int64 { return end }
	var pj projection
	if _, ok := pj.project(2, false, endFn, 1, false); ok {
		t.Fatal("projected with entries not yet applied")
	}
	if base, ok := pj.project(2, true, endFn, 3, false); !ok || base != 10 {
		t.Fatalf("first batch of the term at %d (%v), want 10", base, ok)
	}
	if base, ok := pj.project(2, false, endFn, 2, false); !ok || base != 13 {
		t.Fatalf("second batch at %d (%v), want 13 (its own proposals need not be applied)", base, ok)
	}
	if base, ok := pj.project(2, true, endFn, 1, true); ok || base != 15 {
		t.Fatalf("idempotent batch at %d (%v), want 15 and not exact", base, ok)
	}
	if _, ok := pj.project(2, true, endFn, 1, false); !ok {
		t.Fatal("after an idempotent batch, with nothing in flight and all applied, the projection must start again")
	}
	pj.inflight.Add(1)
	if _, ok := pj.project(3, true, endFn, 1, false); ok {
		t.Fatal("projected in a new term with an old proposal in flight")
	}
	pj.inflight.Add(-1)
	end = 20
	if base, ok := pj.project(3, true, endFn, 1, false); !ok || base != 20 {
		t.Fatalf("new term at %d (%v), want the log end 20", base, ok)
	}
	pj.invalidate()
	pj.inflight.Add(1)
	if _, ok := pj.project(3, true, endFn, 1, false); ok {
		t.Fatal("projected after invalidate with a proposal in flight")
	}
}

// Append learns whether the producer waits for the commit, so that a mode
// can refuse acks=all before appending (ISR's NOT_ENOUGH_REPLICAS), and
// that refusal reaches the client as it is.
func TestProduce_AcksAllReachesAppendAndItsRefusal(t *testing.T) {
	f := newFakeReplication(t, 1)
	n := newUnitNode(t, "t", nil, f)
	for _, acks := range []int16{1, -1, 0} {
		result(t, n.produce(context.Background(), produceRequest("t", 0, acks, testBatch(t, -1, 0, 0, "a")), ""))
	}
	if got, want := fmt.Sprint(f.acksAll), "[false true false]"; got != want {
		t.Fatalf("Append saw acksAll %s for acks 1, -1, 0; want %s", got, want)
	}
	f.next = func([]byte, partition.BatchInfo) (pendingAppend, error) {
		return nil, fmt.Errorf("isr below min: %w", kerr.NotEnoughReplicas)
	}
	wantCode(t, produceOne(t, n, -1, testBatch(t, -1, 0, 0, "a")), kerr.NotEnoughReplicas)
}
