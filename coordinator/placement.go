package coordinator

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// placer spreads new partitions over live brokers: each partition's
// preferred leader (its first replica) goes to the live broker leading the
// fewest partitions, and its other replicas to the live brokers holding the
// fewest replicas, ties broken by broker id. It is a pure function of the
// state, so every replica of group 0 places identically.
type placer struct {
	live     []uint64 // sorted
	leaders  map[uint64]int
	replicas map[uint64]int
}

func newPlacer(s *State) *placer {
	p := &placer{leaders: map[uint64]int{}, replicas: map[uint64]int{}}
	for _, id := range s.BrokerIDs() {
		if b := s.Brokers[id]; b.Alive && !b.Decommissioned {
			p.live = append(p.live, id)
		}
	}
	for _, t := range s.Topics {
		for _, part := range t.Partitions {
			p.count(part.Replicas)
		}
	}
	return p
}

// count adds one partition with replicas to the load figures.
func (p *placer) count(replicas []uint64) {
	for i, r := range replicas {
		if i == 0 {
			p.leaders[r]++
		}
		p.replicas[r]++
	}
}

func (p *placer) place(rf int) ([]uint64, error) {
	if rf < 1 || rf > len(p.live) {
		return nil, cmdErr(kerr.InvalidReplicationFactor,
			"replication factor %d needs that many live brokers; %d are live", rf, len(p.live))
	}
	first := p.least(nil, func(id uint64) [2]int { return [2]int{p.leaders[id], p.replicas[id]} })
	out := []uint64{first}
	for len(out) < rf {
		out = append(out, p.least(out, func(id uint64) [2]int { return [2]int{p.replicas[id], 0} }))
	}
	return out, nil
}

// least returns the live broker not in skip with the smallest load key.
func (p *placer) least(skip []uint64, load func(uint64) [2]int) uint64 {
	var best uint64
	var bestLoad [2]int
	for _, id := range p.live {
		if slices.Contains(skip, id) {
			continue
		}
		l := load(id)
		if best == 0 || l[0] < bestLoad[0] || l[0] == bestLoad[0] && l[1] < bestLoad[1] {
			best, bestLoad = id, l
		}
	}
	return best
}
