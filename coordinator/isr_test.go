package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/raftgroup"
)

// applyChecked applies c like applyCmd, then checks the state invariants
// and the transition from the state before.
func applyChecked(t *testing.T, m *Metadata, c *Command) Result {
	t.Helper()
	before := m.View()
	r := applyCmd(t, m, c)
	if err := m.View().check(); err != nil {
		t.Fatalf("after %+v: %v", c, err)
	}
	if err := checkTransition(before, m.View()); err != nil {
		t.Fatalf("after %+v: %v", c, err)
	}
	return r
}

// isrCluster returns metadata with n brokers, each registered with a
// StartID, and an ISR topic "i" whose partitions have the given replicas.
// The topic is created the only way ISR mode allows today: AllowISR.
func isrCluster(t *testing.T, n int, configs map[string]string, assignment ...[]uint64) *Metadata {
	t.Helper()
	m := NewMetadata()
	for i := 1; i <= n; i++ {
		register(t, m, uint64(i), "start-1")
	}
	cfgs := map[string]string{"replication.mode": ModeISR}
	for k, v := range configs {
		cfgs[k] = v
	}
	r := applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "i", ID: topicID(1), Partitions: int32(len(assignment)),
		Configs: cfgs, Assignment: assignment, AllowISR: true}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return m
}

func register(t *testing.T, m *Metadata, id uint64, startID string) Result {
	t.Helper()
	return applyChecked(t, m, &Command{RegisterBroker: &Broker{ID: id, KafkaAddr: fmt.Sprintf("h:%d", id), Incarnation: fmt.Sprint(id), StartID: startID}})
}

func setAlive(t *testing.T, m *Metadata, id uint64, alive bool) {
	t.Helper()
	if r := applyChecked(t, m, &Command{SetAlive: &SetAlive{ID: id, Alive: alive}}); r.Err != nil {
		t.Fatal(r.Err)
	}
}

func part(m *Metadata, i int) Partition { return m.View().Topics["i"].Partitions[i] }

// alterItem is the AlterPartition item the current leader of p would send
// for the new ISR, with the broker epochs it knows.
func alterItem(s *State, p Partition, isr ...uint64) AlterPartitionItem {
	it := AlterPartitionItem{Group: p.Group, Leader: p.Leader, LeaderEpoch: int32(p.LeaderTerm), PartitionEpoch: p.PartitionEpoch}
	for _, id := range isr {
		var epoch uint64
		if b, ok := s.Brokers[id]; ok {
			epoch = b.Epoch
		}
		it.ISR = append(it.ISR, ISRMember{ID: id, BrokerEpoch: epoch})
	}
	return it
}

func alter(t *testing.T, m *Metadata, items ...AlterPartitionItem) []ItemResult {
	t.Helper()
	r := applyChecked(t, m, &Command{AlterPartition: &AlterPartition{Items: items}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r.Items
}

func wantPartition(t *testing.T, p Partition, leader uint64, isr, elr []uint64) {
	t.Helper()
	if p.Leader != leader || !slices.Equal(p.ISR, isr) || !slices.Equal(p.ELR, elr) {
		t.Fatalf("leader %d ISR %v ELR %v, want %d %v %v (%+v)", p.Leader, p.ISR, p.ELR, leader, isr, elr, p)
	}
}

// ISR mode stays refused to every proposer but one that sets AllowISR.
func TestCreateTopic_ISRNeedsAllowISR(t *testing.T) {
	m := withBrokers(t, 3)
	isr := map[string]string{"replication.mode": ModeISR}
	if r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "i", ID: topicID(1), Partitions: 1, ReplicationFactor: 3, Configs: isr}}); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("isr without AllowISR: %v, want INVALID_CONFIG", r.Err)
	}
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(2), Partitions: 1, ReplicationFactor: 3}})
	if r := applyCmd(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "r", Set: isr}}); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("altering a raft topic to isr: %v, want INVALID_CONFIG", r.Err)
	}
	big := map[string]string{"replication.mode": ModeISR, "min.insync.replicas": "4"}
	if r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "i", ID: topicID(1), Partitions: 1, ReplicationFactor: 3, Configs: big, AllowISR: true}}); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("min.insync.replicas above RF: %v, want INVALID_CONFIG", r.Err)
	}
}

