package coordinator

import (
	"slices"
	"testing"
)

// After a cancel, ListPartitionReassignments shows the way back: the
// replicas being removed are those the cancelled move had added.
func TestReassign_CancelledMoveListsWhatItRemoves(t *testing.T) {
	m := raftTopic(t, 5, []uint64{1, 2, 3})
	reassign(t, m, ReassignItem{Topic: "r", Replicas: []uint64{4, 5, 2}})
	reassign(t, m, ReassignItem{Topic: "r", Cancel: true})
	p := m.View().Topics["r"].Partitions[0]
	if got, want := p.Removing(), []uint64{4, 5}; !slices.Equal(got, want) {
		t.Errorf("a cancelled move of %v (replicas %v, target %v) removes %v, want %v", []uint64{4, 5, 2}, p.Replicas, p.Target, got, want)
	}
}
