package isr

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/internal/logging"
)

// Term is a leadership this node was given by group 0: the partition's
// state in the metadata when it names this node leader.
type Term struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []uint64 // the assignment, this node included
	ISR            []uint64 // committed by group 0
	// MinISR is the topic's min.insync.replicas.
	MinISR int
	// BrokerEpoch is this node's own broker epoch, which it names for
	// itself in AlterPartition.
	BrokerEpoch uint64
}

// leader is the leader side of one ISR-mode partition (Kafka's Partition
// while isLeader). See doc.go for its invariants.
type leader struct {
	cfg    Config
	logger *slog.Logger

	leading        bool
	epoch          int32
	partitionEpoch int32
	epochStart     int64 // the LEO when this epoch began
	replicas       []uint64
	minISR         int
	selfEpoch      uint64

	leo       int64 // the local log's end offset
	hw        int64
	isr       []uint64 // committed
	followers map[uint64]*replicaState
	pending   *proposal
}

func newLeader(cfg Config) (*leader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &leader{cfg: cfg, logger: logging.Discard(cfg.Logger), followers: map[uint64]*replicaState{}}, nil
}

// becomeLeader starts leading t's epoch with the local log at leo and hw,
// as Kafka's makeLeader does for a new leader epoch: this epoch starts at
// leo, every follower's state is reset (ISR members caught up now), and
// any proposal of an older epoch is forgotten, since group 0 will refuse
// it. It returns the HW to apply, which may have risen (an ISR of one).
func (l *leader) becomeLeader(t Term, leo, hw int64, now time.Time) (int64, error) {
	if l.leading && t.LeaderEpoch <= l.epoch {
		return l.hw, fmt.Errorf("become leader of epoch %d, leading %d: %w", t.LeaderEpoch, l.epoch, kerr.FencedLeaderEpoch)
	}
	wasLeading := l.leading
	l.leading, l.epoch, l.epochStart = true, t.LeaderEpoch, leo
	l.leo, l.hw = leo, hw
	l.pending = nil
	l.setTerm(t)
	l.resetFollowers(now, !wasLeading)
	l.logger.Info("isr: leading", "group", l.cfg.Group, "epoch", t.LeaderEpoch, "isr", t.ISR, "start", leo)
	hw, _ = l.maybeIncrementHW(now)
	return hw, nil
}

// setTerm takes the fields of t that group 0 may change without a new
// leader epoch.
func (l *leader) setTerm(t Term) {
	l.partitionEpoch = t.PartitionEpoch
	l.replicas = slices.Clone(t.Replicas)
	l.isr = slices.Clone(t.ISR)
	l.minISR = t.MinISR
	l.selfEpoch = t.BrokerEpoch
}

func (l *leader) resetFollowers(now time.Time, newLeader bool) {
	old := l.followers
	l.followers = make(map[uint64]*replicaState, len(l.replicas))
	for _, id := range l.replicas {
		if id == l.cfg.Self {
			continue
		}
		r, ok := old[id]
		if !ok {
			s := newReplicaState()
			r = &s
		}
		n := r.reset(now, l.leo, newLeader, slices.Contains(l.isr, id))
		l.followers[id] = &n
	}
}

// resign stops leading: whatever is in flight no longer concerns us.
func (l *leader) resign() {
	l.leading = false
	l.pending = nil
}

// updateMetadata takes group 0's newer state of the partition within the
// epoch this node leads (Kafka's makeLeader when the leader epoch did not
// change): the published ISR is committed, and a proposal in flight is
// dropped, since its answer is now out of date either way; the next
// shrink or expand check proposes again if still needed. A stale
// partition epoch changes nothing, as in Kafka.
func (l *leader) updateMetadata(t Term, now time.Time) int64 {
	if !l.leading || t.LeaderEpoch != l.epoch || t.PartitionEpoch < l.partitionEpoch {
		return l.hw
	}
	l.setTerm(t)
	l.pending = nil
	l.addFollowers()
	hw, _ := l.maybeIncrementHW(now)
	return hw
}

// addFollowers gives replicas added by a reassignment a state with no
// fetch, and drops the state of replicas no longer assigned.
func (l *leader) addFollowers() {
	for _, id := range l.replicas {
		if _, ok := l.followers[id]; !ok && id != l.cfg.Self {
			s := newReplicaState()
			l.followers[id] = &s
		}
	}
	for id := range l.followers {
		if !slices.Contains(l.replicas, id) {
			delete(l.followers, id)
		}
	}
}

