package coordinator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/raftgroup"
)

func maintenance(t *testing.T, m *Metadata, id uint64, on bool) Result {
	t.Helper()
	return applyChecked(t, m, &Command{SetMaintenance: &SetMaintenance{ID: id, On: on}})
}

// Maintenance on elects another ISR member wherever the broker led, and
// leaves it in every ISR; partitions it does not lead, and raft topics,
// are left as they were.
func TestSetMaintenance_ElectsAwayAndKeepsTheISR(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3}, []uint64{2, 3, 1}, []uint64{3, 1, 2})
	applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(9), Partitions: 3, ReplicationFactor: 3}})
	raft := m.View().Topics["r"]
	before := part(m, 0)
	untouched := part(m, 1)
	if r := maintenance(t, m, 1, true); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantPartition(t, part(m, 0), 2, ids(1, 2, 3), nil)
	if p := part(m, 0); p.LeaderTerm != before.LeaderTerm+1 {
		t.Errorf("leader epoch %d after the election, want %d", p.LeaderTerm, before.LeaderTerm+1)
	}
	if p := part(m, 1); !samePartition(p, untouched) {
		t.Errorf("a partition broker 1 did not lead changed: %+v, was %+v", p, untouched)
	}
	if b := m.View().Brokers[1]; !b.InMaintenance || !b.Eligible() || b.TakesLeadership() {
		t.Errorf("broker 1 in maintenance: %+v (eligible %v, takes leadership %v), want eligible and in maintenance",
			b, b.Eligible(), b.TakesLeadership())
	}
	if m.View().Topics["r"] != raft {
		t.Error("maintenance changed raft topic r")
	}
}

// A broker in maintenance is elected only when no other ISR member may
// lead: not by a preferred election or the election after a fencing
// while another member is there, but as the last one left; a new ISR
// member then takes the leadership from it at once.
func TestSetMaintenance_ElectionsPickItLast(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3}, []uint64{2, 1, 3})
	maintenance(t, m, 1, true)
	g := part(m, 0).Group
	r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{g}, Preferred: true}})
	if !errors.Is(r.Items[0].Err, kerr.PreferredLeaderNotAvailable) {
		t.Errorf("preferred election of the broker in maintenance: %v, want PREFERRED_LEADER_NOT_AVAILABLE", r.Items[0].Err)
	}
	setAlive(t, m, 2, false) // led both: broker 3 is left beside broker 1
	wantPartition(t, part(m, 0), 3, ids(1, 3), nil)
	wantPartition(t, part(m, 1), 3, ids(1, 3), nil)
	setAlive(t, m, 3, false) // only broker 1 is left
	wantPartition(t, part(m, 0), 1, ids(1), nil)
	setAlive(t, m, 2, true)
	setAlive(t, m, 3, true)
	res := alter(t, m, alterItem(m.View(), part(m, 0), 1, 3))
	if !errors.Is(res[0].Err, kerr.NewLeaderElected) {
		t.Errorf("broker 1 adding broker 3 back: %v, want NEW_LEADER_ELECTED (the change stands)", res[0].Err)
	}
	wantPartition(t, part(m, 0), 3, ids(1, 3), nil)
	applyChecked(t, m, &Command{CreatePartitions: &CreatePartitions{Name: "i", Count: 3}})
	if p := part(m, 2); p.Leader == 1 || !slices.Contains(p.ISR, 1) {
		t.Errorf("a new partition with broker 1 in maintenance: %+v, want it in the ISR and led by another", p)
	}
}

