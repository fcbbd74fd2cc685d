package coordinator

import (
	"testing"
)

// completeAll ends every move of m at once, as if the replicas had
// caught up: raft partitions by CompleteReassignment.
func completeAll(t *testing.T, m *Metadata) {
	t.Helper()
	for _, ref := range m.View().allPartitions() {
		if p := ref.Partition; p.Moving() {
			if r := applyChecked(t, m, &Command{CompleteReassignment: &CompleteReassignment{Group: p.Group, Target: p.Target}}); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
}

// After two nodes join a 3-node cluster, the balancer's moves spread
// replicas and preferred leaders to within one of each other, and stop.
func TestBalanceMove_SpreadsToNewBrokers(t *testing.T) {
	m := NewMetadata()
	for i := uint64(1); i <= 3; i++ {
		register(t, m, i, "s")
	}
	if r := applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(3), Partitions: 10, ReplicationFactor: 3}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, ok := m.View().BalanceMove(); ok {
		t.Fatal("a balanced cluster got a move")
	}
	register(t, m, 4, "s")
	register(t, m, 5, "s")
	moves := 0
	for ; moves < 100; moves++ {
		it, ok := m.View().BalanceMove()
		if !ok {
			break
		}
		if res := reassign(t, m, it); res.Err != nil {
			t.Fatalf("move %+v: %v", it, res.Err)
		}
		completeAll(t, m)
	}
	if moves == 0 || moves == 100 {
		t.Fatalf("%d moves", moves)
	}
	replicas, leaders := map[uint64]int{}, map[uint64]int{}
	for _, ref := range m.View().allPartitions() {
		leaders[ref.Partition.Replicas[0]]++
		for _, id := range ref.Partition.Replicas {
			replicas[id]++
		}
	}
	for id := uint64(1); id <= 5; id++ {
		if replicas[id] < 5 || replicas[id] > 7 || leaders[id] < 1 || leaders[id] > 3 {
			t.Errorf("after %d moves broker %d holds %d replicas and leads %d (want 6±1 and 2±1)", moves, id, replicas[id], leaders[id])
		}
	}
	// A dead broker's partitions are left alone, and so is the dead broker.
	setAlive(t, m, 5, false)
	if it, ok := m.View().BalanceMove(); ok {
		for _, ref := range m.View().allPartitions() {
			if ref.Topic.Name == it.Topic && ref.Partition.Index == it.Partition && ref.Partition.HasReplica(5) {
				t.Errorf("moved %+v, a partition with a dead replica", it)
			}
		}
	}
}
