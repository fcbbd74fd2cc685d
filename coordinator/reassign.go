package coordinator

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reassignment (Kafka's AlterPartitionReassignments, KIP-455) moves a
// partition's replicas to another list of brokers. Group 0 records the
// move (Partition.Target, Partition.Original) and widens Replicas to
// every broker that may hold a copy until the move ends, so that no node
// drops data a quorum may still need: Target first, then the others.
// Who carries the move out depends on the mode:
//   - raft: the leader of the partition's raft group changes the group's
//     membership step by step (PlanMove, controller_reassign.go) and,
//     once the group runs on Target alone, proposes CompleteReassignment;
//   - ISR: the new replicas fetch as followers, the leader adds them to
//     the ISR (AlterPartition), and apply ends the move the moment the
//     ISR holds all of Target (finishISRMove), as Kafka's controller does.
//
// A cancel retargets the move at Original; the same steps then lead
// back. Replicas shrinks only when a move ends.

// ReassignPartitions starts or cancels reassignments, each item alone
// (Result.Items has one entry per item, in order).
type ReassignPartitions struct {
	Items []ReassignItem `json:"items"`
	// AllowReplicationFactorChange lets a target have another number of
	// replicas than the partition (KIP-860; Kafka's AdminClient sends
	// true unless told otherwise).
	AllowReplicationFactorChange bool `json:"allow_replication_factor_change,omitempty"`
}

// ReassignItem is one partition's new replica list, the first its
// preferred leader, or a cancel of its move.
type ReassignItem struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []uint64 `json:"replicas,omitempty"`
	Cancel    bool     `json:"cancel,omitempty"`
}

// CompleteReassignment ends the move of raft partition Group: the leader
// of its raft group proposes it once the group's voters are Target and it
// has no other member. It is refused unless Target is still the move's
// target (a cancel may have retargeted it meanwhile).
type CompleteReassignment struct {
	Group  uint64   `json:"group"`
	Target []uint64 `json:"target"`
}

// Moving reports whether a reassignment of p is under way.
func (p *Partition) Moving() bool { return len(p.Target) > 0 }

// Adding and Removing are Kafka's adding and removing replicas of a move:
// the target's replicas that were not in the original list, and the
// replicas that are not in the target (after a cancel, those the
// cancelled move had added).
func (p *Partition) Adding() []uint64   { return minus(p.Target, p.Original) }
func (p *Partition) Removing() []uint64 { return minus(p.Replicas, p.Target) }

func (s *State) reassignPartitions(r *ReassignPartitions) Result {
	if len(r.Items) == 0 {
		return Result{Err: cmdErr(kerr.InvalidRequest, "reassign partitions without items")}
	}
	res := Result{Items: make([]ItemResult, 0, len(r.Items))}
	for _, it := range r.Items {
		res.Items = append(res.Items, s.reassignItem(it, r.AllowReplicationFactorChange))
	}
	return res
}

func (s *State) reassignItem(it ReassignItem, allowRF bool) ItemResult {
	t, ok := s.Topics[it.Topic]
	if !ok || it.Partition < 0 || int(it.Partition) >= len(t.Partitions) {
		return ItemResult{Err: cmdErr(kerr.UnknownTopicOrPartition, "no partition %s/%d", it.Topic, it.Partition)}
	}
	p := t.Partitions[it.Partition]
	var n Partition
	var err error
	if it.Cancel {
		n, err = cancelMove(p)
	} else {
		n, err = s.startMove(t, p, it.Replicas, allowRF)
	}
	if err != nil {
		return ItemResult{Group: p.Group, Partition: p, Err: err}
	}
	if t.IsISR() {
		n = s.finishISRMove(t, s.bumpReplicaChange(p, n))
	}
	s.putPartition(t, n)
	return ItemResult{Group: p.Group, Partition: n}
}

// startMove validates a target as Kafka's controller does and records
// the move. A target of the same replicas in another order only changes
// the preferred leader, at once, as in Kafka.
func (s *State) startMove(t *Topic, p Partition, target []uint64, allowRF bool) (Partition, error) {
	if err := s.checkTarget(t, p, target, allowRF); err != nil {
		return p, err
	}
	n := p
	if sameSet(target, p.Replicas) {
		n.Replicas = slices.Clone(target)
		return n, nil
	}
	n.Original = p.Replicas
	n.Target = slices.Clone(target)
	n.Replicas = union(n.Target, n.Original)
	n.Moved = true
	return n, nil
}

