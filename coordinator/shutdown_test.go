package coordinator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"
)

func shutDown(t *testing.T, m *Metadata, id uint64, startID string) Result {
	t.Helper()
	return applyChecked(t, m, &Command{ControlledShutdown: &ControlledShutdown{ID: id, StartID: startID}})
}

// A controlled shutdown elects new leaders from the ISR less the broker
// wherever it led, and takes it out of every other ISR, while it stays
// alive; a raft topic is left as it was, down to the same *Topic.
func TestControlledShutdown_ElectsFromTheISRLessTheBroker(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3}, []uint64{2, 3, 1}, []uint64{3, 1, 2})
	applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(9), Partitions: 3, ReplicationFactor: 3}})
	raft := m.View().Topics["r"]
	before := part(m, 0)
	if r := shutDown(t, m, 1, "start-1"); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantPartition(t, part(m, 0), 2, ids(2, 3), nil)
	wantPartition(t, part(m, 1), 2, ids(2, 3), nil)
	wantPartition(t, part(m, 2), 3, ids(3, 2), nil)
	if p := part(m, 0); p.LeaderTerm != before.LeaderTerm+1 {
		t.Errorf("leader epoch %d after the election, want %d", p.LeaderTerm, before.LeaderTerm+1)
	}
	if b := m.View().Brokers[1]; !b.Alive || !b.ShuttingDown || b.Eligible() {
		t.Errorf("broker 1 in controlled shutdown: %+v (eligible %v), want alive and shutting down", b, b.Eligible())
	}
	if m.View().Topics["r"] != raft {
		t.Error("a controlled shutdown changed raft topic r")
	}
}

// A broker in controlled shutdown cannot come back into an ISR or lead:
// not by AlterPartition, a preferred election, nor the liveness loop
// marking it dead and alive again; a registration of the same start
// keeps it out too.
func TestControlledShutdown_BrokerStaysIneligible(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	shutDown(t, m, 1, "start-1")
	s := m.View()
	if res := alter(t, m, alterItem(s, part(m, 0), 1, 2, 3)); !errors.Is(res[0].Err, kerr.IneligibleReplica) {
		t.Errorf("AlterPartition adding the broker back: %v, want INELIGIBLE_REPLICA", res[0].Err)
	}
	g := part(m, 0).Group
	r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{g}, Preferred: true}})
	if !errors.Is(r.Items[0].Err, kerr.PreferredLeaderNotAvailable) {
		t.Errorf("preferred election of the broker: %v, want PREFERRED_LEADER_NOT_AVAILABLE", r.Items[0].Err)
	}
	setAlive(t, m, 1, false)
	setAlive(t, m, 1, true)
	register(t, m, 1, "start-1")
	wantPartition(t, part(m, 0), 2, ids(2, 3), nil)
	if b := m.View().Brokers[1]; !b.ShuttingDown || !b.Alive {
		t.Errorf("broker 1 after dead, alive and the same registration: %+v, want still shutting down", b)
	}
	applyChecked(t, m, &Command{CreatePartitions: &CreatePartitions{Name: "i", Count: 2}})
	if p := part(m, 1); slices.Contains(p.ISR, 1) || p.Leader == 1 {
		t.Errorf("a new partition took the shutting-down broker into its ISR: %+v", p)
	}
}

// Registering with a new StartID (the restart) ends the controlled
// shutdown: the broker may be added back and elected again.
func TestControlledShutdown_NewStartClearsIt(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	shutDown(t, m, 1, "start-1")
	register(t, m, 1, "start-2")
	if b := m.View().Brokers[1]; b.ShuttingDown || !b.Eligible() {
		t.Fatalf("broker 1 after its restart: %+v, want eligible", b)
	}
	if res := alter(t, m, alterItem(m.View(), part(m, 0), 1, 2, 3)); res[0].Err != nil {
		t.Fatalf("AlterPartition adding the restarted broker back: %v", res[0].Err)
	}
	g := part(m, 0).Group
	if r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{g}, Preferred: true}}); r.Items[0].Err != nil {
		t.Fatalf("preferred election of the restarted broker: %v", r.Items[0].Err)
	}
	wantPartition(t, part(m, 0), 1, ids(1, 2, 3), nil)
}

