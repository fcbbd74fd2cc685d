package broker

import (
	"testing"

	"github.com/raftq/raftq/coordinator"
)

// A non-preferred replica of a new group holds its election for the
// preferred one only while the metadata knows that broker alive: holding
// for a broker marked down would only delay the partition's first leader.
func TestElectionHold(t *testing.T) {
	view := &coordinator.State{Brokers: map[uint64]*coordinator.Broker{
		1: {Alive: true}, 2: {Alive: false}, 3: {Alive: true},
	}}
	for _, c := range []struct {
		name     string
		replicas []uint64
		self     uint64
		want     int
	}{
		{"preferred alive, this node another replica", []uint64{1, 2, 3}, 3, 20},
		{"this node preferred", []uint64{1, 2, 3}, 1, 0},
		{"preferred marked down", []uint64{2, 1, 3}, 1, 0},
		{"preferred unknown to the metadata", []uint64{9, 1, 3}, 1, 0},
		{"no replicas", nil, 1, 0},
	} {
		if got := electionHold(view, c.replicas, c.self, 10); got != c.want {
			t.Errorf("%s: hold %d ticks, want %d", c.name, got, c.want)
		}
	}
}
