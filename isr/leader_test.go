package isr

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
)

// fakeController answers proposals only when a test says so, and counts
// how many are unanswered, so that a test can catch two in flight.
type fakeController struct {
	t       *testing.T
	sent    []coordinator.AlterPartitionItem
	waiting []chan coordinator.ItemResult
}

func (c *fakeController) propose(it coordinator.AlterPartitionItem) <-chan coordinator.ItemResult {
	if len(c.waiting) > 0 {
		c.t.Errorf("AlterPartition %+v proposed while %d unanswered", it, len(c.waiting))
	}
	ch := make(chan coordinator.ItemResult, 1)
	c.sent = append(c.sent, it)
	c.waiting = append(c.waiting, ch)
	return ch
}

// answer answers the oldest unanswered proposal and hands the answer to
// l as the owner would, through alterDone.
func (c *fakeController) answer(l *leader, res coordinator.ItemResult, now time.Time) int64 {
	c.t.Helper()
	if len(c.waiting) == 0 {
		c.t.Fatal("no proposal to answer")
	}
	ch := c.waiting[0]
	c.waiting = c.waiting[1:]
	ch <- res
	done := l.alterDone()
	if done == nil {
		return l.hw
	}
	return l.handleAlterResult(<-done, now)
}

// commit answers the oldest proposal as group 0 applying it would.
func (c *fakeController) commit(l *leader, now time.Time) int64 {
	c.t.Helper()
	it := c.sent[len(c.sent)-len(c.waiting)]
	p := coordinator.Partition{Leader: it.Leader, LeaderTerm: uint64(it.LeaderEpoch), PartitionEpoch: it.PartitionEpoch + 1}
	for _, m := range it.ISR {
		p.ISR = append(p.ISR, m.ID)
	}
	return c.answer(l, coordinator.ItemResult{Group: it.Group, Partition: p}, now)
}

func (c *fakeController) fail(l *leader, code *kerr.Error, now time.Time) int64 {
	c.t.Helper()
	return c.answer(l, coordinator.ItemResult{Err: &coordinator.Error{Code: code, Msg: "test"}}, now)
}

func (c *fakeController) lastISR() []uint64 {
	var ids []uint64
	for _, m := range c.sent[len(c.sent)-1].ISR {
		ids = append(ids, m.ID)
	}
	return ids
}

type harness struct {
	t  *testing.T
	l  *leader
	c  *fakeController
	hw int64 // as the log would hold it
}

// newHarness makes node 1 lead epoch 5 of replicas with isr, its log at
// leo with HW 0, at t0.
func newHarness(t *testing.T, replicas, isr []uint64, minISR int, leo int64, eligible func(id, epoch uint64) bool) *harness {
	t.Helper()
	c := &fakeController{t: t}
	cfg := DefaultConfig()
	cfg.Self, cfg.Group, cfg.Propose, cfg.Eligible = 1, 7, c.propose, eligible
	l, err := newLeader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, l: l, c: c}
	hw, err := l.becomeLeader(Term{LeaderEpoch: 5, PartitionEpoch: 1, Replicas: replicas, ISR: isr, MinISR: minISR, BrokerEpoch: 100}, leo, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	h.setHW(hw)
	return h
}

// setHW applies a HW the leader returned, checking it never goes back.
func (h *harness) setHW(hw int64) {
	h.t.Helper()
	if hw < h.hw {
		h.t.Fatalf("HW moved back from %d to %d", h.hw, hw)
	}
	h.hw = hw
}

func (h *harness) fetch(id uint64, offset int64, now time.Time) {
	h.t.Helper()
	hw, err := h.l.followerFetch(fetch{replica: id, brokerEpoch: 1, offset: offset, time: now})
	if err != nil {
		h.t.Fatalf("fetch from %d at %d: %v", id, offset, err)
	}
	h.setHW(hw)
}

func (h *harness) wantHW(want int64) {
	h.t.Helper()
	if h.hw != want {
		h.t.Fatalf("HW %d, want %d", h.hw, want)
	}
}