// A new ISR partition has every alive replica in sync and the first of
// them leading at epoch 0; new partitions of the topic start the same.
func TestCreateTopic_ISRStartsInSync(t *testing.T) {
	m := isrCluster(t, 4, nil, []uint64{1, 2, 3})
	wantPartition(t, part(m, 0), 1, ids(1, 2, 3), nil)
	setAlive(t, m, 1, false)
	if r := applyChecked(t, m, &Command{CreatePartitions: &CreatePartitions{Name: "i", Count: 3}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i := 1; i < 3; i++ {
		p := part(m, i)
		if p.Leader != p.ISR[0] || slices.Contains(p.ISR, 1) || p.LeaderTerm != 0 {
			t.Errorf("new partition %d: %+v", i, p)
		}
	}
	if r := applyCmd(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "i", Set: map[string]string{"retention.ms": "5"}}}); r.Err != nil {
		t.Errorf("altering an ISR topic's other configs: %v", r.Err)
	}
}

func TestAlterPartition_CompareAndSet(t *testing.T) {
	m := isrCluster(t, 4, nil, []uint64{1, 2, 3}, []uint64{2, 3, 4})
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}})
	s := m.View()
	p := part(m, 0)
	good := func(f func(*AlterPartitionItem)) AlterPartitionItem {
		it := alterItem(s, p, 1, 2)
		f(&it)
		return it
	}
	cases := []struct {
		name string
		item AlterPartitionItem
		want *kerr.Error
	}{
		{"unknown partition", good(func(it *AlterPartitionItem) { it.Group = 99 }), kerr.UnknownTopicOrPartition},
		{"raft partition", good(func(it *AlterPartitionItem) { it.Group = s.Topics["r"].Partitions[0].Group }), kerr.InvalidRequest},
		{"stale leader epoch", good(func(it *AlterPartitionItem) { it.LeaderEpoch = -1 }), kerr.FencedLeaderEpoch},
		{"leader epoch from the future", good(func(it *AlterPartitionItem) { it.LeaderEpoch = 3 }), kerr.NotController},
		{"partition epoch from the future", good(func(it *AlterPartitionItem) { it.PartitionEpoch = 3 }), kerr.NotController},
		{"not the leader", good(func(it *AlterPartitionItem) { it.Leader = 2 }), kerr.InvalidRequest},
		{"ISR without the leader", alterItem(s, p, 2, 3), kerr.InvalidRequest},
		{"ISR member not a replica", alterItem(s, p, 1, 4), kerr.InvalidRequest},
		{"ISR member repeated", alterItem(s, p, 1, 2, 2), kerr.InvalidRequest},
		{"stale broker epoch", good(func(it *AlterPartitionItem) { it.ISR[1].BrokerEpoch-- }), kerr.IneligibleReplica},
		{"unregistered member", good(func(it *AlterPartitionItem) { it.ISR[1].BrokerEpoch++ }), kerr.IneligibleReplica},
		{"recovering with followers", good(func(it *AlterPartitionItem) { it.LeaderRecovering = true }), kerr.InvalidRequest},
	}
	for _, c := range cases {
		res := alter(t, m, c.item)
		if !errors.Is(res[0].Err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, res[0].Err, c.want)
		}
		if got := m.View().Topics["i"]; got.Partitions[0].PartitionEpoch != 0 || !slices.Equal(got.Partitions[0].ISR, ids(1, 2, 3)) {
			t.Errorf("%s: a failed item changed the partition: %+v", c.name, got.Partitions[0])
		}
	}

	// A good item applies beside a failing one; replaying it then fails
	// its compare-and-set.
	stale := alterItem(s, part(m, 1), 2, 3)
	stale.PartitionEpoch = -1
	shrink := alterItem(s, p, 1, 3)
	res := alter(t, m, shrink, stale)
	if res[0].Err != nil || !errors.Is(res[1].Err, kerr.InvalidUpdateVersion) {
		t.Fatalf("mixed items: %v, %v", res[0].Err, res[1].Err)
	}
	if got := res[0].Partition; !slices.Equal(got.ISR, ids(1, 3)) || got.PartitionEpoch != 1 || got.LeaderTerm != 0 {
		t.Errorf("after a shrink: %+v", got)
	}
	if res := alter(t, m, shrink); !errors.Is(res[0].Err, kerr.InvalidUpdateVersion) {
		t.Errorf("the same item again: %v, want INVALID_UPDATE_VERSION", res[0].Err)
	}
	expand := alterItem(m.View(), part(m, 0), 3, 2, 1)
	if res := alter(t, m, expand); res[0].Err != nil || !slices.Equal(res[0].Partition.ISR, ids(1, 2, 3)) {
		t.Errorf("expand: %+v", res[0])
	}
}

