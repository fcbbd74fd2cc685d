package coordinator

import (
	"testing"
)

// A restart (a registration with a new StartID) fences the broker in ISR
// mode only: raft topics, their placement and leadership hints, stay as
// they were, down to the same *Topic, and the broker stays alive with a
// new epoch.
func TestRegisterBroker_NewStartIDLeavesRaftTopicsAlone(t *testing.T) {
	m := NewMetadata()
	for id := uint64(1); id <= 3; id++ {
		register(t, m, id, "start-1")
	}
	applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(1), Partitions: 2, ReplicationFactor: 3}})
	g := m.View().Topics["r"].Partitions[0].Group
	applyChecked(t, m, &Command{LeaderHints: []LeaderHint{{Group: g, Leader: 2, Term: 4}}})
	before := m.View()
	register(t, m, 2, "start-2")
	after := m.View()
	if after.Topics["r"] != before.Topics["r"] {
		t.Errorf("a restart of broker 2 changed raft topic r: %+v, was %+v", after.Topics["r"], before.Topics["r"])
	}
	if p := after.Topics["r"].Partitions[0]; p.Leader != 2 || p.LeaderTerm != 4 || len(p.ISR) != 0 {
		t.Errorf("raft partition after the restart: %+v", p)
	}
	b := after.Brokers[2]
	if !b.Alive || b.StartID != "start-2" || b.Epoch <= before.Brokers[2].Epoch {
		t.Errorf("broker 2 after the restart: %+v, was %+v", b, before.Brokers[2])
	}
	if after.EligibleLeaderReplicas != before.EligibleLeaderReplicas || after.NextGroup != before.NextGroup {
		t.Error("a restart changed cluster-wide state")
	}
}
