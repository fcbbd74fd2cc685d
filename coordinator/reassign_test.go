package coordinator

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// raftTopic returns metadata with n brokers and a raft topic "r" whose
// partitions have the given replicas.
func raftTopic(t *testing.T, n int, assignment ...[]uint64) *Metadata {
	t.Helper()
	m := NewMetadata()
	for i := 1; i <= n; i++ {
		register(t, m, uint64(i), "start-1")
	}
	r := applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(2), Partitions: int32(len(assignment)), Assignment: assignment}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return m
}

// reassign applies one ReassignPartitions item and returns its result.
func reassign(t *testing.T, m *Metadata, it ReassignItem) ItemResult {
	t.Helper()
	r := applyChecked(t, m, &Command{ReassignPartitions: &ReassignPartitions{Items: []ReassignItem{it}, AllowReplicationFactorChange: true}})
	if r.Err != nil || len(r.Items) != 1 {
		t.Fatalf("reassign %+v: %v, %d items", it, r.Err, len(r.Items))
	}
	return r.Items[0]
}

func TestReassign_StartCancelComplete(t *testing.T) {
	m := raftTopic(t, 5, []uint64{1, 2, 3})
	g := m.View().Topics["r"].Partitions[0].Group
	if res := reassign(t, m, ReassignItem{Topic: "r", Replicas: []uint64{4, 5, 2}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	p := m.View().Topics["r"].Partitions[0]
	if !slices.Equal(p.Target, []uint64{4, 5, 2}) || !slices.Equal(p.Original, []uint64{1, 2, 3}) ||
		!slices.Equal(p.Replicas, []uint64{4, 5, 2, 1, 3}) || !p.Moved {
		t.Fatalf("moving partition %+v", p)
	}
	if !slices.Equal(p.Adding(), []uint64{4, 5}) || !slices.Equal(p.Removing(), []uint64{1, 3}) {
		t.Fatalf("adding %v removing %v", p.Adding(), p.Removing())
	}

	// A cancel retargets the original; nobody leaves Replicas yet.
	if res := reassign(t, m, ReassignItem{Topic: "r", Cancel: true}); res.Err != nil {
		t.Fatal(res.Err)
	}
	p = m.View().Topics["r"].Partitions[0]
	if !slices.Equal(p.Target, []uint64{1, 2, 3}) || !slices.Equal(p.Replicas, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("cancelled partition %+v", p)
	}

	// A completion for the old target is refused; for the current one it ends the move.
	r := applyChecked(t, m, &Command{CompleteReassignment: &CompleteReassignment{Group: g, Target: []uint64{4, 5, 2}}})
	if !errors.Is(r.Err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("complete a stale target: %v", r.Err)
	}
	r = applyChecked(t, m, &Command{CompleteReassignment: &CompleteReassignment{Group: g, Target: []uint64{1, 2, 3}}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	p = m.View().Topics["r"].Partitions[0]
	if p.Moving() || len(p.Original) > 0 || !slices.Equal(p.Replicas, []uint64{1, 2, 3}) || !p.Moved {
		t.Fatalf("completed partition %+v", p)
	}
	r = applyChecked(t, m, &Command{CompleteReassignment: &CompleteReassignment{Group: g, Target: []uint64{1, 2, 3}}})
	if !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("complete twice: %v", r.Err)
	}
}

func TestReassign_ReorderIsImmediate(t *testing.T) {
	m := raftTopic(t, 3, []uint64{1, 2, 3})
	if res := reassign(t, m, ReassignItem{Topic: "r", Replicas: []uint64{3, 1, 2}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	p := m.View().Topics["r"].Partitions[0]
	if p.Moving() || p.Moved || !slices.Equal(p.Replicas, []uint64{3, 1, 2}) {
		t.Fatalf("reordered partition %+v", p)
	}
}

func TestReassign_BadInputChangesNothing(t *testing.T) {
	m := raftTopic(t, 4, []uint64{1, 2, 3})
	i := isrCluster(t, 4, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3})
	cases := []struct {
		name string
		m    *Metadata
		it   ReassignItem
		rf   bool
		want *kerr.Error
	}{
		{"unknown topic", m, ReassignItem{Topic: "x", Replicas: []uint64{1}}, true, kerr.UnknownTopicOrPartition},
		{"unknown partition", m, ReassignItem{Topic: "r", Partition: 1, Replicas: []uint64{1}}, true, kerr.UnknownTopicOrPartition},
		{"negative partition", m, ReassignItem{Topic: "r", Partition: -1, Replicas: []uint64{1}}, true, kerr.UnknownTopicOrPartition},
		{"no replicas", m, ReassignItem{Topic: "r"}, true, kerr.InvalidReplicaAssignment},
		{"duplicate", m, ReassignItem{Topic: "r", Replicas: []uint64{1, 2, 2}}, true, kerr.InvalidReplicaAssignment},
		{"unknown broker", m, ReassignItem{Topic: "r", Replicas: []uint64{1, 2, 9}}, true, kerr.InvalidReplicaAssignment},
		{"rf change not allowed", m, ReassignItem{Topic: "r", Replicas: []uint64{1, 2}}, false, kerr.InvalidReplicationFactor},
		{"cancel without a move", m, ReassignItem{Topic: "r", Cancel: true}, true, kerr.NoReassignmentInProgress},
		{"isr below min.insync.replicas", i, ReassignItem{Topic: "i", Replicas: []uint64{4}}, true, kerr.InvalidReplicationFactor},
	}
	for _, tc := range cases {
		before := tc.m.View()
		r := applyChecked(t, tc.m, &Command{ReassignPartitions: &ReassignPartitions{Items: []ReassignItem{tc.it}, AllowReplicationFactorChange: tc.rf}})
		if r.Err != nil || len(r.Items) != 1 || !errors.Is(r.Items[0].Err, tc.want) {
			t.Errorf("%s: %v %+v, want %v", tc.name, r.Err, r.Items, tc.want)
		}
		for _, name := range before.TopicNames() {
			if !slices.EqualFunc(before.Topics[name].Partitions, tc.m.View().Topics[name].Partitions, partitionsEqual) {
				t.Errorf("%s: topic %s changed", tc.name, name)
			}
		}
	}

	// A second move of a moving partition is refused, and so is a
	// completion naming another group or an ISR partition.
	reassign(t, m, ReassignItem{Topic: "r", Replicas: []uint64{2, 3, 4}})
	if res := reassign(t, m, ReassignItem{Topic: "r", Replicas: []uint64{1, 3, 4}}); !errors.Is(res.Err, kerr.ReassignmentInProgress) {
		t.Errorf("second move: %v", res.Err)
	}
	if r := applyChecked(t, m, &Command{CompleteReassignment: &CompleteReassignment{Group: 99, Target: []uint64{1}}}); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("complete an unknown group: %v", r.Err)
	}
	ig := i.View().Topics["i"].Partitions[0].Group
	if r := applyChecked(t, i, &Command{CompleteReassignment: &CompleteReassignment{Group: ig, Target: []uint64{1}}}); !errors.Is(r.Err, kerr.InvalidRequest) {
		t.Errorf("complete an ISR partition: %v", r.Err)
	}
}

func partitionsEqual(a, b Partition) bool {
	return slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.Target, b.Target) && slices.Equal(a.Original, b.Original) &&
		a.Moved == b.Moved && samePartition(a, b)
}

// An ISR partition's move ends at apply once the ISR holds the whole
// target; a removed leader hands over to a target replica of the ISR.
func TestReassign_ISRFinishesWhenTargetInSync(t *testing.T) {
	m := isrCluster(t, 4, nil, []uint64{1, 2, 3})
	reassign(t, m, ReassignItem{Topic: "i", Replicas: []uint64{4, 2, 3}})
	p := part(m, 0)
	if !p.Moving() || p.Leader != 1 || !slices.Equal(p.Replicas, []uint64{4, 2, 3, 1}) {
		t.Fatalf("moving ISR partition %+v", p)
	}
	// The leader adds 4 to the ISR: the move ends, 1 leaves, 2 leads.
	res := alter(t, m, alterItem(m.View(), p, 1, 2, 3, 4))
	p = part(m, 0)
	if p.Moving() || !slices.Equal(p.Replicas, []uint64{4, 2, 3}) || !slices.Equal(p.ISR, []uint64{4, 2, 3}) || p.Leader == 1 || p.Leader == 0 {
		t.Fatalf("finished ISR partition %+v", p)
	}
	if !errors.Is(res[0].Err, kerr.NewLeaderElected) {
		t.Fatalf("the old leader's AlterPartition: %v, want NEW_LEADER_ELECTED", res[0].Err)
	}

	// A move to a subset of the ISR ends at once.
	reassign(t, m, ReassignItem{Topic: "i", Replicas: []uint64{2, 3}})
	if p = part(m, 0); p.Moving() || !slices.Equal(p.Replicas, []uint64{2, 3}) || !slices.Equal(p.ISR, []uint64{2, 3}) {
		t.Fatalf("shrunk ISR partition %+v", p)
	}
}

// The invariants refuse half-recorded moves.
func TestReassign_CheckMove(t *testing.T) {
	good := Partition{Replicas: []uint64{4, 5, 1}, Target: []uint64{4, 5}, Original: []uint64{5, 1}, Moved: true}
	if err := checkMove(good); err != nil {
		t.Fatal(err)
	}
	bad := []Partition{
		{Replicas: []uint64{4, 5, 1}, Target: []uint64{4, 5}, Moved: true},                           // no original
		{Replicas: []uint64{4, 5, 1}, Target: []uint64{4, 5}, Original: []uint64{5, 1}},              // not marked moved
		{Replicas: []uint64{5, 4, 1}, Target: []uint64{4, 5}, Original: []uint64{5, 1}, Moved: true}, // target not first
		{Replicas: []uint64{4, 5}, Target: []uint64{4, 5}, Original: []uint64{5, 1}, Moved: true},    // original missing
		{Replicas: []uint64{4, 5, 1}, Target: []uint64{4, 5}, Original: []uint64{1, 1}, Moved: true}, // repeated
		{Replicas: []uint64{4, 5, 1}, Original: []uint64{5, 1}, Moved: true},                         // no target
	}
	for i, p := range bad {
		if checkMove(p) == nil {
			t.Errorf("case %d: %+v passed", i, p)
		}
	}
}