// appended records the local log's new end offset after an append, and
// returns the HW to apply (Kafka's appendRecordsToLeader ends with
// maybeIncrementLeaderHW: an ISR of one commits at once).
func (l *leader) appended(leo int64, now time.Time) int64 {
	l.leo = max(l.leo, leo)
	hw, _ := l.maybeIncrementHW(now)
	return hw
}

// followerFetch records a fetch from a follower, as Kafka's
// updateFollowerFetchState: update its state, maybe propose it into the
// ISR, and, if its LEO moved, maybe raise the HW, which it returns.
func (l *leader) followerFetch(f fetch) (int64, error) {
	r, ok := l.followers[f.replica]
	if !l.leading || !ok {
		return l.hw, fmt.Errorf("fetch from %d, which is not a follower here: %w", f.replica, kerr.NotLeaderForPartition)
	}
	prev := r.leo
	n, err := r.updateFetch(f, l.leo)
	if err != nil {
		return l.hw, err
	}
	*r = n
	l.maybeExpand(f.replica)
	if r.leo == prev {
		return l.hw, nil
	}
	hw, _ := l.maybeIncrementHW(f.time)
	return hw, nil
}

// effectiveMinISR is Kafka's effectiveMinIsr: min.insync.replicas above
// the replication factor could never be met.
func (l *leader) effectiveMinISR() int {
	return max(1, min(l.minISR, len(l.replicas)))
}

// underMinISR is Kafka's isUnderMinIsr, over the committed ISR.
func (l *leader) underMinISR() bool { return len(l.isr) < l.effectiveMinISR() }

// maybeIncrementHW is Kafka's maybeIncrementLeaderHW [KP 1174–1220]: the
// least LEO over the maximal ISR and over every follower that is caught
// up and eligible, so that one about to rejoin is not left below the HW.
// Under the minimum ISR the HW stays (KIP-966's strict min ISR: the
// replicas that left then still hold everything below it, which is what
// makes them eligible leaders). It returns the HW and whether it rose.
func (l *leader) maybeIncrementHW(now time.Time) (int64, bool) {
	if !l.leading || l.underMinISR() {
		return l.hw, false
	}
	hw := l.leo
	maximal := l.maximalISR()
	for id, r := range l.followers {
		if r.leo < hw && (slices.Contains(maximal, id) || l.waitsToJoin(id, r, now)) {
			hw = r.leo
		}
	}
	if hw <= l.hw {
		return l.hw, false
	}
	l.hw = hw
	return hw, true
}

// waitsToJoin is Kafka's shouldWaitForReplicaToJoinIsr.
func (l *leader) waitsToJoin(id uint64, r *replicaState, now time.Time) bool {
	return r.isCaughtUp(l.leo, now, l.cfg.ReplicaLagTimeMax) && l.eligible(id, r.brokerEpoch)
}

func (l *leader) eligible(id, brokerEpoch uint64) bool {
	return l.cfg.Eligible == nil || l.cfg.Eligible(id, brokerEpoch)
}

// CanAcceptAcksAll reports whether an acks=all produce may be appended:
// Kafka refuses it with NOT_ENOUGH_REPLICAS, before appending, while the
// committed ISR is below the effective minimum [KP 1375–1390].
func (l *leader) CanAcceptAcksAll() bool { return !l.underMinISR() }

// AfterAppendOK reports whether an acks=all produce whose records are
// below the HW may be acknowledged; if not, it gets
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (its records stay in the log). Kafka's
// checkEnoughReplicasReachOffset counts the maximal ISR here
// [KP 1111–1145].
func (l *leader) AfterAppendOK() bool { return len(l.maximalISR()) >= l.effectiveMinISR() }

// checkEnoughReplicasReachOffset answers an acks=all produce waiting for
// its last offset + 1 (required) to commit: done once the HW reached it,
// with kerr.NotEnoughReplicasAfterAppend if the ISR fell short meanwhile.
func (l *leader) checkEnoughReplicasReachOffset(required int64) (bool, error) {
	if l.hw < required {
		return false, nil
	}
	if !l.AfterAppendOK() {
		return true, kerr.NotEnoughReplicasAfterAppend
	}
	return true, nil
}

// acksAllRefusal is the error for an acks=all produce that may not be
// appended, nil if it may.
func (l *leader) acksAllRefusal() error {
	if l.CanAcceptAcksAll() {
		return nil
	}
	return fmt.Errorf("isr %v below min.insync.replicas %d: %w", l.isr, l.effectiveMinISR(), kerr.NotEnoughReplicas)
}
