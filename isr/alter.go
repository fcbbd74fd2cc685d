package isr

import (
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/coordinator"
)

// proposal is the AlterPartition in flight (Kafka's PendingExpandIsr and
// PendingShrinkIsr).
type proposal struct {
	expand bool
	item   coordinator.AlterPartitionItem
	target []uint64
	// done yields group 0's answer; nil once the answer said to wait for
	// the next metadata update (stale epochs), which drops the proposal.
	done <-chan coordinator.ItemResult
}

// maximalISR is Kafka's maximalIsr: while an addition is pending it
// already counts, so the HW waits for the new member (stricter than the
// committed ISR, so safe whatever group 0 answers); a removal counts only
// once committed, since until then the removed member may still be in
// the ISR that group 0 would elect from.
func (l *leader) maximalISR() []uint64 {
	if l.pending != nil && l.pending.expand {
		return l.pending.target
	}
	return l.isr
}

// maybeShrink proposes to drop every ISR follower that has not been caught
// up for ReplicaLagTimeMax (Kafka's maybeShrinkIsr and
// getOutOfSyncReplicas [KP 1319]); the owner calls it every half lag time
// ("isr-expiration" [KRM 415]). It reports whether it proposed.
func (l *leader) maybeShrink(now time.Time) bool {
	if !l.leading || l.pending != nil {
		return false
	}
	var keep []uint64
	for _, id := range l.isr {
		if id == l.cfg.Self || !l.outOfSync(id, now) {
			keep = append(keep, id)
		}
	}
	if len(keep) == len(l.isr) {
		return false
	}
	l.submit(false, keep)
	return true
}

// outOfSync is Kafka's isFollowerOutOfSync: a member the leader has no
// state for counts as out of sync.
func (l *leader) outOfSync(id uint64, now time.Time) bool {
	r, ok := l.followers[id]
	return !ok || !r.isCaughtUp(l.leo, now, l.cfg.ReplicaLagTimeMax)
}

// maybeExpand proposes follower id into the ISR if it has caught up: its
// LEO is at least the HW and at least this epoch's start (so it holds
// every record of this leader's epoch below the HW), and it is eligible
// at the broker epoch it fetched with (Kafka's maybeExpandIsr,
// isFollowerInSync [KP 1061], canAddReplicaToIsr [KP 1068]).
func (l *leader) maybeExpand(id uint64) bool {
	r, ok := l.followers[id]
	if !ok || l.pending != nil || slices.Contains(l.isr, id) {
		return false
	}
	if r.leo < l.hw || r.leo < l.epochStart || !l.eligible(id, r.brokerEpoch) {
		return false
	}
	l.submit(true, l.inReplicaOrder(append(slices.Clone(l.isr), id)))
	return true
}

func (l *leader) inReplicaOrder(ids []uint64) []uint64 {
	out := make([]uint64, 0, len(ids))
	for _, id := range l.replicas {
		if slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

// submit proposes target as the ISR, naming each member with the broker
// epoch it last fetched at (KIP-903), so that group 0 refuses a member
// that restarted since.
func (l *leader) submit(expand bool, target []uint64) {
	item := coordinator.AlterPartitionItem{
		Group:          l.cfg.Group,
		Leader:         l.cfg.Self,
		LeaderEpoch:    l.epoch,
		PartitionEpoch: l.partitionEpoch,
	}
	for _, id := range target {
		item.ISR = append(item.ISR, coordinator.ISRMember{ID: id, BrokerEpoch: l.brokerEpochOf(id)})
	}
	l.pending = &proposal{expand: expand, item: item, target: target}
	l.send()
	l.logger.Info("isr: proposing", "group", l.cfg.Group, "isr", target, "committed", l.isr, "expand", expand)
}

func (l *leader) send() { l.pending.done = l.cfg.Propose(l.pending.item) }

func (l *leader) brokerEpochOf(id uint64) uint64 {
	if id == l.cfg.Self {
		return l.selfEpoch
	}
	if r, ok := l.followers[id]; ok {
		return r.brokerEpoch
	}
	return 0
}

// alterDone is the channel the answer to the proposal in flight comes on,
// nil (never ready) when none is awaited; the owner selects on it and
// hands what it receives to handleAlterResult.
func (l *leader) alterDone() <-chan coordinator.ItemResult {
	if l.pending == nil {
		return nil
	}
	return l.pending.done
}

// inFlight reports whether an AlterPartition is pending.
func (l *leader) inFlight() bool { return l.pending != nil }

// handleAlterResult takes group 0's answer to the proposal in flight, as
// Kafka's handleAlterPartitionUpdate and handleAlterPartitionError
// [KP 1906–1965], and returns the HW to apply.
func (l *leader) handleAlterResult(res coordinator.ItemResult, now time.Time) int64 {
	if l.pending == nil || l.pending.done == nil {
		return l.hw
	}
	if res.Err != nil {
		l.alterFailed(res.Err)
	} else {
		l.alterApplied(res.Partition)
	}
	hw, _ := l.maybeIncrementHW(now)
	return hw
}

// alterApplied commits group 0's ISR. An answer of another leader epoch
// or an older partition epoch is ignored, and the proposal waits for the
// metadata update that will follow.
func (l *leader) alterApplied(p coordinator.Partition) {
	if int64(p.LeaderTerm) != int64(l.epoch) || p.PartitionEpoch < l.partitionEpoch {
		l.pending.done = nil
		return
	}
	l.isr = slices.Clone(p.ISR)
	l.partitionEpoch = p.PartitionEpoch
	l.pending = nil
	l.logger.Info("isr: committed", "group", l.cfg.Group, "isr", l.isr, "partition_epoch", l.partitionEpoch)
}

// alterFailed follows Kafka's handleAlterPartitionError: an ineligible
// member (or an attempt group 0 did not make) rolls back to the
// committed ISR at once; stale epochs or a gone partition mean our view
// is old, so the proposal stays pending, still blocking others and still
// counting an addition, until the next metadata update replaces it;
// anything else (no group-0 leader, a timeout) is sent again.
func (l *leader) alterFailed(err error) {
	switch {
	case errors.Is(err, kerr.IneligibleReplica), errors.Is(err, kerr.OperationNotAttempted):
		l.logger.Info("isr: proposal refused, rolled back", "group", l.cfg.Group, "isr", l.isr, "err", err)
		l.pending = nil
	case errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.InvalidUpdateVersion),
		errors.Is(err, kerr.NewLeaderElected), errors.Is(err, kerr.UnknownTopicOrPartition):
		l.logger.Info("isr: proposal stale, waiting for metadata", "group", l.cfg.Group, "err", err)
		l.pending.done = nil
	default:
		l.logger.Warn("isr: proposal failed, retrying", "group", l.cfg.Group, "err", err)
		l.send()
	}
}