// A fenced member is ineligible, and a broker that re-registered since the
// leader learned its epoch is too (KIP-903).
func TestAlterPartition_IneligibleReplicas(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	old := m.View()
	setAlive(t, m, 3, false)
	if res := alter(t, m, alterItem(m.View(), part(m, 0), 1, 2, 3)); !errors.Is(res[0].Err, kerr.IneligibleReplica) {
		t.Errorf("fenced member: %v", res[0].Err)
	}
	setAlive(t, m, 3, true)
	register(t, m, 2, "start-2")
	if res := alter(t, m, alterItem(old, part(m, 0), 1, 2, 3)); !errors.Is(res[0].Err, kerr.IneligibleReplica) && !errors.Is(res[0].Err, kerr.InvalidUpdateVersion) {
		t.Errorf("member at an old broker epoch: %v", res[0].Err)
	}
	p := part(m, 0)
	it := alterItem(m.View(), p, 1, 2, 3)
	it.ISR[1].BrokerEpoch = old.Brokers[2].Epoch
	if res := alter(t, m, it); !errors.Is(res[0].Err, kerr.IneligibleReplica) {
		t.Errorf("member at an old broker epoch: %v", res[0].Err)
	}
}

// The recovering leader of an unclean election reports itself recovered,
// and only then grows its ISR.
func TestAlterPartition_RecoveringLeader(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"unclean.leader.election.enable": "true"}, []uint64{1, 2, 3})
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	setAlive(t, m, 1, false)
	p := part(m, 0)
	if !p.Recovering || p.Leader == 1 || len(p.ISR) != 1 {
		t.Fatalf("after an unclean election: %+v", p)
	}
	it := alterItem(m.View(), p, p.Leader)
	it.LeaderRecovering = true
	if res := alter(t, m, it); res[0].Err != nil || !res[0].Partition.Recovering {
		t.Fatalf("still recovering: %+v", res[0])
	}
	if res := alter(t, m, alterItem(m.View(), part(m, 0), p.Leader)); res[0].Err != nil || res[0].Partition.Recovering {
		t.Fatalf("recovered: %+v", res[0])
	}
	it = alterItem(m.View(), part(m, 0), p.Leader)
	it.LeaderRecovering = true
	if res := alter(t, m, it); !errors.Is(res[0].Err, kerr.InvalidRequest) {
		t.Errorf("recovered back to recovering: %v", res[0].Err)
	}
}

// Fencing: a dead follower leaves the ISR, a dead leader gives way to the
// first ISR member, the last member stays (no ELR); a broker coming back
// leads where nobody does.
func TestSetAlive_FencesAndUnfences(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3}, []uint64{3, 2})
	setAlive(t, m, 2, false)
	wantPartition(t, part(m, 0), 1, ids(1, 3), nil)
	wantPartition(t, part(m, 1), 3, ids(3), nil)
	setAlive(t, m, 1, false)
	wantPartition(t, part(m, 0), 3, ids(3), nil)
	if p := part(m, 0); p.LeaderTerm != 1 || p.PartitionEpoch != 2 {
		t.Errorf("epochs %d/%d after one election and two changes", p.LeaderTerm, p.PartitionEpoch)
	}
	setAlive(t, m, 3, false)
	wantPartition(t, part(m, 0), 0, ids(3), nil)
	wantPartition(t, part(m, 1), 0, ids(3), nil)
	setAlive(t, m, 2, true) // not in any ISR: still leaderless
	wantPartition(t, part(m, 0), 0, ids(3), nil)
	setAlive(t, m, 3, true)
	wantPartition(t, part(m, 0), 3, ids(3), nil)
	wantPartition(t, part(m, 1), 3, ids(3), nil)
}

