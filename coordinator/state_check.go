package coordinator

import (
	"errors"
	"fmt"
	"slices"
)

// check reports the first way s breaks the shape every applied log
// leaves: keys that match their values, topics with distinct non-zero
// ids, partitions numbered by position on distinct raft groups below
// NextGroup, each on distinct registered brokers. A restored snapshot is
// checked before it is published, so that a damaged one stops the group
// with an error rather than a panic later.
func (s *State) check() error {
	if s.Brokers == nil || s.Topics == nil || s.NextGroup <= MetadataGroup || s.NextProducerID < 0 {
		return errors.New("brokers, topics, next group or next producer id missing")
	}
	for id, b := range s.Brokers {
		if b == nil || b.ID != id || id == 0 {
			return fmt.Errorf("broker %d: bad registration %+v", id, b)
		}
	}
	groups := map[uint64]bool{}
	ids := map[[16]byte]bool{}
	for name, t := range s.Topics {
		if t == nil || t.Name != name || t.ID == ([16]byte{}) || ids[t.ID] {
			return fmt.Errorf("topic %q: missing, misnamed, or its id zero or taken", name)
		}
		ids[t.ID] = true
		for i, p := range t.Partitions {
			if err := s.checkPartition(p, i, groups); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", name, i, err)
			}
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
	return nil
}
