package coordinator

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Unclean recovery, after KIP-966's second part: a partition can be left
// with no leader and no replica known to hold every committed record (no
// ISR, ELR or last known leader), when its last leader resigned because
// its log lost durable records (resignLostData), or every replica
// restarted uncleanly, the last leader among them
// (Broker.RestartForgetsLeader: a disk may cut synced records at a log's
// end in a way no check finds, so a restarted last leader's log is
// compared with the others', not trusted). Kafka then waits for an operator's unclean
// election, which takes any replica, however short its log. Here every
// live replica reports where its log ends (AlterPartitionItem.LogEnd),
// and once all of them have, the one whose log ends at the newest epoch,
// and then furthest, leads, Recovering as an unclean leader does: a
// record acknowledged to acks=all was on min.insync.replicas replicas,
// and the newest and longest log holds it unless those replicas all lost
// it. A replica that is down blocks the choice (its log may be the best);
// a report lapses when its broker restarts or is fenced, and all go once
// the partition has a leader or a candidate.

// offline reports whether p has nobody to elect cleanly.
func offline(p Partition) bool {
	return p.Leader == 0 && len(p.ISR) == 0 && len(p.ELR) == 0 && p.LastKnownLeader == 0
}

// reported says whether broker id has a log end report on p.
func reported(p Partition, id uint64) bool {
	return slices.ContainsFunc(p.LogEnds, func(e ReplicaLogEnd) bool { return e.Broker == id })
}

// reportLogEnd records a replica's report for an offline partition and
// elects the best replica once every one has reported.
func (s *State) reportLogEnd(ref PartitionRef, p Partition, it AlterPartitionItem) ItemResult {
	switch {
	case it.PartitionEpoch != p.PartitionEpoch:
		return ItemResult{Group: it.Group, Err: cmdErr(kerr.InvalidUpdateVersion, "partition epoch %d, the partition's is %d", it.PartitionEpoch, p.PartitionEpoch)}
	case !offline(p):
		return ItemResult{Group: it.Group, Partition: p, Err: cmdErr(kerr.ElectionNotNeeded, "group %d has a leader or a replica to elect", it.Group)}
	case !p.HasReplica(it.Leader) || len(it.ISR) != 1 || it.ISR[0].ID != it.Leader:
		return ItemResult{Group: it.Group, Err: cmdErr(kerr.InvalidRequest, "broker %d reports for a partition of %v", it.Leader, p.Replicas)}
	}
	if b, ok := s.Brokers[it.Leader]; !ok || !b.Eligible() || b.Epoch != it.ISR[0].BrokerEpoch {
		return ItemResult{Group: it.Group, Err: cmdErr(kerr.IneligibleReplica, "replica %d is unregistered, fenced, shutting down or not at broker epoch %d", it.Leader, it.ISR[0].BrokerEpoch)}
	}
	n := p
	n.LogEnds = slices.DeleteFunc(slices.Clone(p.LogEnds), func(e ReplicaLogEnd) bool { return e.Broker == it.Leader })
	n.LogEnds = append(n.LogEnds, ReplicaLogEnd{Broker: it.Leader, LastEpoch: it.LogEnd.LastEpoch, End: it.LogEnd.End, LostData: it.LogEnd.LostData})
	if best, ok := s.bestLogEnd(n); ok {
		n.Leader, n.ISR, n.ELR, n.Recovering, n.LogEnds = best, []uint64{best}, nil, true, nil
		bumpEpochs(p, &n)
	}
	s.putPartition(ref.Topic, n)
	return ItemResult{Group: it.Group, Partition: n}
}

// bestLogEnd is the replica to elect once every replica of p is alive,
// eligible and has reported: the newest last epoch, then the furthest
// end, then replica order, never one whose report says it lost data
// (none when all did: that is an operator's unclean election).
func (s *State) bestLogEnd(p Partition) (uint64, bool) {
	var best *ReplicaLogEnd
	for _, id := range p.Replicas {
		b, ok := s.Brokers[id]
		i := slices.IndexFunc(p.LogEnds, func(e ReplicaLogEnd) bool { return e.Broker == id })
		if !ok || !b.Eligible() || i < 0 {
			return 0, false
		}
		if e := &p.LogEnds[i]; !e.LostData && (best == nil || e.LastEpoch > best.LastEpoch || e.LastEpoch == best.LastEpoch && e.End > best.End) {
			best = e
		}
	}
	if best == nil {
		return 0, false
	}
	return best.Broker, true
}

// keptLogEnds is what stays of n's reports after a change: none once the
// partition is no longer offline, and none of a broker that may not lead
// (a restart or a fence makes its report stale).
func (r isrRules) keptLogEnds(n Partition) []ReplicaLogEnd {
	if len(n.LogEnds) == 0 || !offline(n) {
		return nil
	}
	out := slices.DeleteFunc(slices.Clone(n.LogEnds), func(e ReplicaLogEnd) bool { return !r.acceptable(e.Broker) })
	if len(out) == 0 {
		return nil
	}
	return out
}