// A restart (a new StartID) fences the broker even when it comes back
// before liveness noticed: it leaves the ISR and must catch up again. The
// same StartID (new addresses) is no restart.
func TestRegisterBroker_RestartFences(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	e := m.View().Brokers[1].Epoch
	register(t, m, 1, "start-1")
	if got := m.View().Brokers[1].Epoch; got <= e {
		t.Errorf("broker epoch %d after re-registering, was %d", got, e)
	}
	wantPartition(t, part(m, 0), 1, ids(1, 2, 3), nil)
	register(t, m, 1, "start-2")
	wantPartition(t, part(m, 0), 2, ids(2, 3), nil)
	register(t, m, 3, "start-2")
	wantPartition(t, part(m, 0), 2, ids(2), nil)
	// The last member, restarted, is re-elected without ELR: Kafka before
	// KIP-966, which can lose its unflushed tail.
	register(t, m, 2, "start-2")
	wantPartition(t, part(m, 0), 2, ids(2), nil)
	if p := part(m, 0); p.LeaderTerm != 3 {
		t.Errorf("leader epoch %d: the restart of the last member is a new election (fenced, then back)", p.LeaderTerm)
	}
}

// KIP-966's last replica standing with ELR on: the replicas that left the
// ISR below min.insync.replicas are eligible; the last member, restarted
// with possible data loss, leaves ISR and ELR, and an ELR member leads.
func TestELR_LastReplicaStanding(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
	alter(t, m, alterItem(m.View(), part(m, 0), 1, 2))
	wantPartition(t, part(m, 0), 1, ids(1, 2), nil)
	// 3 left while the ISR was at min.insync.replicas: the HW moved on
	// without it, so only 2 is eligible.
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	wantPartition(t, part(m, 0), 1, ids(1), ids(2))
	register(t, m, 1, "start-2")
	wantPartition(t, part(m, 0), 2, ids(2), nil)

	// Every replica down: the ISR empties, the last leader is remembered,
	// and it leads again, recovering, when nothing better comes back.
	setAlive(t, m, 3, false)
	setAlive(t, m, 2, false)
	p := part(m, 0)
	wantPartition(t, p, 0, nil, ids(2))
	if p.LastKnownLeader != 2 {
		t.Errorf("last known leader %d, want 2", p.LastKnownLeader)
	}
	register(t, m, 2, "start-3")
	register(t, m, 3, "start-3")
	p = part(m, 0)
	wantPartition(t, p, 2, ids(2), nil)
	if !p.Recovering {
		t.Errorf("the last known leader came back without Recovering: %+v", p)
	}
}

// A last known leader that restarts, registering with
// RestartForgetsLeader, is no longer trusted to hold every committed
// record (its disk may have lost some): the partition waits for every
// replica's log end, and the best log leads. (Without the field, as in
// TestELR_LastReplicaStanding, it leads again as before.)
func TestELR_LastKnownLeaderRestartedGoesToRecovery(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
	alter(t, m, alterItem(m.View(), part(m, 0), 1, 2))
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	register(t, m, 1, "start-2")
	setAlive(t, m, 3, false)
	setAlive(t, m, 2, false)
	if p := part(m, 0); p.LastKnownLeader != 2 {
		t.Fatalf("last known leader %d, want 2", p.LastKnownLeader)
	}
	for _, id := range []uint64{2, 3} {
		applyChecked(t, m, &Command{RegisterBroker: &Broker{ID: id, KafkaAddr: fmt.Sprintf("h:%d", id), Incarnation: fmt.Sprint(id),
			StartID: "start-3", RestartForgetsLeader: true}})
	}
	p := part(m, 0)
	wantPartition(t, p, 0, nil, nil)
	if p.LastKnownLeader != 0 {
		t.Fatalf("the restarted last known leader is still the fallback: %+v", p)
	}
	for _, r := range []struct {
		id  uint64
		end int64
	}{{2, 5}, {1, 9}, {3, 7}} {
		p, b := part(m, 0), m.View().Brokers[r.id]
		alter(t, m, AlterPartitionItem{Group: p.Group, Leader: r.id, PartitionEpoch: p.PartitionEpoch,
			ISR: []ISRMember{{ID: r.id, BrokerEpoch: b.Epoch}}, LogEnd: &ReplicaLogEnd{Broker: r.id, LastEpoch: 2, End: r.end}})
	}
	p = part(m, 0)
	wantPartition(t, p, 1, ids(1), nil)
	if !p.Recovering {
		t.Errorf("recovered leader without Recovering: %+v", p)
	}
}

