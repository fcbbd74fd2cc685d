package isr

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// t0 is the fake clock's start; Kafka's MockTime starts well above 0 too,
// so that 0 can mean "never".
var t0 = time.Unix(1_700_000_000, 0)

const lag = 30 * time.Second

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func fetchAt(offset, logStart int64, now time.Time) fetch {
	return fetch{replica: 2, brokerEpoch: 1, offset: offset, logStart: logStart, time: now}
}

func mustUpdate(t *testing.T, r replicaState, f fetch, leaderLEO int64) replicaState {
	t.Helper()
	n, err := r.updateFetch(f, leaderLEO)
	if err != nil {
		t.Fatalf("updateFetch: %v", err)
	}
	return n
}

func wantState(t *testing.T, got replicaState, logStart, leo int64, caughtUp time.Time, lastLeaderLEO int64, lastFetch time.Time) {
	t.Helper()
	if got.logStart != logStart || got.leo != leo || !got.lastCaughtUpTime.Equal(caughtUp) ||
		got.lastFetchLeaderLEO != lastLeaderLEO || !got.lastFetchTime.Equal(lastFetch) {
		t.Fatalf("state %+v, want logStart %d leo %d caughtUp %v lastFetchLeaderLEO %d lastFetch %v",
			got, logStart, leo, caughtUp, lastLeaderLEO, lastFetch)
	}
}

// Kafka's ReplicaTest.testUpdateFetchState: caught up at the previous
// fetch's time when this fetch reached the LEO seen then, at this fetch's
// time when it reached the LEO now.
func TestReplicaState_UpdateFetch(t *testing.T) {
	r := newReplicaState()
	r = mustUpdate(t, r, fetchAt(5, 1, at(1)), 10)
	wantState(t, r, 1, 5, time.Time{}, 10, at(1))
	r = mustUpdate(t, r, fetchAt(10, 2, at(2)), 15)
	wantState(t, r, 2, 10, at(1), 15, at(2))
	r = mustUpdate(t, r, fetchAt(15, 3, at(3)), 15)
	wantState(t, r, 3, 15, at(3), 15, at(3))
}

// A fetch below both LEOs gives no credit, and lastCaughtUpTime never
// moves back.
func TestReplicaState_UpdateFetchBehindKeepsCredit(t *testing.T) {
	r := mustUpdate(t, newReplicaState(), fetchAt(10, 0, at(1)), 10)
	r = mustUpdate(t, r, fetchAt(12, 0, at(2)), 20)
	r = mustUpdate(t, r, fetchAt(14, 0, at(3)), 30)
	wantState(t, r, 0, 14, at(1), 30, at(3))
}

// Kafka's four testResetReplicaState* cases.
func TestReplicaState_Reset(t *testing.T) {
	base := mustUpdate(t, newReplicaState(), fetchAt(10, 1, at(1)), 10)
	now := at(100)
	cases := []struct {
		name              string
		newLeader, inSync bool
		logStart, leo     int64
		caughtUp          time.Time
		lastLeaderLEO     int64
		lastFetch         time.Time
		brokerEpoch       uint64
	}{
		{"re-elected, in sync", false, true, 1, 10, now, 11, now, 1},
		{"re-elected, not in sync", false, false, 1, 10, time.Time{}, 11, time.Time{}, 1},
		{"new leader, in sync", true, true, -1, -1, now, -1, time.Time{}, 0},
		{"new leader, not in sync", true, false, -1, -1, time.Time{}, -1, time.Time{}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := base.reset(now, 11, c.newLeader, c.inSync)
			wantState(t, got, c.logStart, c.leo, c.caughtUp, c.lastLeaderLEO, c.lastFetch)
			if got.brokerEpoch != c.brokerEpoch {
				t.Fatalf("broker epoch %d, want %d", got.brokerEpoch, c.brokerEpoch)
			}
		})
	}
}

// Kafka's testIsCaughtUpWhenReplicaIsCaughtUpToLogEnd and
// testIsCaughtUpWhenReplicaIsNotCaughtUpToLogEnd.
func TestReplicaState_IsCaughtUp(t *testing.T) {
	r := newReplicaState()
	if r.isCaughtUp(10, t0, lag) {
		t.Fatal("a replica that never fetched is caught up")
	}
	atEnd := mustUpdate(t, r, fetchAt(10, 1, t0), 10)
	if !atEnd.isCaughtUp(10, t0, lag) || !atEnd.isCaughtUp(10, t0.Add(lag+time.Millisecond), lag) {
		t.Fatal("a replica at the leader's LEO is not caught up")
	}
	behind := mustUpdate(t, r, fetchAt(5, 1, t0), 10)
	if behind.isCaughtUp(10, t0, lag) {
		t.Fatal("a replica that never reached the LEO is caught up")
	}
	behind = mustUpdate(t, behind, fetchAt(10, 1, t0), 15)
	if !behind.isCaughtUp(16, t0, lag) {
		t.Fatal("a replica that reached the previous fetch's LEO is not caught up")
	}
	if behind.isCaughtUp(16, t0.Add(lag+time.Millisecond), lag) {
		t.Fatal("a replica is caught up past the lag time")
	}
}

// Kafka's testFenceStaleUpdates: a fetch at an older broker epoch is
// refused and changes nothing; a fetch naming no epoch is accepted.
func TestReplicaState_FencesStaleBrokerEpoch(t *testing.T) {
	f := func(epoch uint64, ms int64) fetch {
		return fetch{replica: 2, brokerEpoch: epoch, offset: 5, logStart: 2, time: at(ms)}
	}
	r := mustUpdate(t, newReplicaState(), f(2, 1), 10)
	r = mustUpdate(t, r, f(3, 2), 10)
	n, err := r.updateFetch(f(1, 3), 10)
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("stale broker epoch: err %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if n != r {
		t.Fatalf("a refused fetch changed the state: %+v, was %+v", n, r)
	}
	n = mustUpdate(t, r, f(0, 4), 10)
	if n.brokerEpoch != 3 || !n.lastFetchTime.Equal(at(4)) {
		t.Fatalf("fetch without epoch: %+v", n)
	}
}