func (h *harness) wantISR(committed, maximal []uint64) {
	h.t.Helper()
	if !sameIDs(h.l.isr, committed) || !sameIDs(h.l.maximalISR(), maximal) {
		h.t.Fatalf("ISR %v maximal %v, want %v and %v", h.l.isr, h.l.maximalISR(), committed, maximal)
	}
}

func sameIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func ids(v ...uint64) []uint64 { return v }

// The HW is the least LEO of the ISR, rises with each follower fetch and
// never goes back (Kafka's testHighWatermarkIncreasesWithFollowerFetch
// shape).
func TestLeader_HWFollowsSlowestISRMember(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2, 3), 1, 10, nil)
	h.wantHW(0) // followers' LEOs unknown after becoming leader
	h.fetch(2, 10, at(1))
	h.wantHW(0)
	h.fetch(3, 6, at(2))
	h.wantHW(6)
	h.setHW(h.l.appended(15, at(3)))
	h.wantHW(6)
	h.fetch(3, 12, at(4))
	h.wantHW(10)
	h.fetch(2, 15, at(5))
	h.fetch(3, 15, at(6))
	h.wantHW(15)
	// A follower whose LEO went back (it truncated) cannot pull the HW down.
	h.fetch(3, 8, at(7))
	h.wantHW(15)
}

// An ISR of one commits on append.
func TestLeader_SoleMemberCommitsOnAppend(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1), 1, 10, nil)
	h.wantHW(10)
	h.setHW(h.l.appended(12, at(1)))
	h.wantHW(12)
}

// KIP-966 strict min ISR: with the ISR below min.insync.replicas the HW
// does not move, not even on the leader's own append; it moves again
// once the ISR is back at the minimum.
func TestLeader_StrictMinISR(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1), 2, 10, nil)
	h.wantHW(0)
	h.setHW(h.l.appended(20, at(1)))
	h.wantHW(0)
	h.fetch(2, 20, at(2)) // proposes 2 in; pending additions do not count toward the minimum
	h.wantISR(ids(1), ids(1, 2))
	h.wantHW(0)
	h.setHW(h.c.commit(h.l, at(3)))
	h.wantISR(ids(1, 2), ids(1, 2))
	h.wantHW(20)
}

// min.insync.replicas above the replication factor counts as the
// replication factor (Kafka's effectiveMinIsr).
func TestLeader_MinISRCappedAtReplicationFactor(t *testing.T) {
	h := newHarness(t, ids(1, 2), ids(1, 2), 3, 10, nil)
	h.fetch(2, 10, at(1))
	h.wantHW(10)
	if !h.l.CanAcceptAcksAll() {
		t.Fatal("acks=all refused with the whole replica set in the ISR")
	}
}

// A follower outside the ISR that is caught up and eligible holds the HW
// back, so it is not left behind as it rejoins; an ineligible one does
// not (Kafka's shouldWaitForReplicaToJoinIsr).
func TestLeader_HWWaitsForCaughtUpEligibleReplica(t *testing.T) {
	for _, c := range []struct {
		name     string
		eligible bool
		want     int64
	}{{"eligible", true, 12}, {"ineligible", false, 15}} {
		t.Run(c.name, func(t *testing.T) {
			el := func(id, _ uint64) bool { return id != 3 || c.eligible }
			h := newHarness(t, ids(1, 2, 3), ids(1, 2), 1, 10, el)
			h.fetch(3, 10, at(1)) // caught up at the LEO
			h.l.pending = nil     // as if group 0 had refused the expansion
			h.c.waiting = nil
			h.setHW(h.l.appended(15, at(2)))
			h.fetch(2, 15, at(3))
			h.fetch(3, 12, at(4)) // still caught up: reached the LEO it saw before
			h.wantHW(c.want)
		})
	}
}