// A fenced ELR member that comes back without restarting (a pause, a
// partition) is still eligible.
func TestELR_PausedMemberStaysEligible(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "3"}, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
	setAlive(t, m, 3, false)
	wantPartition(t, part(m, 0), 1, ids(1, 2), ids(3))
	setAlive(t, m, 2, false)
	setAlive(t, m, 1, false)
	wantPartition(t, part(m, 0), 0, nil, ids(1, 2, 3))
	setAlive(t, m, 3, true)
	wantPartition(t, part(m, 0), 3, ids(3), ids(1, 2))
}

// Turning ELR off gives an empty ISR its ELR back and elects.
func TestUpdateFeatures_ELROff(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "3"}, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
	setAlive(t, m, 1, false)
	setAlive(t, m, 2, false)
	setAlive(t, m, 3, false)
	setAlive(t, m, 2, false)
	wantPartition(t, part(m, 0), 0, nil, ids(1, 2, 3))
	setAlive(t, m, 2, true)
	wantPartition(t, part(m, 0), 2, ids(2), ids(1, 3))
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: false}})
	p := part(m, 0)
	wantPartition(t, p, 2, ids(2), nil)
	if p.LastKnownLeader != 0 {
		t.Errorf("last known leader kept with ELR off: %+v", p)
	}
}

func TestElectLeaders(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3}, []uint64{2, 3})
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(9), Partitions: 1, ReplicationFactor: 1}})
	g0, g1 := part(m, 0).Group, part(m, 1).Group
	elect := func(preferred bool, groups ...uint64) []ItemResult {
		t.Helper()
		r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: groups, Preferred: preferred}})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Items
	}
	res := elect(true, g0, 99, m.View().Topics["r"].Partitions[0].Group)
	if !errors.Is(res[0].Err, kerr.ElectionNotNeeded) || !errors.Is(res[1].Err, kerr.UnknownTopicOrPartition) || !errors.Is(res[2].Err, kerr.InvalidRequest) {
		t.Errorf("preferred leader already leads / unknown / raft: %v %v %v", res[0].Err, res[1].Err, res[2].Err)
	}
	setAlive(t, m, 1, false)
	setAlive(t, m, 1, true)
	wantPartition(t, part(m, 0), 2, ids(2, 3), nil)
	if res := elect(true, g0); !errors.Is(res[0].Err, kerr.PreferredLeaderNotAvailable) {
		t.Errorf("preferred replica out of the ISR: %v", res[0].Err)
	}
	alter(t, m, alterItem(m.View(), part(m, 0), 1, 2, 3))
	if res := elect(true, g0); res[0].Err != nil || res[0].Partition.Leader != 1 {
		t.Errorf("preferred election: %+v", res[0])
	}
	if res := elect(false, g0); !errors.Is(res[0].Err, kerr.ElectionNotNeeded) {
		t.Errorf("online election with a leader: %v", res[0].Err)
	}
	setAlive(t, m, 3, false)
	setAlive(t, m, 2, false)
	wantPartition(t, part(m, 1), 0, ids(2), nil)
	if res := elect(false, g1); !errors.Is(res[0].Err, kerr.EligibleLeadersNotAvailable) {
		t.Errorf("no eligible leader: %v", res[0].Err)
	}
}

// Lowering min.insync.replicas to the ISR size empties the ELR: the HW
// moves again without its members.
func TestAlterConfigs_MinISRRecomputesELR(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "3"}, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
	alter(t, m, alterItem(m.View(), part(m, 0), 1, 2))
	wantPartition(t, part(m, 0), 1, ids(1, 2), ids(3))
	applyChecked(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "i", Set: map[string]string{"min.insync.replicas": "2"}}})
	wantPartition(t, part(m, 0), 1, ids(1, 2), nil)
}

// Turning on unclean election elects where nobody in the ISR can lead,
// as Kafka's periodic check would.
func TestAlterConfigs_UncleanElectsLeaderless(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	setAlive(t, m, 1, false)
	wantPartition(t, part(m, 0), 0, ids(1), nil)
	applyChecked(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "i", Set: map[string]string{"unclean.leader.election.enable": "true"}}})
	if p := part(m, 0); p.Leader != 2 || !p.Recovering || !slices.Equal(p.ISR, ids(2)) {
		t.Errorf("unclean election after the config change: %+v", p)
	}
}