func (s *State) checkTarget(t *Topic, p Partition, target []uint64, allowRF bool) error {
	switch {
	case p.Moving():
		return cmdErr(kerr.ReassignmentInProgress, "partition %s/%d is moving to %v; cancel that first", t.Name, p.Index, p.Target)
	case len(target) == 0:
		return cmdErr(kerr.InvalidReplicaAssignment, "a partition needs at least one replica")
	case !allowRF && len(target) != len(p.Replicas):
		return cmdErr(kerr.InvalidReplicationFactor, "target %v changes the replication factor %d, and the request does not allow it", target, len(p.Replicas))
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return cmdErr(kerr.InvalidReplicaAssignment, "replica %d is listed twice in %v", id, target)
		}
		if _, ok := s.Brokers[id]; !ok {
			return cmdErr(kerr.InvalidReplicaAssignment, "broker %d is not registered", id)
		}
	}
	if min := int(t.ConfigInt("min.insync.replicas")); t.IsISR() && len(target) < min {
		return cmdErr(kerr.InvalidReplicationFactor, "%d replicas cannot take acks=all writes with min.insync.replicas %d", len(target), min)
	}
	return nil
}

// cancelMove retargets p's move at its original replicas; Replicas keeps
// every broker that may hold a copy until the way back is done.
func cancelMove(p Partition) (Partition, error) {
	if !p.Moving() {
		return p, cmdErr(kerr.NoReassignmentInProgress, "partition of group %d is not moving", p.Group)
	}
	n := p
	n.Target = slices.Clone(p.Original)
	n.Replicas = union(n.Target, p.Replicas)
	return n, nil
}

// completeReassignment ends a raft partition's move (CompleteReassignment).
func (s *State) completeReassignment(c *CompleteReassignment) Result {
	ref, ok := s.PartitionByGroup(c.Group)
	switch {
	case !ok:
		return Result{Err: cmdErr(kerr.UnknownTopicOrPartition, "no partition has group %d", c.Group)}
	case ref.Topic.IsISR():
		return Result{Err: cmdErr(kerr.InvalidRequest, "group 0 ends the moves of ISR partitions itself")}
	case !ref.Partition.Moving():
		return Result{Err: cmdErr(kerr.NoReassignmentInProgress, "partition of group %d is not moving", c.Group)}
	case !slices.Equal(ref.Partition.Target, c.Target):
		return Result{Err: cmdErr(kerr.InvalidReplicaAssignment, "partition of group %d now moves to %v, not %v", c.Group, ref.Partition.Target, c.Target)}
	}
	n := *ref.Partition
	n.Replicas, n.Target, n.Original = n.Target, nil, nil
	s.putPartition(ref.Topic, n)
	return Result{}
}

// finishISRMove ends an ISR partition's move once its ISR holds every
// target replica (Kafka's isReassignmentComplete): Replicas become the
// target, the ISR and ELR lose the others, and a leader that is not in
// the target hands over to the first target replica of the ISR.
func (s *State) finishISRMove(t *Topic, p Partition) Partition {
	if !p.Moving() || len(minus(p.Target, p.ISR)) > 0 {
		return p
	}
	q := p
	q.Replicas, q.Target, q.Original = p.Target, nil, nil
	q.ELR = keep(p.ELR, q.Replicas)
	if !slices.Contains(q.Replicas, q.LastKnownLeader) {
		q.LastKnownLeader = 0
	}
	var removedLeader uint64
	if !slices.Contains(q.Replicas, p.Leader) {
		removedLeader = p.Leader
	}
	n := s.rules(t, removedLeader).build(q, isrChange{setISR: true, isr: inReplicaOrder(q, p.ISR)})
	if removedLeader != 0 && n.Leader == removedLeader {
		n.Leader = 0 // no target replica may lead (all fenced since)
	}
	return s.bumpReplicaChange(p, n)
}

// bumpReplicaChange gives n a new partition epoch if only its replicas
// changed, so that the leader takes the new list as a new version of the
// partition (Kafka bumps it for every change of the assignment).
func (s *State) bumpReplicaChange(p, n Partition) Partition {
	if n.PartitionEpoch == p.PartitionEpoch && !slices.Equal(n.Replicas, p.Replicas) {
		n.PartitionEpoch++
	}
	return n
}

// minus returns the ids of a not in b, in a's order.
func minus(a, b []uint64) []uint64 {
	var out []uint64
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// keep returns the ids of a that are in b, in a's order.
func keep(a, b []uint64) []uint64 {
	var out []uint64
	for _, id := range a {
		if slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// union returns a, then the ids of b not in a.
func union(a, b []uint64) []uint64 {
	return append(slices.Clone(a), minus(b, a)...)
}

// sameSet reports whether a and b hold the same ids.
func sameSet(a, b []uint64) bool {
	return len(a) == len(b) && len(minus(a, b)) == 0
}
