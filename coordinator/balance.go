package coordinator

import (
	"context"
	"time"
)

// The partition balancer (ControllerConfig.PartitionBalancer, raftq
// server --partition-balancer) keeps every eligible broker (alive, not
// shutting down, not decommissioned) within one replica of the others,
// and within one preferred leadership, after a node joins or comes back:
// Redpanda's node-add balancing. The metadata leader starts a move only
// while fewer than balanceMoves partitions are moving (an operator's and
// a decommission's count too), each an ordinary reassignment of a
// partition not moving and with every replica eligible. Leader balance
// then hands each partition's leadership to its new preferred replica.

// balanceMoves bounds the balancer's moves under way at once.
const balanceMoves = 2

// BalanceMove returns the balancer's next move: a replica from the
// eligible broker holding the most to the one holding the fewest, when
// they differ by more than one, else a reorder that makes the broker
// preferred the fewest times the preferred leader of a partition of the
// one preferred the most; ok is false when the cluster is balanced. It
// is a pure function of s: partitions in topic and index order.
func (s *State) BalanceMove() (ReassignItem, bool) {
	var eligible []uint64
	for _, id := range s.BrokerIDs() {
		if b := s.Brokers[id]; b.Eligible() && !b.Decommissioned {
			eligible = append(eligible, id)
		}
	}
	if len(eligible) < 2 {
		return ReassignItem{}, false
	}
	replicas, leaders := s.replicaLoad()
	hi, lo := extremes(eligible, replicas)
	if replicas[hi]-replicas[lo] > 1 {
		for _, ref := range s.allPartitions() {
			p := ref.Partition
			if !p.Moving() && p.HasReplica(hi) && !p.HasReplica(lo) && !s.hasIneligible(p) {
				target := append([]uint64(nil), p.Replicas...)
				for i, id := range target {
					if id == hi {
						target[i] = lo
					}
				}
				return ReassignItem{Topic: ref.Topic.Name, Partition: p.Index, Replicas: target}, true
			}
		}
	}
	hi, lo = extremes(eligible, leaders)
	if leaders[hi]-leaders[lo] > 1 {
		for _, ref := range s.allPartitions() {
			p := ref.Partition
			if !p.Moving() && p.Replicas[0] == hi && p.HasReplica(lo) {
				target := []uint64{lo}
				for _, id := range p.Replicas {
					if id != lo {
						target = append(target, id)
					}
				}
				return ReassignItem{Topic: ref.Topic.Name, Partition: p.Index, Replicas: target}, true
			}
		}
	}
	return ReassignItem{}, false
}

// replicaLoad counts the replicas and the preferred leaderships (first
// replicas) of each broker, a moving partition's where it is going.
func (s *State) replicaLoad() (replicas, leaders map[uint64]int) {
	replicas, leaders = map[uint64]int{}, map[uint64]int{}
	for _, t := range s.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			reps := p.Replicas
			if p.Moving() {
				reps = p.Target
			}
			for j, id := range reps {
				if j == 0 {
					leaders[id]++
				}
				replicas[id]++
			}
		}
	}
	return replicas, leaders
}

// allPartitions lists every partition in topic and index order.
func (s *State) allPartitions() []PartitionRef {
	var out []PartitionRef
	for _, name := range s.TopicNames() {
		t := s.Topics[name]
		for i := range t.Partitions {
			out = append(out, PartitionRef{t, &t.Partitions[i]})
		}
	}
	return out
}

// hasIneligible reports whether a replica of p is dead, shutting down or
// decommissioned: a move of p waits for it, or is the decommission's.
func (s *State) hasIneligible(p *Partition) bool {
	for _, id := range p.Replicas {
		if b, ok := s.Brokers[id]; !ok || !b.Eligible() || b.Decommissioned {
			return true
		}
	}
	return false
}

// extremes returns the ids holding the most and the fewest of count,
// the lowest id on ties.
func extremes(ids []uint64, count map[uint64]int) (hi, lo uint64) {
	hi, lo = ids[0], ids[0]
	for _, id := range ids[1:] {
		if count[id] > count[hi] {
			hi = id
		}
		if count[id] < count[lo] {
			lo = id
		}
	}
	return hi, lo
}

// balancePartitions starts the balancer's next move (the metadata
// leader's housekeeping) while fewer than balanceMoves partitions move.
func (c *Controller) balancePartitions(ctx context.Context) {
	s := c.cfg.Metadata.View()
	moving := 0
	for _, ref := range s.allPartitions() {
		if ref.Partition.Moving() {
			moving++
		}
	}
	if moving >= balanceMoves {
		return
	}
	it, ok := s.BalanceMove()
	if !ok {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := c.Propose(pctx, &Command{ReassignPartitions: &ReassignPartitions{Items: []ReassignItem{it}}})
	if err == nil && len(res.Items) == 1 {
		err = res.Items[0].Err
	}
	c.log.Info("partition balancer move", "topic", it.Topic, "partition", it.Partition, "to", it.Replicas, "err", err)
}