// Group 0 elects ISR leaders; a raft leadership hint must not move one.
func TestLeaderHints_SkipISRPartitions(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{LeaderHints: []LeaderHint{{Group: part(m, 0).Group, Leader: 2, Term: 9}}})
	if p := part(m, 0); p.Leader != 1 || p.LeaderTerm != 0 {
		t.Errorf("a hint moved an ISR leader: %+v", p)
	}
}

// A metadata log written before ISR mode existed (its snapshot taken with
// that binary, commit e675320) replays to the same state; the only new
// field is each broker's epoch.
func TestMetadata_PreISRLogReplaysUnchanged(t *testing.T) {
	log, err := os.ReadFile("testdata/prechange-log.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/prechange-log.snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetadata()
	for i, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		before := m.View()
		if _, err := m.Apply(raftgroup.Entry{Index: uint64(i + 1), Data: line}); err != nil {
			t.Fatal(err)
		}
		if err := checkTransition(before, m.View()); err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	s := m.View().clone()
	for id, b := range s.Brokers {
		if b.Epoch == 0 {
			t.Errorf("broker %d has no epoch", id)
		}
		nb := *b
		nb.Epoch = 0
		s.Brokers[id] = &nb
	}
	got, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Errorf("replay differs from the pre-ISR binary's:\n got %s\nwant %s", got, want)
	}
}

// A leader whose log lost durable records at recovery resigns
// (AlterPartitionItem.LostData): it leaves the ISR even as its last
// member, the ELR and the last known leader, and is never elected cleanly
// again before it has caught up from another leader; with unclean
// election allowed another replica may lead.
func TestAlterPartition_LostDataResigns(t *testing.T) {
	lost := func(p Partition) AlterPartitionItem {
		it := alterItem(&State{}, p)
		it.LostData = true
		return it
	}
	t.Run("the last member without ELR", func(t *testing.T) {
		m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
		alter(t, m, alterItem(m.View(), part(m, 0), 1))
		register(t, m, 1, "start-2") // the last member restarts and is re-elected
		wantPartition(t, part(m, 0), 1, ids(1), nil)
		res := alter(t, m, lost(part(m, 0)))
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		wantPartition(t, part(m, 0), 0, nil, nil)
		setAlive(t, m, 1, false)
		setAlive(t, m, 1, true)
		wantPartition(t, part(m, 0), 0, nil, nil)
		// An unclean election may pick another replica, not the one
		// known to have lost data... but it is the operator's call.
		r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{part(m, 0).Group}, Unclean: true}})
		if r.Err != nil || r.Items[0].Err != nil {
			t.Fatalf("unclean election: %v %v", r.Err, r.Items)
		}
		if p := part(m, 0); p.Leader == 0 || !p.Recovering {
			t.Fatalf("unclean election elected nobody: %+v", p)
		}
	})
	t.Run("the last known leader with ELR", func(t *testing.T) {
		m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3})
		applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
		alter(t, m, alterItem(m.View(), part(m, 0), 1, 2))
		alter(t, m, alterItem(m.View(), part(m, 0), 1))
		register(t, m, 1, "start-2")
		setAlive(t, m, 3, false)
		setAlive(t, m, 2, false)
		register(t, m, 2, "start-2")
		register(t, m, 3, "start-2")
		wantPartition(t, part(m, 0), 2, ids(2), nil) // KIP-966's fallback
		alter(t, m, lost(part(m, 0)))
		p := part(m, 0)
		wantPartition(t, p, 0, nil, nil)
		if p.LastKnownLeader != 0 {
			t.Fatalf("the replica that lost data stays the last known leader: %+v", p)
		}
	})
	t.Run("a member with others in sync", func(t *testing.T) {
		m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
		alter(t, m, lost(part(m, 0)))
		wantPartition(t, part(m, 0), 2, ids(2, 3), nil)
	})
	t.Run("a stale resignation", func(t *testing.T) {
		m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
		it := lost(part(m, 0))
		alter(t, m, alterItem(m.View(), part(m, 0), 1, 2))
		if res := alter(t, m, it); !errors.Is(res[0].Err, kerr.InvalidUpdateVersion) {
			t.Fatalf("stale resignation: %v", res[0].Err)
		}
		wantPartition(t, part(m, 0), 1, ids(1, 2), nil)
	})
}

