package coordinator

import (
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"
)

// AdmitNode records the joiner's address; again with the same
// incarnation it only moves the address; another incarnation of an
// admitted or registered id, id 0, no incarnation or an address nobody
// can dial are refused and change nothing.
func TestAdmitNode(t *testing.T) {
	m := NewMetadata()
	register(t, m, 1, "s") // incarnation "1"
	admit := func(id uint64, addr, inc string) Result {
		t.Helper()
		return applyChecked(t, m, &Command{AdmitNode: &AdmitNode{ID: id, PeerAddr: addr, Incarnation: inc}})
	}
	if r := admit(4, "10.0.0.4:9093", "inc-4"); r.Err != nil {
		t.Fatal(r.Err)
	}
	first := m.View().Admitted[4]
	if first.PeerAddr != "10.0.0.4:9093" || first.Incarnation != "inc-4" || first.Index == 0 {
		t.Fatalf("admission %+v", first)
	}
	if r := admit(4, "10.0.0.5:9093", "inc-4"); r.Err != nil {
		t.Fatalf("a retried join: %v", r.Err)
	}
	if a := m.View().Admitted[4]; a.PeerAddr != "10.0.0.5:9093" || a.Index != first.Index {
		t.Errorf("re-admission %+v, first %+v", a, first)
	}
	if first.PeerAddr != "10.0.0.4:9093" {
		t.Error("re-admission changed the published state's admission in place")
	}
	before := m.View()
	for _, c := range []struct {
		name      string
		id        uint64
		addr, inc string
		code      *kerr.Error
	}{
		{"another incarnation of an admitted id", 4, "10.0.0.4:9093", "other", kerr.InconsistentClusterID},
		{"another incarnation of a registered id", 1, "10.0.0.1:9093", "other", kerr.InconsistentClusterID},
		{"node id 0", 0, "10.0.0.9:9093", "inc", kerr.InvalidRequest},
		{"no incarnation", 5, "10.0.0.9:9093", "", kerr.InvalidRequest},
		{"a wildcard address", 5, "0.0.0.0:9093", "inc", kerr.InvalidRequest},
		{"no port", 5, "10.0.0.9", "inc", kerr.InvalidRequest},
	} {
		r := admit(c.id, c.addr, c.inc)
		if !errors.Is(r.Err, c.code) {
			t.Errorf("%s: %v, want %v", c.name, r.Err, c.code)
		}
		if m.View() != before {
			t.Errorf("%s changed the state", c.name)
		}
	}
	// A registration must come from the admitted incarnation.
	r := applyChecked(t, m, &Command{RegisterBroker: &Broker{ID: 4, KafkaAddr: "h:4", Incarnation: "other"}})
	if !errors.Is(r.Err, kerr.InconsistentClusterID) {
		t.Errorf("registration of admitted node 4 from another incarnation: %v", r.Err)
	}
	if r := applyChecked(t, m, &Command{RegisterBroker: &Broker{ID: 4, KafkaAddr: "h:4", PeerAddr: "10.0.0.6:9093", Incarnation: "inc-4"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := m.View().PeerAddrs()[4]; got != "10.0.0.6:9093" {
		t.Errorf("peer address of node 4 after it registered: %q, want the registration's", got)
	}
	if got := m.View().AdmittedIDs(); len(got) != 1 || got[0] != 4 {
		t.Errorf("admitted ids %v", got)
	}
}

// The admissions survive a snapshot and restore.
func TestAdmitNode_Snapshot(t *testing.T) {
	m := NewMetadata()
	applyChecked(t, m, &Command{AdmitNode: &AdmitNode{ID: 7, PeerAddr: "h7:9093", Incarnation: "i7"}})
	b, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := NewMetadata()
	if err := r.Restore(&raftpb.Snapshot{Data: b}); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(r.View().Admitted, m.View().Admitted, func(a, b *Admission) bool { return *a == *b }) {
		t.Errorf("restored %v, want %v", r.View().Admitted, m.View().Admitted)
	}
	var old State // a snapshot from before admissions
	if err := json.Unmarshal([]byte(`{"brokers":{},"topics":{}}`), &old); err != nil || old.Admitted != nil {
		t.Errorf("old snapshot: %v %v", old.Admitted, err)
	}
}

func TestPeerAddrs(t *testing.T) {
	s := newState()
	s.Brokers[1] = &Broker{ID: 1, PeerAddr: "[::]:9093"}
	s.Brokers[2] = &Broker{ID: 2, PeerAddr: "n2:9093"}
	s.Admitted = map[uint64]*Admission{2: {PeerAddr: "old:9093"}, 3: {PeerAddr: "n3:9093"}}
	got := s.PeerAddrs()
	want := map[uint64]string{2: "n2:9093", 3: "n3:9093"}
	if !maps.Equal(got, want) {
		t.Errorf("PeerAddrs %v, want %v", got, want)
	}
}

// State.check refuses an admission without an address or incarnation,
// or whose incarnation is not its registered broker's.
func TestCheckAdmissions(t *testing.T) {
	s := newState()
	s.Brokers[4] = &Broker{ID: 4, Incarnation: "a"}
	for _, c := range []struct {
		name string
		adm  *Admission
		ok   bool
	}{
		{"good", &Admission{PeerAddr: "h:1", Incarnation: "a"}, true},
		{"no address", &Admission{Incarnation: "a"}, false},
		{"no incarnation", &Admission{PeerAddr: "h:1"}, false},
		{"another incarnation than the broker's", &Admission{PeerAddr: "h:1", Incarnation: "b"}, false},
	} {
		s.Admitted = map[uint64]*Admission{4: c.adm}
		if err := s.check(); (err == nil) != c.ok {
			t.Errorf("%s: check says %v", c.name, err)
		}
	}
}