// The broker's last ISR leaves the partition leaderless with ELR off, as
// fencing does (Kafka's controlled shutdown too), and the restart elects
// it again; with ELR on it stays in the ELR, as after Kafka's clean
// shutdown (raftq's restart, always unclean, takes it out then).
func TestControlledShutdown_LastISRMember(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	shutDown(t, m, 1, "start-1")
	wantPartition(t, part(m, 0), 0, ids(1), nil)
	register(t, m, 1, "start-2")
	wantPartition(t, part(m, 0), 1, ids(1), nil)

	m = isrCluster(t, 3, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
	alter(t, m, alterItem(m.View(), part(m, 0), 1, 2))
	shutDown(t, m, 1, "start-1")
	wantPartition(t, part(m, 0), 2, ids(2), ids(1))
}

// A controlled shutdown names the start it comes from: one of an earlier
// process, or of an unknown broker, is refused and changes nothing, and a
// repeated one changes nothing either.
func TestControlledShutdown_RefusesAStaleStart(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	before := m.View()
	if r := shutDown(t, m, 1, "start-0"); !errors.Is(r.Err, kerr.StaleBrokerEpoch) {
		t.Errorf("stale start: %v, want STALE_BROKER_EPOCH", r.Err)
	}
	if r := shutDown(t, m, 7, ""); !errors.Is(r.Err, kerr.BrokerNotAvailable) {
		t.Errorf("unknown broker: %v, want BROKER_NOT_AVAILABLE", r.Err)
	}
	if after := m.View(); after.Brokers[1] != before.Brokers[1] || after.Topics["i"] != before.Topics["i"] {
		t.Error("a refused controlled shutdown changed the state")
	}
	shutDown(t, m, 1, "start-1")
	once := m.View()
	shutDown(t, m, 1, "start-1")
	if again := m.View(); again.Topics["i"] != once.Topics["i"] || again.Brokers[1] != once.Brokers[1] {
		t.Error("a second controlled shutdown changed the state")
	}
}

// The mark survives a snapshot: a node restoring one keeps the broker
// ineligible.
func TestControlledShutdown_SurvivesASnapshot(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	shutDown(t, m, 1, "start-1")
	m2 := restored(t, m)
	if b := m2.View().Brokers[1]; !b.ShuttingDown {
		t.Errorf("broker 1 after a snapshot: %+v, want still shutting down", b)
	}
}

// restored returns new metadata restored from a snapshot of m.
func restored(t *testing.T, m *Metadata) *Metadata {
	t.Helper()
	m2 := NewMetadata()
	if err := m2.Restore(&raftpb.Snapshot{Data: snapshotOf(t, m)}); err != nil {
		t.Fatal(err)
	}
	return m2
}

// A drain sends no ControlledShutdown while a broker of an older version,
// which would not apply it, is registered, nor for a start that is not
// registered; the controller here has no group 0 to propose to, so a
// proposal would panic.
func TestController_ControlledShutdownNeedsEveryBrokerToApplyIt(t *testing.T) {
	m := NewMetadata()
	for id := uint64(1); id <= 2; id++ {
		applyChecked(t, m, &Command{RegisterBroker: &Broker{ID: id, StartID: "s", ControlledShutdown: id == 1}})
	}
	c := &Controller{cfg: ControllerConfig{Metadata: m}, self: Broker{ID: 1, StartID: "s"}}
	if err := c.ControlledShutdown(context.Background()); err == nil || !strings.Contains(err.Error(), "broker 2") {
		t.Errorf("with broker 2 of an older version: %v, want a refusal naming it", err)
	}
	c.self.StartID = "other"
	if err := c.ControlledShutdown(context.Background()); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("for an unregistered start: %v, want a refusal", err)
	}
}
