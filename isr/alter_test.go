package isr

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp: a follower that
// reached the LEO of its previous fetch stays in sync although more than
// the lag time passed since the leader started.
func TestLeader_NoShrinkIfPreviousFetchCaughtUp(t *testing.T) {
	h := newHarness(t, ids(1, 2), ids(1, 2), 1, 10, nil)
	h.fetch(2, 5, at(5000))
	h.wantHW(5)
	h.setHW(h.l.appended(15, at(10001)))
	h.fetch(2, 10, at(10001))
	h.wantHW(10)
	if got := h.l.followers[2].lastCaughtUpTime; !got.Equal(at(5000)) {
		t.Fatalf("lastCaughtUpTime %v, want the first fetch's", got)
	}
	if h.l.maybeShrink(at(5000).Add(lag)) || len(h.c.sent) != 0 {
		t.Fatal("shrank a follower caught up within the lag time")
	}
}

// Kafka's testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd.
func TestLeader_NoShrinkAtLogEnd(t *testing.T) {
	h := newHarness(t, ids(1, 2), ids(1, 2), 1, 10, nil)
	h.fetch(2, 10, t0)
	if h.l.maybeShrink(t0.Add(lag + time.Millisecond)) {
		t.Fatal("shrank a follower at the leader's LEO")
	}
}

// Kafka's testMaybeShrinkIsr shape: a follower silent for longer than the
// lag time is proposed out; the HW is unchanged until the shrink
// commits, then rises to the remaining members' LEO.
func TestLeader_ShrinkLaggingFollower(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2, 3), 1, 10, nil)
	h.fetch(2, 10, at(1))
	h.wantHW(0)
	if h.l.maybeShrink(t0.Add(lag)) {
		t.Fatal("shrank at exactly the lag time")
	}
	now := t0.Add(lag + time.Millisecond)
	if !h.l.maybeShrink(now) || !sameIDs(h.c.lastISR(), ids(1, 2)) {
		t.Fatalf("shrink proposed %v, want [1 2]", h.c.sent)
	}
	if it := h.c.sent[0]; it.LeaderEpoch != 5 || it.PartitionEpoch != 1 || it.Leader != 1 || it.Group != 7 ||
		it.ISR[0].BrokerEpoch != 100 || it.ISR[1].BrokerEpoch != 1 {
		t.Fatalf("proposal %+v", it)
	}
	h.wantISR(ids(1, 2, 3), ids(1, 2, 3))
	h.setHW(h.c.commit(h.l, now))
	h.wantISR(ids(1, 2), ids(1, 2))
	h.wantHW(10)
	if h.l.partitionEpoch != 2 {
		t.Fatalf("partition epoch %d, want 2", h.l.partitionEpoch)
	}
}

// A follower that catches up, joins, then lags behind leaves again.
func TestLeader_CatchUpThenLag(t *testing.T) {
	h := newHarness(t, ids(1, 2), ids(1), 1, 10, nil)
	h.wantHW(10)
	h.fetch(2, 4, at(1))
	if h.l.inFlight() {
		t.Fatal("proposed a follower below the HW")
	}
	h.fetch(2, 10, at(2))
	h.wantISR(ids(1), ids(1, 2))
	h.setHW(h.l.appended(20, at(3)))
	h.wantHW(10) // the pending member already holds the HW back
	h.setHW(h.c.commit(h.l, at(3)))
	h.wantISR(ids(1, 2), ids(1, 2))
	h.fetch(2, 20, at(4))
	h.wantHW(20)
	h.setHW(h.l.appended(30, at(5)))
	h.fetch(2, 25, at(6)) // behind: credit stays at at(4)
	if h.l.maybeShrink(at(4).Add(lag)) {
		t.Fatal("shrank within the lag time")
	}
	if !h.l.maybeShrink(at(4).Add(lag+time.Millisecond)) || !sameIDs(h.c.lastISR(), ids(1)) {
		t.Fatal("no shrink of the lagging follower")
	}
	h.setHW(h.c.commit(h.l, at(4).Add(lag+time.Millisecond)))
	h.wantISR(ids(1), ids(1))
	h.wantHW(30)
}

