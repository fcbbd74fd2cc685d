package coordinator

import (
	"errors"
	"fmt"
	"slices"
)

// check reports the first way s breaks the shape every applied log
// leaves: keys that match their values, topic defaults that
// SetTopicDefaults takes, topics with distinct non-zero ids and the
// state's topic defaults, partitions numbered by position on distinct
// raft groups below NextGroup, each on distinct registered brokers, the
// ISR invariants (checkISRFields), no ISR partition led by a broker
// in controlled shutdown, at most one broker in maintenance, and none
// leading an ISR partition that another ISR member could lead
// (checkMaintenance). A restored snapshot is checked before it is
// published, so that a damaged one stops the group with an error rather
// than a panic later.
func (s *State) check() error {
	if s.Brokers == nil || s.Topics == nil || s.NextGroup <= MetadataGroup || s.NextProducerID < 0 {
		return errors.New("brokers, topics, next group or next producer id missing")
	}
	for k, d := range s.TopicDefaults {
		if err := checkTopicDefault(k, d, CurrentConfigVersion); err != nil {
			return fmt.Errorf("topic default %s: %w", k, err)
		}
	}
	maintenance := 0
	for id, b := range s.Brokers {
		if b == nil || b.ID != id || id == 0 {
			return fmt.Errorf("broker %d: bad registration %+v", id, b)
		}
		if b.InMaintenance {
			maintenance++
		}
	}
	if maintenance > 1 {
		return fmt.Errorf("%d brokers in maintenance, at most one may be", maintenance)
	}
	if err := s.checkAdmissions(); err != nil { // admit.go
		return err
	}
	if err := s.checkScramUsers(); err != nil { // scram.go
		return err
	}
	if err := s.checkACLs(); err != nil { // acl.go
		return err
	}
	groups := map[uint64]bool{}
	ids := map[[16]byte]bool{}
	for name, t := range s.Topics {
		if t == nil || t.Name != name || t.ID == ([16]byte{}) || ids[t.ID] {
			return fmt.Errorf("topic %q: missing, misnamed, or its id zero or taken", name)
		}
		ids[t.ID] = true
		if !t.defaults.Equal(s.TopicDefaults) {
			return fmt.Errorf("topic %q: its topic defaults are not the state's", name)
		}
		for i, p := range t.Partitions {
			if err := s.checkPartition(p, i, groups); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
			if err := checkISRFields(t, p); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
			if b := s.Brokers[p.Leader]; t.IsISR() && b != nil && b.ShuttingDown {
				return fmt.Errorf("topic %q partition %d: led by broker %d in controlled shutdown", name, i, p.Leader)
			}
			if err := s.checkMaintenance(t, p); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
		}
	}
	return nil
}

// checkMaintenance checks that an ISR partition led by the broker in
// maintenance has no other ISR member that may lead (eligible): every
// election picks another where there is one, and SetMaintenance elects
// again where the broker led.
func (s *State) checkMaintenance(t *Topic, p Partition) error {
	b := s.Brokers[p.Leader]
	if !t.IsISR() || b == nil || !b.InMaintenance {
		return nil
	}
	for _, id := range p.ISR {
		if o := s.Brokers[id]; id != p.Leader && o != nil && o.Eligible() {
			return fmt.Errorf("led by broker %d in maintenance while ISR member %d may lead", p.Leader, id)
		}
	}
	return nil
}

func (s *State) checkPartition(p Partition, i int, groups map[uint64]bool) error {
	if p.Index != int32(i) || p.Group == MetadataGroup || p.Group >= s.NextGroup || groups[p.Group] {
		return fmt.Errorf("index %d, raft group %d (next %d) zero, too high or taken", p.Index, p.Group, s.NextGroup)
	}
	groups[p.Group] = true
	if len(p.Replicas) == 0 {
		return errors.New("no replicas")
	}
	for j, r := range p.Replicas {
		if _, ok := s.Brokers[r]; !ok || slices.Contains(p.Replicas[:j], r) {
			return fmt.Errorf("replica %d unregistered or repeated", r)
		}
	}
	return checkMove(p)
}

// checkMove checks a reassignment's fields: none, or a target and an
// original of distinct replicas, with Replicas starting with the target
// and holding the original, on a partition marked Moved.
func checkMove(p Partition) error {
	if !p.Moving() && len(p.Original) == 0 {
		return nil
	}
	switch {
	case !p.Moving() || len(p.Original) == 0 || !p.Moved:
		return fmt.Errorf("move to %v from %v half recorded (moved %v)", p.Target, p.Original, p.Moved)
	case !slices.Equal(p.Replicas[:min(len(p.Target), len(p.Replicas))], p.Target):
		return fmt.Errorf("replicas %v do not start with the target %v", p.Replicas, p.Target)
	case len(minus(p.Original, p.Replicas)) > 0:
		return fmt.Errorf("replicas %v lack some of the original %v", p.Replicas, p.Original)
	}
	for i, id := range p.Original {
		if slices.Contains(p.Original[:i], id) {
			return fmt.Errorf("original %v repeats %d", p.Original, id)
		}
	}
	return nil
}