// Only one broker may be in maintenance, and an unknown broker none; a
// refusal changes nothing, turning it on twice changes nothing the
// second time, and once off another broker may go into maintenance and
// the first may lead again.
func TestSetMaintenance_OneBrokerAtATime(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	if r := maintenance(t, m, 7, true); !errors.Is(r.Err, kerr.BrokerNotAvailable) {
		t.Errorf("unknown broker: %v, want BROKER_NOT_AVAILABLE", r.Err)
	}
	maintenance(t, m, 1, true)
	once := m.View()
	if r := maintenance(t, m, 1, true); r.Err != nil || m.View().Brokers[1] != once.Brokers[1] || m.View().Topics["i"] != once.Topics["i"] {
		t.Errorf("maintenance on twice: %v, or the state changed", r.Err)
	}
	r := maintenance(t, m, 2, true)
	if !errors.Is(r.Err, kerr.InvalidRequest) || !strings.Contains(r.Err.Error(), "broker 1 is in maintenance") {
		t.Errorf("a second broker: %v, want INVALID_REQUEST naming broker 1", r.Err)
	}
	if after := m.View(); after.Brokers[2] != once.Brokers[2] || after.Topics["i"] != once.Topics["i"] {
		t.Error("a refused maintenance changed the state")
	}
	if r := maintenance(t, m, 1, false); r.Err != nil {
		t.Fatal(r.Err)
	}
	if b := m.View().Brokers[1]; b.InMaintenance || !b.TakesLeadership() {
		t.Errorf("broker 1 after maintenance off: %+v", b)
	}
	g := part(m, 0).Group
	if r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{g}, Preferred: true}}); r.Items[0].Err != nil {
		t.Errorf("preferred election of broker 1 after maintenance off: %v", r.Items[0].Err)
	}
	wantPartition(t, part(m, 0), 1, ids(1, 2, 3), nil)
	if r := maintenance(t, m, 2, true); r.Err != nil {
		t.Errorf("broker 2 once broker 1 is out of maintenance: %v", r.Err)
	}
	if r := maintenance(t, m, 3, false); r.Err != nil {
		t.Errorf("maintenance off for a broker not in it: %v", r.Err)
	}
}

// The mark survives a restart (a registration with a new StartID) and a
// snapshot.
func TestSetMaintenance_SurvivesRestartAndSnapshot(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	maintenance(t, m, 1, true)
	register(t, m, 1, "start-2")
	if b := m.View().Brokers[1]; !b.InMaintenance || b.StartID != "start-2" {
		t.Errorf("broker 1 after its restart: %+v, want still in maintenance", b)
	}
	if p := part(m, 0); p.Leader == 1 {
		t.Errorf("broker 1 leads after its restart in maintenance: %+v", p)
	}
	if b := restored(t, m).View().Brokers[1]; !b.InMaintenance {
		t.Errorf("broker 1 after a snapshot: %+v, want still in maintenance", b)
	}
}

