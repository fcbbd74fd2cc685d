package isr

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// unknownOffset is Kafka's UnifiedLog.UnknownOffset: no fetch seen yet.
const unknownOffset int64 = -1

// replicaState is what the leader knows of one follower (Kafka's
// ReplicaState). A zero time means never; brokerEpoch 0 means unknown,
// since group 0's broker epochs are raft indexes, all above 0.
type replicaState struct {
	leo                int64 // the offset of its latest fetch
	logStart           int64
	lastFetchTime      time.Time
	lastFetchLeaderLEO int64 // the leader's LEO at that fetch
	lastCaughtUpTime   time.Time
	brokerEpoch        uint64
}

func newReplicaState() replicaState {
	return replicaState{leo: unknownOffset, logStart: unknownOffset}
}

// updateFetch records a fetch as Kafka's Replica.updateFetchStateOrThrow
// does (ISR-NOTES §1.2, [KR 96–140]). Crediting the previous fetch time
// when this fetch reached the LEO seen then keeps a follower in sync
// under a steady trickle of appends, where it is never exactly at the
// leader's LEO when it fetches.
func (r replicaState) updateFetch(f fetch, leaderLEO int64) (replicaState, error) {
	if f.brokerEpoch != 0 && r.brokerEpoch > f.brokerEpoch {
		// KIP-903: a fetch from before the follower's restart must not
		// move the state its new incarnation reported.
		return r, fmt.Errorf("fetch at broker epoch %d, follower is at %d: %w", f.brokerEpoch, r.brokerEpoch, kerr.NotLeaderForPartition)
	}
	caughtUp := r.lastCaughtUpTime
	switch {
	case f.offset >= leaderLEO:
		caughtUp = later(caughtUp, f.time)
	case f.offset >= r.lastFetchLeaderLEO:
		caughtUp = later(caughtUp, r.lastFetchTime)
	}
	n := replicaState{
		leo:                f.offset,
		logStart:           f.logStart,
		lastFetchTime:      f.time,
		lastFetchLeaderLEO: max(leaderLEO, r.lastFetchLeaderLEO),
		lastCaughtUpTime:   caughtUp,
		brokerEpoch:        r.brokerEpoch,
	}
	if f.brokerEpoch != 0 {
		n.brokerEpoch = f.brokerEpoch
	}
	return n, nil
}

// reset is Kafka's Replica.resetReplicaState, run when this node starts
// leading an epoch. ISR members count as caught up now, so that a new
// leader does not drop them before their first fetch; others get no
// credit, so that they do not hold the HW back. A node that was not
// leading forgets what it knew: its followers' state may have changed
// under another leader.
func (r replicaState) reset(now time.Time, leaderLEO int64, newLeader, inSync bool) replicaState {
	var caughtUp time.Time
	if inSync {
		caughtUp = now
	}
	if newLeader {
		n := newReplicaState()
		n.lastFetchLeaderLEO = unknownOffset
		n.lastCaughtUpTime = caughtUp
		return n
	}
	r.lastFetchLeaderLEO = leaderLEO
	r.lastFetchTime = caughtUp
	r.lastCaughtUpTime = caughtUp
	return r
}

// isCaughtUp is Kafka's ReplicaState.isCaughtUp [KR 67–72].
func (r replicaState) isCaughtUp(leaderLEO int64, now time.Time, maxLag time.Duration) bool {
	if r.leo == leaderLEO {
		return true
	}
	return !r.lastCaughtUpTime.IsZero() && now.Sub(r.lastCaughtUpTime) <= maxLag
}

// fetch is one follower fetch as the leader sees it.
type fetch struct {
	replica     uint64
	brokerEpoch uint64 // 0: not sent
	offset      int64  // the fetch offset: the follower's LEO
	logStart    int64
	time        time.Time
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