// An offline ISR partition (no leader, ISR, ELR or last known leader)
// elects, once every replica has reported where its log ends, the one
// ending at the newest epoch and then furthest, Recovering; a report
// lapses when its broker restarts, and one for a partition that is not
// offline changes nothing.
func TestReportLogEnd_UncleanRecovery(t *testing.T) {
	offlineCluster := func(t *testing.T) *Metadata {
		m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
		alter(t, m, alterItem(m.View(), part(m, 0), 1))
		it := alterItem(m.View(), part(m, 0))
		it.LostData = true
		alter(t, m, it)
		wantPartition(t, part(m, 0), 0, nil, nil)
		return m
	}
	report := func(m *Metadata, id uint64, epoch int32, end int64) ItemResult {
		p, b := part(m, 0), m.View().Brokers[id]
		return alter(t, m, AlterPartitionItem{Group: p.Group, Leader: id, PartitionEpoch: p.PartitionEpoch,
			ISR: []ISRMember{{ID: id, BrokerEpoch: b.Epoch}}, LogEnd: &ReplicaLogEnd{Broker: id, LastEpoch: epoch, End: end}})[0]
	}
	t.Run("the longest log at the newest epoch leads", func(t *testing.T) {
		m := offlineCluster(t)
		report(m, 2, 1, 10)
		report(m, 1, 1, 5)
		if p := part(m, 0); p.Leader != 0 || len(p.LogEnds) != 2 {
			t.Fatalf("elected before every replica reported: %+v", p)
		}
		report(m, 3, 1, 12)
		p := part(m, 0)
		wantPartition(t, p, 3, ids(3), nil)
		if !p.Recovering || len(p.LogEnds) != 0 {
			t.Fatalf("recovered leader %+v: want Recovering and no reports left", p)
		}
	})
	t.Run("a newer epoch beats a longer log", func(t *testing.T) {
		m := offlineCluster(t)
		report(m, 1, 1, 50)
		report(m, 2, 2, 10)
		report(m, 3, 1, 40)
		wantPartition(t, part(m, 0), 2, ids(2), nil)
	})
	t.Run("a restart drops the report", func(t *testing.T) {
		m := offlineCluster(t)
		report(m, 1, 1, 50)
		report(m, 2, 1, 10)
		register(t, m, 1, "start-3")
		if p := part(m, 0); len(p.LogEnds) != 1 || p.LogEnds[0].Broker != 2 {
			t.Fatalf("reports after broker 1 restarted: %+v", p.LogEnds)
		}
		report(m, 3, 1, 40)
		wantPartition(t, part(m, 0), 0, nil, nil)
		report(m, 1, 1, 20)
		wantPartition(t, part(m, 0), 3, ids(3), nil)
	})
	t.Run("a replica that lost data is counted, never chosen", func(t *testing.T) {
		m := offlineCluster(t)
		lost := func(id uint64, end int64) {
			p, b := part(m, 0), m.View().Brokers[id]
			alter(t, m, AlterPartitionItem{Group: p.Group, Leader: id, PartitionEpoch: p.PartitionEpoch,
				ISR: []ISRMember{{ID: id, BrokerEpoch: b.Epoch}}, LogEnd: &ReplicaLogEnd{Broker: id, LastEpoch: 1, End: end, LostData: true}})
		}
		lost(1, 99)
		report(m, 2, 1, 10)
		report(m, 3, 1, 12)
		wantPartition(t, part(m, 0), 3, ids(3), nil)

		m = offlineCluster(t)
		lost(1, 99)
		lost(2, 10)
		lost(3, 12)
		if p := part(m, 0); p.Leader != 0 || len(p.LogEnds) != 3 {
			t.Fatalf("every replica lost data: %+v, want no leader and the reports kept", p)
		}
	})
	t.Run("a partition that is not offline", func(t *testing.T) {
		m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
		if res := report(m, 2, 1, 10); !errors.Is(res.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("report on a led partition: %v", res.Err)
		}
		if p := part(m, 0); len(p.LogEnds) != 0 {
			t.Fatalf("report kept: %+v", p.LogEnds)
		}
	})
}