// A follower is proposed in only at or above the HW and this epoch's
// start, and only when eligible at its broker epoch.
func TestLeader_ExpandRules(t *testing.T) {
	cases := []struct {
		name     string
		hw, leo  int64 // the leader's, before the fetch
		offset   int64
		eligible bool
		want     bool
	}{
		{"at HW and epoch start", 10, 10, 10, true, true},
		{"below HW", 10, 12, 9, true, false},
		{"at HW below epoch start", 4, 10, 4, true, false},
		{"ineligible", 10, 10, 10, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			el := func(id, epoch uint64) bool { return c.eligible && epoch == 1 }
			h := newHarness(t, ids(1, 2), ids(1), 1, c.leo, el)
			h.l.hw = c.hw
			h.fetch(2, c.offset, at(1))
			if got := h.l.inFlight(); got != c.want {
				t.Fatalf("expansion proposed %v, want %v", got, c.want)
			}
		})
	}
}

// Kafka's testSingleInFlightAlterIsr, and an expand racing a shrink:
// while a shrink is pending the recovered follower is not proposed in;
// once it commits, the expansion goes out and counts at once.
func TestLeader_ExpandRacingShrink(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2, 3), 1, 10, nil)
	h.fetch(2, 10, at(1))
	now := t0.Add(lag + time.Millisecond)
	if !h.l.maybeShrink(now) {
		t.Fatal("no shrink")
	}
	h.fetch(3, 10, now) // caught up again, but a shrink is in flight
	if len(h.c.sent) != 1 {
		t.Fatalf("%d proposals in flight", len(h.c.sent))
	}
	if h.l.maybeShrink(now.Add(lag)) {
		t.Fatal("a second shrink while one is in flight")
	}
	h.setHW(h.c.commit(h.l, now))
	h.wantISR(ids(1, 2), ids(1, 2))
	h.wantHW(10)
	h.setHW(h.l.appended(12, now))
	h.fetch(2, 12, now)
	h.fetch(3, 10, now) // proposed in again
	h.wantISR(ids(1, 2), ids(1, 2, 3))
	h.wantHW(10)
	h.setHW(h.c.commit(h.l, now))
	h.wantISR(ids(1, 2, 3), ids(1, 2, 3))
}

// Kafka's handleAlterIsrFailure cases: an ineligible member rolls the
// expansion back at once; stale epochs keep it pending (still counted)
// until the next metadata update; any other error is sent again.
func TestLeader_AlterPartitionRefused(t *testing.T) {
	cases := []struct {
		code            *kerr.Error
		maximal         []uint64
		pendingAfter    bool
		proposalsBefore int // proposals sent by the answer
	}{
		{kerr.IneligibleReplica, ids(1), false, 1},
		{kerr.OperationNotAttempted, ids(1), false, 1},
		{kerr.InvalidUpdateVersion, ids(1, 2), true, 1},
		{kerr.FencedLeaderEpoch, ids(1, 2), true, 1},
		{kerr.NewLeaderElected, ids(1, 2), true, 1},
		{kerr.UnknownTopicOrPartition, ids(1, 2), true, 1},
		{kerr.UnknownServerError, ids(1, 2), true, 2},
		{kerr.RequestTimedOut, ids(1, 2), true, 2},
	}
	for _, c := range cases {
		t.Run(c.code.Message, func(t *testing.T) {
			h := newHarness(t, ids(1, 2), ids(1), 1, 10, nil)
			h.fetch(2, 10, at(1))
			h.wantISR(ids(1), ids(1, 2))
			h.setHW(h.c.fail(h.l, c.code, at(2)))
			h.wantISR(ids(1), c.maximal)
			if h.l.inFlight() != c.pendingAfter || len(h.c.sent) != c.proposalsBefore {
				t.Fatalf("pending %v, %d proposals", h.l.inFlight(), len(h.c.sent))
			}
			if c.proposalsBefore == 2 {
				h.setHW(h.c.commit(h.l, at(3)))
				h.wantISR(ids(1, 2), ids(1, 2))
			}
		})
	}
}

