package coordinator

import (
	"testing"
)

// The ISR invariants catch each way a partition can break them.
func TestState_CheckCatchesISRViolations(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}})
	good := m.View()
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	broken := func(topic string, f func(p *Partition)) *State {
		s := good.clone()
		tp := s.Topics[topic].copy()
		f(&tp.Partitions[0])
		s.Topics[topic] = tp
		return s
	}
	cases := []struct {
		name string
		s    *State
	}{
		{"leader outside the ISR", broken("i", func(p *Partition) { p.ISR = ids(2, 3) })},
		{"ISR member not a replica", broken("i", func(p *Partition) { p.ISR = ids(1, 4) })},
		{"ISR member repeated", broken("i", func(p *Partition) { p.ISR = ids(1, 1) })},
		{"ELR member not a replica", broken("i", func(p *Partition) { p.ELR = ids(5) })},
		{"ISR and ELR overlap", broken("i", func(p *Partition) { p.ELR = ids(2) })},
		{"last known leader not a replica", broken("i", func(p *Partition) { p.LastKnownLeader = 7 })},
		{"partition epoch below the leader epoch", broken("i", func(p *Partition) { p.LeaderTerm = 3 })},
		{"raft partition with an ISR", broken("r", func(p *Partition) { p.ISR = p.Replicas })},
		{"raft partition recovering", broken("r", func(p *Partition) { p.Recovering = true })},
	}
	for _, c := range cases {
		if err := c.s.check(); err == nil {
			t.Errorf("%s: check passed", c.name)
		}
	}
	recovering := broken("i", func(p *Partition) { p.ISR, p.Recovering = ids(2), true })
	if err := recovering.check(); err != nil {
		t.Errorf("a recovering leader outside the ISR is allowed: %v", err)
	}
}

// The transition checks catch epochs going back, changes without a new
// epoch, and an ISR emptied with ELR off.
func TestCheckTransition_CatchesViolations(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	setAlive(t, m, 1, false)
	setAlive(t, m, 1, true)
	wantPartition(t, part(m, 0), 2, ids(2, 3), nil)
	prev := m.View()
	next := func(f func(s *State, p *Partition)) *State {
		s := prev.clone()
		tp := s.Topics["i"].copy()
		f(s, &tp.Partitions[0])
		s.Topics["i"] = tp
		return s
	}
	cases := []struct {
		name string
		s    *State
	}{
		{"partition epoch back", next(func(_ *State, p *Partition) { p.PartitionEpoch-- })},
		{"leader epoch back", next(func(_ *State, p *Partition) { p.LeaderTerm--; p.PartitionEpoch++ })},
		{"new leader, same leader epoch", next(func(_ *State, p *Partition) { p.Leader = 3; p.PartitionEpoch++ })},
		{"new ISR, same partition epoch", next(func(_ *State, p *Partition) { p.ISR = ids(2) })},
		{"new ELR, same partition epoch", next(func(_ *State, p *Partition) { p.ELR = ids(1) })},
		{"ISR emptied with ELR off", next(func(_ *State, p *Partition) { p.ISR, p.Leader = nil, 0; p.LeaderTerm++; p.PartitionEpoch++ })},
		{"broker epoch back", next(func(s *State, _ *Partition) {
			b := *s.Brokers[1]
			b.Epoch--
			s.Brokers[1] = &b
		})},
	}
	for _, c := range cases {
		if err := checkTransition(prev, c.s); err == nil {
			t.Errorf("%s: checkTransition passed", c.name)
		}
	}
	if err := checkTransition(prev, prev); err != nil {
		t.Errorf("no change: %v", err)
	}
}