// Logs written by the binary before maintenance mode and unclean
// ElectLeaders (commit 2d5687c: ISR control sequences and the fuzz
// seeds, with controlled shutdown and elections) replay to the very
// state that binary reached.
func TestMetadata_PreMaintenanceLogsReplayUnchanged(t *testing.T) {
	f, err := os.Open("testdata/premaintenance-logs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	logs := 0
	for sc.Scan() {
		var rec struct {
			Seed int `json:"seed"`
			Log  []struct {
				Index uint64          `json:"index"`
				Data  json.RawMessage `json:"data"`
			} `json:"log"`
			Snapshot json.RawMessage `json:"snapshot"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		m := NewMetadata()
		for _, e := range rec.Log {
			if _, err := m.Apply(raftgroup.Entry{Index: e.Index, Term: 1, Data: e.Data}); err != nil {
				t.Fatalf("log %d entry %d: %v", rec.Seed, e.Index, err)
			}
		}
		if got := snapshotOf(t, m); !bytes.Equal(got, rec.Snapshot) {
			t.Errorf("log %d replays differently from the old binary:\n got %s\nwant %s", rec.Seed, got, rec.Snapshot)
		}
		logs++
	}
	if err := sc.Err(); err != nil || logs < 5 {
		t.Fatalf("read %d logs: %v", logs, err)
	}
}

// An unclean ElectLeaders elects an eligible replica outside the ISR of
// a leaderless partition whose topic does not enable unclean election,
// marking it recovering; a partition with a leader needs none, and one
// with no eligible replica at all has none.
func TestElectLeaders_Unclean(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3}, []uint64{2, 3, 1})
	alter(t, m, alterItem(m.View(), part(m, 0), 1)) // ISR [1]
	setAlive(t, m, 1, false)
	wantPartition(t, part(m, 0), 0, ids(1), nil)
	g, led := part(m, 0).Group, part(m, 1).Group
	r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{g}}})
	if !errors.Is(r.Items[0].Err, kerr.EligibleLeadersNotAvailable) {
		t.Errorf("clean election with the ISR dead: %v, want ELIGIBLE_LEADERS_NOT_AVAILABLE", r.Items[0].Err)
	}
	r = applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{g, led}, Unclean: true}})
	if r.Items[0].Err != nil {
		t.Fatalf("unclean election: %v", r.Items[0].Err)
	}
	if p := part(m, 0); p.Leader != 2 || !slices.Equal(p.ISR, ids(2)) || !p.Recovering {
		t.Errorf("after the unclean election: %+v, want broker 2 alone in the ISR, recovering", p)
	}
	if !errors.Is(r.Items[1].Err, kerr.ElectionNotNeeded) {
		t.Errorf("unclean election of a led partition: %v, want ELECTION_NOT_NEEDED", r.Items[1].Err)
	}
	if r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{g}, Preferred: true, Unclean: true}}); !errors.Is(r.Err, kerr.InvalidRequest) {
		t.Errorf("preferred and unclean: %v, want INVALID_REQUEST", r.Err)
	}

	m = isrCluster(t, 2, nil, []uint64{1, 2})
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	setAlive(t, m, 1, false)
	setAlive(t, m, 2, false)
	r = applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{part(m, 0).Group}, Unclean: true}})
	if !errors.Is(r.Items[0].Err, kerr.EligibleLeadersNotAvailable) {
		t.Errorf("unclean election with every replica dead: %v, want ELIGIBLE_LEADERS_NOT_AVAILABLE", r.Items[0].Err)
	}
}

// With ELR on, an unclean election runs once ISR and ELR hold nobody
// alive: the ISR is empty and the ELR's member dead.
func TestElectLeaders_UncleanWithEmptyISR(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "1"}, []uint64{1, 2, 3})
	applyChecked(t, m, &Command{UpdateFeatures: &UpdateFeatures{EligibleLeaderReplicas: true}})
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	setAlive(t, m, 1, false)
	if p := part(m, 0); p.Leader != 0 || len(p.ISR) != 0 {
		t.Fatalf("partition after its only ISR member died with ELR on: %+v, want no leader and an empty ISR", p)
	}
	r := applyChecked(t, m, &Command{ElectLeaders: &ElectLeaders{Groups: []uint64{part(m, 0).Group}, Unclean: true}})
	if r.Items[0].Err != nil {
		t.Fatal(r.Items[0].Err)
	}
	if p := part(m, 0); p.Leader != 2 || !p.Recovering {
		t.Errorf("after the unclean election: %+v, want broker 2 leading, recovering", p)
	}
}

// The controller proposes maintenance only when every registered broker
// applies the command; the controller here has no group 0 to propose
// to, so a proposal would panic.
func TestController_SetMaintenanceNeedsEveryBrokerToApplyIt(t *testing.T) {
	m := NewMetadata()
	for id := uint64(1); id <= 2; id++ {
		applyChecked(t, m, &Command{RegisterBroker: &Broker{ID: id, StartID: "s", SetMaintenance: id == 1}})
	}
	c := &Controller{cfg: ControllerConfig{Metadata: m}, self: Broker{ID: 1, StartID: "s"}}
	if err := c.SetMaintenance(context.Background(), 1, true); !errors.Is(err, kerr.UnsupportedVersion) || !strings.Contains(err.Error(), "broker 2") {
		t.Errorf("with broker 2 of an older version: %v, want UNSUPPORTED_VERSION naming it", err)
	}
}

// Leader balance hands a partition to its preferred replica only while
// that replica is out of maintenance.
func TestController_BalanceSkipsTheBrokerInMaintenance(t *testing.T) {
	local := &fakeLocal{term: 3}
	c := newTestControllerAs(t, Broker{ID: 1, KafkaAddr: "127.0.0.1:9092", SetMaintenance: true}, func(cfg *ControllerConfig) {
		cfg.Local = func() []LocalReplica { return []LocalReplica{local} }
		cfg.LeaderBalanceInterval = 20 * time.Millisecond
	})
	m := c.cfg.Metadata
	waitFor(t, "the registration", func() bool { b, ok := m.View().Brokers[1]; return ok && b.Alive })
	mustPropose(t, c, &Command{RegisterBroker: &Broker{ID: 2, KafkaAddr: "127.0.0.1:9093", SetMaintenance: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.SetMaintenance(ctx, 2, true); err != nil {
		t.Fatal(err)
	}
	mustPropose(t, c, &Command{CreateTopic: &CreateTopic{Name: "t", ID: [16]byte{1}, Partitions: 1, ReplicationFactor: 2,
		Assignment: [][]uint64{{2, 1}}}})
	local.mu.Lock()
	local.group = m.View().Topics["t"].Partitions[0].Group
	local.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // fifteen balance rounds
	if got := local.transfers(); len(got) != 0 {
		t.Errorf("leadership handed to %v while the preferred replica is in maintenance", got)
	}
	if err := c.SetMaintenance(ctx, 2, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a transfer to the preferred replica, out of maintenance", func() bool { return len(local.transfers()) > 0 })
	if got := local.transfers()[0]; got != 2 {
		t.Errorf("leadership handed to %d, want the preferred replica 2", got)
	}
}