// checkISRFields checks the ISR invariants of one partition: in raft mode
// the ISR fields are empty (no ISR rule touched the partition); in ISR
// mode ISR and ELR are distinct replicas with nothing in common, and a
// leader is in the ISR unless it is recovering from an unclean election.
func checkISRFields(t *Topic, p Partition) error {
	if !t.IsISR() {
		if len(p.ISR) > 0 || len(p.ELR) > 0 || p.LastKnownLeader != 0 || p.PartitionEpoch != 0 || p.Recovering || len(p.LogEnds) > 0 {
			return fmt.Errorf("raft-mode partition with ISR state %v/%v/%d/%d/%v", p.ISR, p.ELR, p.LastKnownLeader, p.PartitionEpoch, p.Recovering)
		}
		return nil
	}
	if err := checkMembers("ISR", p.ISR, p); err != nil {
		return err
	}
	if err := checkMembers("ELR", p.ELR, p); err != nil {
		return err
	}
	for _, id := range p.ELR {
		if slices.Contains(p.ISR, id) {
			return fmt.Errorf("replica %d in both ISR %v and ELR %v", id, p.ISR, p.ELR)
		}
	}
	if p.Leader != 0 && !p.Recovering && !slices.Contains(p.ISR, p.Leader) {
		return fmt.Errorf("leader %d outside the ISR %v", p.Leader, p.ISR)
	}
	if p.Leader != 0 && !p.HasReplica(p.Leader) || p.LastKnownLeader != 0 && !p.HasReplica(p.LastKnownLeader) {
		return fmt.Errorf("leader %d or last known leader %d not a replica of %v", p.Leader, p.LastKnownLeader, p.Replicas)
	}
	if len(p.LogEnds) > 0 && !offline(p) {
		return fmt.Errorf("log end reports %v on a partition that is not offline", p.LogEnds)
	}
	for i, e := range p.LogEnds {
		if !p.HasReplica(e.Broker) || slices.ContainsFunc(p.LogEnds[:i], func(o ReplicaLogEnd) bool { return o.Broker == e.Broker }) {
			return fmt.Errorf("log end report of %d: not a replica of %v, or repeated", e.Broker, p.Replicas)
		}
	}
	if p.PartitionEpoch < 0 || int64(p.PartitionEpoch) < int64(p.LeaderTerm) {
		return fmt.Errorf("partition epoch %d below zero or the leader epoch %d", p.PartitionEpoch, p.LeaderTerm)
	}
	return nil
}

// checkMembers checks that ids are distinct replicas of p.
func checkMembers(what string, ids []uint64, p Partition) error {
	for j, id := range ids {
		if !p.HasReplica(id) || slices.Contains(ids[:j], id) {
			return fmt.Errorf("%s %v: %d is no replica of %v, or repeated", what, ids, id, p.Replicas)
		}
	}
	return nil
}

// checkTransition reports the first way next breaks what a change from
// prev must keep: broker epochs, leader epochs and partition epochs never
// go back; in ISR mode a new leader comes with a new leader epoch, and any
// change of leader, ISR, ELR, last known leader or recovery with a new
// partition epoch (else a stale AlterPartition's compare-and-set would
// pass); and without ELR no ISR becomes empty.
func checkTransition(prev, next *State) error {
	for id, b := range prev.Brokers {
		if nb, ok := next.Brokers[id]; ok && nb.Epoch < b.Epoch {
			return fmt.Errorf("broker %d epoch %d went back to %d", id, b.Epoch, nb.Epoch)
		}
	}
	for name, t := range prev.Topics {
		nt, ok := next.Topics[name]
		if !ok || nt.ID != t.ID {
			continue
		}
		for i, p := range t.Partitions {
			if err := checkPartitionTransition(next, nt, p, nt.Partitions[i]); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
		}
	}
	return nil
}

func checkPartitionTransition(next *State, t *Topic, p, n Partition) error {
	if n.LeaderTerm < p.LeaderTerm || n.PartitionEpoch < p.PartitionEpoch {
		return fmt.Errorf("epochs %d/%d went back to %d/%d", p.LeaderTerm, p.PartitionEpoch, n.LeaderTerm, n.PartitionEpoch)
	}
	if !t.IsISR() {
		return nil
	}
	if n.Leader != p.Leader && n.LeaderTerm == p.LeaderTerm {
		return fmt.Errorf("leader %d became %d in the same leader epoch %d", p.Leader, n.Leader, n.LeaderTerm)
	}
	if !sameISRState(p, n) && n.PartitionEpoch == p.PartitionEpoch {
		return fmt.Errorf("changed in the same partition epoch %d: %+v to %+v", n.PartitionEpoch, p, n)
	}
	// With ELR off only a last member that lost data empties the ISR,
	// resigning its leadership (AlterPartitionItem.LostData).
	if len(p.ISR) > 0 && len(n.ISR) == 0 && !next.EligibleLeaderReplicas && (len(p.ISR) > 1 || p.Leader != p.ISR[0] || n.Leader != 0) {
		return fmt.Errorf("ISR %v became empty with ELR off", p.ISR)
	}
	return nil
}