// Kafka's checkEnoughReplicasReachOffset and the NOT_ENOUGH_REPLICAS check
// of appendRecordsToLeader.
func TestLeader_AcksAll(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2, 3), 2, 10, nil)
	if !h.l.CanAcceptAcksAll() || h.l.acksAllRefusal() != nil {
		t.Fatal("acks=all refused with a full ISR")
	}
	h.fetch(2, 10, at(1))
	h.fetch(3, 10, at(1))
	if done, err := h.l.checkEnoughReplicasReachOffset(10); !done || err != nil {
		t.Fatalf("offset 10 below HW %d: done %v err %v", h.hw, done, err)
	}
	if done, _ := h.l.checkEnoughReplicasReachOffset(11); done {
		t.Fatal("offset 11 above the HW counts as done")
	}
	// 2 and 3 stop fetching; the ISR shrinks to the leader alone.
	h.setHW(h.l.appended(11, at(2)))
	if !h.l.maybeShrink(at(1).Add(lag + time.Millisecond)) {
		t.Fatal("no shrink proposed")
	}
	if !h.l.CanAcceptAcksAll() {
		t.Fatal("a pending shrink counted before it committed")
	}
	h.setHW(h.c.commit(h.l, at(1).Add(lag+time.Millisecond)))
	h.wantISR(ids(1), ids(1))
	if h.l.CanAcceptAcksAll() || !errors.Is(h.l.acksAllRefusal(), kerr.NotEnoughReplicas) {
		t.Fatal("acks=all accepted below min.insync.replicas")
	}
	if h.l.AfterAppendOK() {
		t.Fatal("AfterAppendOK with the ISR below the minimum")
	}
	h.wantHW(10) // strict min ISR: offset 10 never commits with ISR {1}
	h.l.hw = 11  // as if it had committed before the shrink
	if done, err := h.l.checkEnoughReplicasReachOffset(11); !done || !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
		t.Fatalf("done %v err %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", done, err)
	}
}

// A fetch from a node that is not a follower, or to a node not leading,
// is refused.
func TestLeader_FetchFromNonFollower(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2, 3), 1, 10, nil)
	if _, err := h.l.followerFetch(fetch{replica: 4, offset: 1, time: at(1)}); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("unknown replica: %v", err)
	}
	h.l.resign()
	if _, err := h.l.followerFetch(fetch{replica: 2, offset: 1, time: at(1)}); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("resigned leader: %v", err)
	}
}

// becomeLeader resets follower state as Kafka's makeLeader: ISR members
// are caught up now (so none is dropped before its first fetch), and an
// older epoch is refused.
func TestLeader_BecomeLeaderResets(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2), 1, 10, nil)
	if r := h.l.followers[2]; !r.lastCaughtUpTime.Equal(t0) || r.leo != unknownOffset {
		t.Fatalf("ISR member after becoming leader: %+v", *r)
	}
	if r := h.l.followers[3]; !r.lastCaughtUpTime.IsZero() {
		t.Fatalf("non-member after becoming leader: %+v", *r)
	}
	h.fetch(2, 10, at(1))
	// Re-elected in epoch 6 without having followed: LEO kept.
	if _, err := h.l.becomeLeader(Term{LeaderEpoch: 6, PartitionEpoch: 2, Replicas: ids(1, 2, 3), ISR: ids(1, 2), MinISR: 1}, 12, h.hw, at(2)); err != nil {
		t.Fatal(err)
	}
	if r := h.l.followers[2]; r.leo != 10 || r.lastFetchLeaderLEO != 12 || !r.lastCaughtUpTime.Equal(at(2)) {
		t.Fatalf("re-elected leader's follower: %+v", *r)
	}
	if h.l.epochStart != 12 {
		t.Fatalf("epoch start %d, want 12", h.l.epochStart)
	}
	if _, err := h.l.becomeLeader(Term{LeaderEpoch: 6, Replicas: ids(1, 2, 3), ISR: ids(1)}, 12, 0, at(3)); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("same epoch again: %v", err)
	}
}
