package coordinator

import (
	"fmt"
	"slices"
	"testing"
)

// rulesOf returns election rules under which exactly the brokers in alive
// may lead.
func rulesOf(alive []uint64, elr bool, minISR int, unclean bool) isrRules {
	return isrRules{
		acceptable: func(id uint64) bool { return slices.Contains(alive, id) },
		elr:        elr, minISR: minISR, unclean: unclean,
	}
}

func ids(v ...uint64) []uint64 { return v }

// TestISRRules_Build covers the cases of Kafka's PartitionChangeBuilder
// (electAnyLeader, electPreferredLeader, maybePopulateTargetElr,
// maybeUpdateLastKnownLeader, the empty-ISR rule) on partition values.
func TestISRRules_Build(t *testing.T) {
	base := Partition{Index: 0, Group: 1, Replicas: ids(1, 2, 3), Leader: 1, LeaderTerm: 4, ISR: ids(1, 2, 3), PartitionEpoch: 7}
	with := func(f func(p *Partition)) Partition { p := base; f(&p); return p }
	shrink := func(isr ...uint64) isrChange { return isrChange{setISR: true, isr: isr} }
	cases := []struct {
		name   string
		p      Partition
		rules  isrRules
		change isrChange
		want   Partition
	}{
		{"clean: an acceptable leader in the ISR stays, nothing changes",
			base, rulesOf(ids(1, 2, 3), false, 1, false), isrChange{}, base},
		{"ISR shrink bumps only the partition epoch",
			base, rulesOf(ids(1, 2, 3), false, 1, false), shrink(1, 3),
			with(func(p *Partition) { p.ISR, p.PartitionEpoch = ids(1, 3), 8 })},
		{"clean: a dead leader gives way to the first ISR member in replica order",
			with(func(p *Partition) { p.ISR = ids(3, 2, 1) }), rulesOf(ids(2, 3), false, 1, false), shrink(2, 3),
			with(func(p *Partition) { p.Leader, p.ISR, p.LeaderTerm, p.PartitionEpoch = 2, ids(2, 3), 5, 8 })},
		{"clean: an alive replica outside the ISR is not elected",
			with(func(p *Partition) { p.ISR = ids(1, 2) }), rulesOf(ids(3), false, 1, false), shrink(2),
			with(func(p *Partition) { p.Leader, p.ISR, p.LeaderTerm, p.PartitionEpoch = 0, ids(2), 5, 8 })},
		{"no ELR: fencing the last member keeps it in the ISR, leaderless",
			with(func(p *Partition) { p.ISR = ids(1) }), rulesOf(ids(2, 3), false, 2, false), shrink(),
			with(func(p *Partition) { p.Leader, p.ISR, p.LeaderTerm, p.PartitionEpoch = 0, ids(1), 5, 8 })},
		{"no ELR, all replicas dead: no leader",
			base, rulesOf(nil, false, 1, true), shrink(2, 3),
			with(func(p *Partition) { p.Leader, p.ISR, p.LeaderTerm, p.PartitionEpoch = 0, ids(2, 3), 5, 8 })},
		{"unclean on: ISR dead, an out-of-ISR replica leads alone, recovering",
			with(func(p *Partition) { p.ISR = ids(1, 2) }), rulesOf(ids(3), false, 1, true), shrink(2),
			with(func(p *Partition) {
				p.Leader, p.ISR, p.Recovering, p.LeaderTerm, p.PartitionEpoch = 3, ids(3), true, 5, 8
			})},
		{"unclean on, but a clean candidate exists: clean election",
			base, rulesOf(ids(2, 3), false, 1, true), shrink(2, 3),
			with(func(p *Partition) { p.Leader, p.ISR, p.LeaderTerm, p.PartitionEpoch = 2, ids(2, 3), 5, 8 })},
		{"unclean on, every replica dead: none",
			with(func(p *Partition) { p.ISR = ids(1) }), rulesOf(ids(4), false, 1, true), shrink(),
			with(func(p *Partition) { p.Leader, p.ISR, p.LeaderTerm, p.PartitionEpoch = 0, ids(1), 5, 8 })},
		{"ELR: shrinking below min ISR moves the leavers into the ELR",
			base, rulesOf(ids(1, 2, 3), true, 2, false), shrink(1),
			with(func(p *Partition) { p.ISR, p.ELR, p.PartitionEpoch = ids(1), ids(2, 3), 8 })},
		{"ELR: at min ISR or above the ELR is cleared",
			with(func(p *Partition) { p.ISR, p.ELR = ids(1), ids(2, 3) }), rulesOf(ids(1, 2, 3), true, 2, false), shrink(1, 2),
			with(func(p *Partition) { p.ISR, p.ELR, p.PartitionEpoch = ids(1, 2), nil, 8 })},
		{"ELR: a replica that lost data does not join the ELR",
			base, rulesOf(ids(1, 2, 3), true, 3, false), isrChange{setISR: true, isr: ids(1), uncleanShutdown: 3},
			with(func(p *Partition) { p.ISR, p.ELR, p.PartitionEpoch = ids(1), ids(2), 8 })},
		{"ELR: the last member fenced empties the ISR; it joins the ELR, remembered as last leader",
			with(func(p *Partition) { p.ISR, p.ELR = ids(1), ids(2) }), rulesOf(ids(3), true, 2, false), shrink(),
			with(func(p *Partition) {
				p.Leader, p.ISR, p.ELR, p.LastKnownLeader, p.LeaderTerm, p.PartitionEpoch = 0, nil, ids(1, 2), 1, 5, 8
			})},
		{"ELR: the ISR empty, an acceptable ELR member leads and becomes the ISR",
			with(func(p *Partition) { p.ISR, p.ELR = ids(1), ids(2, 3) }), rulesOf(ids(3), true, 2, false), shrink(),
			with(func(p *Partition) {
				p.Leader, p.ISR, p.ELR, p.LeaderTerm, p.PartitionEpoch = 3, ids(3), ids(1, 2), 5, 8
			})},
		{"ELR: ISR and ELR empty, the alive last known leader leads, recovering",
			with(func(p *Partition) { p.Leader, p.ISR, p.LastKnownLeader = 0, nil, 2 }), rulesOf(ids(2, 3), true, 2, false), isrChange{},
			with(func(p *Partition) {
				p.Leader, p.ISR, p.LastKnownLeader, p.Recovering, p.LeaderTerm, p.PartitionEpoch = 2, ids(2), 0, true, 5, 8
			})},
		{"ELR: a dead last known leader is not elected",
			with(func(p *Partition) { p.Leader, p.ISR, p.LastKnownLeader = 0, nil, 2 }), rulesOf(ids(3), true, 2, false), isrChange{},
			with(func(p *Partition) { p.Leader, p.ISR, p.LastKnownLeader = 0, nil, 2 })},
		{"ELR: ISR and ELR empty, last leader dead, unclean on: another replica",
			with(func(p *Partition) { p.Leader, p.ISR, p.LastKnownLeader = 0, nil, 2 }), rulesOf(ids(3), true, 2, true), isrChange{},
			with(func(p *Partition) {
				p.Leader, p.ISR, p.LastKnownLeader, p.Recovering, p.LeaderTerm, p.PartitionEpoch = 3, ids(3), 0, true, 5, 8
			})},
		{"no ELR: the last known leader is not a fallback",
			with(func(p *Partition) { p.Leader, p.ISR, p.LastKnownLeader = 0, ids(1), 2 }), rulesOf(ids(2), false, 2, false), isrChange{},
			with(func(p *Partition) { p.Leader, p.ISR, p.LastKnownLeader, p.PartitionEpoch = 0, ids(1), 0, 8 })},
		{"unclean election clears the ELR",
			with(func(p *Partition) { p.Leader, p.ISR, p.ELR = 0, ids(1), ids(2) }), rulesOf(ids(3), true, 3, true), isrChange{},
			with(func(p *Partition) {
				p.Leader, p.ISR, p.ELR, p.Recovering, p.LeaderTerm, p.PartitionEpoch = 3, ids(3), nil, true, 5, 8
			})},
		{"preferred: the first replica, alive and in the ISR, takes over",
			with(func(p *Partition) { p.Leader = 2 }), rulesOf(ids(1, 2, 3), false, 1, false), isrChange{preferred: true},
			with(func(p *Partition) { p.Leader, p.LeaderTerm, p.PartitionEpoch = 1, 5, 8 })},
		{"preferred: the first replica out of the ISR; the valid leader stays",
			with(func(p *Partition) { p.Leader, p.ISR = 2, ids(2, 3) }), rulesOf(ids(1, 2, 3), false, 1, false), isrChange{preferred: true},
			with(func(p *Partition) { p.Leader, p.ISR = 2, ids(2, 3) })},
		{"preferred: never unclean",
			with(func(p *Partition) { p.Leader, p.ISR = 0, ids(1) }), rulesOf(ids(2, 3), false, 1, true), isrChange{preferred: true},
			with(func(p *Partition) { p.Leader, p.ISR = 0, ids(1) })},
		{"recovered: the leader's report clears Recovering",
			with(func(p *Partition) { p.ISR, p.Recovering = ids(1), true }), rulesOf(ids(1, 2, 3), false, 1, false),
			isrChange{setISR: true, isr: ids(1), setRecovering: true},
			with(func(p *Partition) { p.ISR, p.PartitionEpoch = ids(1), 8 })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := fmt.Sprintf("%+v", c.p)
			got := c.rules.build(c.p, c.change)
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
				t.Errorf("build:\n got %+v\nwant %+v", got, c.want)
			}
			if fmt.Sprintf("%+v", c.p) != before {
				t.Errorf("build changed its input: %s, now %+v", before, c.p)
			}
			if err := checkISRFields(&Topic{Configs: map[string]string{"replication.mode": ModeISR}}, got); err != nil {
				t.Errorf("result breaks an invariant: %v", err)
			}
		})
	}
}

// The leader excluded (being fenced) gives way although it is alive.
func TestISRRules_ExcludedLeaderGivesWay(t *testing.T) {
	s := newState()
	for id := uint64(1); id <= 3; id++ {
		s.Brokers[id] = &Broker{ID: id, Alive: true}
	}
	tp := &Topic{Name: "t", Configs: map[string]string{"replication.mode": ModeISR}}
	p := Partition{Replicas: ids(1, 2, 3), Leader: 1, ISR: ids(1, 2, 3)}
	got := s.rules(tp, 1).build(p, isrChange{setISR: true, isr: ids(2, 3)})
	if got.Leader != 2 || got.LeaderTerm != 1 || got.PartitionEpoch != 1 {
		t.Errorf("leader %d epochs %d/%d, want 2 at 1/1", got.Leader, got.LeaderTerm, got.PartitionEpoch)
	}
}
