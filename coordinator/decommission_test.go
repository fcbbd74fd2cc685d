package coordinator

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func decommission(t *testing.T, m *Metadata, id uint64, on bool) error {
	t.Helper()
	return applyChecked(t, m, &Command{Decommission: &Decommission{ID: id, On: on}}).Err
}

// A decommissioned broker gets no new replica; recommission cancels the
// moves off it; removal needs it empty and bars its data directory.
func TestDecommission_PlaceMoveCancelRemove(t *testing.T) {
	m := raftTopic(t, 4, []uint64{4, 1, 2})
	if err := decommission(t, m, 4, true); err != nil {
		t.Fatal(err)
	}
	r := applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "new", ID: topicID(9), Partitions: 8, ReplicationFactor: 3}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, p := range r.Topic.Partitions {
		if p.HasReplica(4) {
			t.Fatalf("new partition placed on decommissioned broker 4: %v", p.Replicas)
		}
	}
	s := m.View()
	p := s.Topics["r"].Partitions[0]
	load, _ := s.replicaLoad()
	target, ok := s.DecommissionMove(&p, 4, load)
	if !ok || !slices.Equal(target, []uint64{3, 1, 2}) {
		t.Fatalf("decommission move of %v: %v %v, want 3 in 4's place", p.Replicas, target, ok)
	}
	if res := reassign(t, m, ReassignItem{Topic: "r", Replicas: target}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if r := applyChecked(t, m, &Command{RemoveBroker: &RemoveBroker{ID: 4}}); !errors.Is(r.Err, kerr.InvalidRequest) {
		t.Fatalf("remove a broker that still holds a replica: %v", r.Err)
	}
	// Recommission cancels the move off 4.
	if err := decommission(t, m, 4, false); err != nil {
		t.Fatal(err)
	}
	if p := m.View().Topics["r"].Partitions[0]; !slices.Equal(p.Target, []uint64{4, 1, 2}) || m.View().Brokers[4].Decommissioned {
		t.Fatalf("after recommission: %+v", p)
	}
	// Again, to the end: once it holds nothing it can be removed.
	if err := decommission(t, m, 4, true); err != nil {
		t.Fatal(err)
	}
	g := m.View().Topics["r"].Partitions[0].Group
	if r := applyChecked(t, m, &Command{CompleteReassignment: &CompleteReassignment{Group: g, Target: []uint64{4, 1, 2}}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if res := reassign(t, m, ReassignItem{Topic: "r", Replicas: []uint64{3, 1, 2}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if r := applyChecked(t, m, &Command{CompleteReassignment: &CompleteReassignment{Group: g, Target: []uint64{3, 1, 2}}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := applyChecked(t, m, &Command{RemoveBroker: &RemoveBroker{ID: 4}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, ok := m.View().Brokers[4]; ok {
		t.Fatal("broker 4 still registered")
	}
	if r := register(t, m, 4, "start-2"); !errors.Is(r.Err, kerr.InconsistentClusterID) {
		t.Fatalf("a removed broker's data directory registers again: %v", r.Err)
	}
	r = applyChecked(t, m, &Command{RegisterBroker: &Broker{ID: 4, KafkaAddr: "h:4", Incarnation: "fresh", StartID: "s"}})
	if r.Err != nil {
		t.Fatalf("the id on an empty data directory: %v", r.Err)
	}
}

func TestDecommission_BadInput(t *testing.T) {
	m := raftTopic(t, 3, []uint64{1, 2, 3})
	if err := decommission(t, m, 9, true); !errors.Is(err, kerr.BrokerNotAvailable) {
		t.Errorf("unknown broker: %v", err)
	}
	if err := decommission(t, m, 3, true); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("decommission below the replication factor: %v", err)
	}
	one := raftTopic(t, 1, []uint64{1})
	if err := decommission(t, one, 1, true); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("decommission the last broker: %v", err)
	}
	if err := decommission(t, m, 3, true); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("decommission below the replication factor: %v", err)
	}
	if m.View().Brokers[3].Decommissioned {
		t.Error("a refused decommission changed the broker")
	}
	if r := applyChecked(t, m, &Command{RemoveBroker: &RemoveBroker{ID: 9}}); !errors.Is(r.Err, kerr.BrokerNotAvailable) {
		t.Errorf("remove an unknown broker: %v", r.Err)
	}
	// A restart keeps the mark.
	m2 := raftTopic(t, 4, []uint64{1, 2, 3})
	if err := decommission(t, m2, 4, true); err != nil {
		t.Fatal(err)
	}
	register(t, m2, 4, "start-2")
	if !m2.View().Brokers[4].Decommissioned {
		t.Error("a restart ended the decommission")
	}
}