// A rolled-back expansion is proposed again on the next fetch; a stale
// one waits for the metadata update, which commits group 0's ISR and
// frees the way for the next proposal (Kafka: "retry on the next
// LeaderAndIsr").
func TestLeader_RetryAfterRefusal(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2), 1, 10, nil)
	h.fetch(3, 10, at(1))
	h.c.fail(h.l, kerr.IneligibleReplica, at(1))
	h.fetch(3, 10, at(2))
	if len(h.c.sent) != 2 || !sameIDs(h.c.lastISR(), ids(1, 2, 3)) {
		t.Fatalf("no retry after roll-back: %+v", h.c.sent)
	}
	h.c.fail(h.l, kerr.InvalidUpdateVersion, at(2))
	h.fetch(3, 10, at(3))
	if len(h.c.sent) != 2 {
		t.Fatal("proposed again before the metadata update")
	}
	// Group 0 had meanwhile dropped 2 (say, fenced): epoch 2, ISR {1}.
	h.setHW(h.l.updateMetadata(Term{LeaderEpoch: 5, PartitionEpoch: 2, Replicas: ids(1, 2, 3), ISR: ids(1), MinISR: 1, BrokerEpoch: 100}, at(4)))
	h.wantISR(ids(1), ids(1))
	h.fetch(3, 10, at(5))
	if it := h.c.sent[2]; len(h.c.sent) != 3 || it.PartitionEpoch != 2 || !sameIDs(h.c.lastISR(), ids(1, 3)) {
		t.Fatalf("proposal after metadata: %+v", h.c.sent)
	}
	// An older partition epoch changes nothing.
	h.l.updateMetadata(Term{LeaderEpoch: 5, PartitionEpoch: 1, Replicas: ids(1, 2, 3), ISR: ids(1, 2, 3), MinISR: 1}, at(6))
	h.wantISR(ids(1), ids(1, 3))
}

// An answer naming another leader epoch is ignored, and the proposal
// waits for the metadata that names it.
func TestLeader_AnswerOfOtherEpochIgnored(t *testing.T) {
	h := newHarness(t, ids(1, 2), ids(1), 1, 10, nil)
	h.fetch(2, 10, at(1))
	h.l.epoch = 6 // as if re-elected meanwhile without resetting
	h.c.commit(h.l, at(2))
	h.wantISR(ids(1), ids(1, 2))
	if !h.l.inFlight() || h.l.alterDone() != nil {
		t.Fatal("a stale answer was taken, or is still awaited")
	}
}

// A pending addition holds the HW back even when the new member is not
// caught up by the lag rule (its first fetch gives it no credit): the
// maximal ISR, not only caught-up replicas, bounds the HW.
func TestLeader_PendingAdditionHoldsHW(t *testing.T) {
	h := newHarness(t, ids(1, 2, 3), ids(1, 2), 1, 10, nil)
	h.fetch(2, 10, at(1))
	h.wantHW(10)
	h.setHW(h.l.appended(20, at(2)))
	h.fetch(3, 10, at(3))
	if h.l.followers[3].isCaughtUp(20, at(3), lag) {
		t.Fatal("test premise: follower 3 must not be caught up")
	}
	h.wantISR(ids(1, 2), ids(1, 2, 3))
	h.fetch(2, 20, at(4))
	h.wantHW(10)
	h.setHW(h.c.fail(h.l, kerr.IneligibleReplica, at(5)))
	h.wantHW(20) // rolled back: 3 no longer holds it
}
