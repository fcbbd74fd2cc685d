package jepsen

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

func TestShippedScripts_LoadAndFitFiveNodes(t *testing.T) {
	if got, want := ShippedScripts(), []string{"last-replica-standing", "unclean-election"}; !slices.Equal(got, want) {
		t.Fatalf("shipped scripts %v, want %v", got, want)
	}
	for _, name := range ShippedScripts() {
		s, err := LoadScript(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != name || s.MinNodes != 5 || s.End() > 45*time.Second {
			t.Errorf("%s: name %q, min nodes %d, ends at %s", name, s.Name, s.MinNodes, s.End())
		}
		sched, err := s.Schedule([]int{1, 2, 3, 4, 5})
		if err != nil {
			t.Fatal(err)
		}
		if sched.Partition != chaos.PartitionAwayFromMetadataLeader || len(sched.Faults) != 2 {
			t.Errorf("%s: %+v", name, sched)
		}
		// Both cut the followers from the leader first, then hit the leader
		// while the cut still holds.
		cut, hit := sched.Faults[0], sched.Faults[1]
		if cut.Kind != chaos.KindPartition || !slices.Equal(hit.Select, []string{chaos.RoleLeader}) ||
			hit.Start <= cut.Start+10*time.Second || hit.Start >= cut.Stop {
			t.Errorf("%s: cut %s, then %s", name, cut, hit)
		}
		if _, err := s.Schedule([]int{1, 2, 3}); !errors.Is(err, chaos.ErrTooFewNodes) {
			t.Errorf("%s on 3 nodes: %v", name, err)
		}
	}
	if _, err := LoadScript("no-such-script"); err == nil || !strings.Contains(err.Error(), "last-replica-standing") {
		t.Errorf("unknown script: %v, want the list of shipped ones", err)
	}
	p := filepath.Join(t.TempDir(), "mine.json")
	if err := os.WriteFile(p, []byte(`{"name": "mine", "steps": [{"kind": "pause", "start": "1s", "stop": "2s", "nodes": ["2"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := LoadScript(p); err != nil || s.Name != "mine" {
		t.Errorf("script file: %+v %v", s, err)
	}
}

func TestRaftqConfig_ValidateScript(t *testing.T) {
	s, err := LoadScript("last-replica-standing")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultRaftqConfig()
	c.Binary, c.Script = "raftq", &s
	c.Run.Workload.Duration = 45 * time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.lazyFS() {
		t.Error("a script with a power loss runs without lazyfs")
	}
	if got := c.setup().Nemesis; !slices.Equal(got, []string{"script:last-replica-standing"}) {
		t.Errorf("setup nemesis %v", got)
	}
	c.Run.Workload.Duration = 20 * time.Second
	if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("a script longer than the run: %v", err)
	}
	c.Run.Workload.Duration, c.Nodes = time.Minute, 3
	if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("a 5-node script on 3 nodes: %v", err)
	}
}

// status builds one node's status: its metadata view and the partitions
// of topic "t" it holds, as partition -> (role, term, replicas).
func status(node, metaLeader uint64, metaTerm uint64, parts map[int32]struct {
	role     string
	term     uint64
	replicas []uint64
}) raftqStatus {
	var s raftqStatus
	s.NodeID = node
	s.Metadata.Leader, s.Metadata.Term = metaLeader, metaTerm
	for p, ps := range parts {
		s.Partitions = append(s.Partitions, struct {
			Topic     string   `json:"topic"`
			Partition int32    `json:"partition"`
			Role      string   `json:"role"`
			Term      uint64   `json:"term"`
			Leader    uint64   `json:"leader"`
			Replicas  []uint64 `json:"replicas"`
		}{Topic: "t", Partition: p, Role: ps.role, Term: ps.term, Replicas: ps.replicas})
	}
	return s
}

type ps = struct {
	role     string
	term     uint64
	replicas []uint64
}

func TestRolesFrom_PicksAPartitionAwayFromTheMetadataLeader(t *testing.T) {
	// Node 1 leads group 0 (term 3 beats node 5's stale term-2 view of 5).
	// Partition 0 has replicas 1,2,3; partition 1 has 2,4,5, led by 4 in
	// term 7 (node 2's term-6 leadership is stale).
	sts := []raftqStatus{
		status(1, 1, 3, map[int32]ps{0: {"leader", 2, []uint64{1, 2, 3}}}),
		status(2, 1, 3, map[int32]ps{0: {"follower", 2, []uint64{1, 2, 3}}, 1: {"leader", 6, []uint64{2, 4, 5}}}),
		status(4, 1, 3, map[int32]ps{1: {"leader", 7, []uint64{2, 4, 5}}}),
		status(5, 5, 2, map[int32]ps{1: {"follower", 7, []uint64{2, 4, 5}}}),
	}
	nodes := []int{1, 2, 3, 4, 5}
	r, err := rolesFrom(sts, nodes, "t", 2, chaos.PartitionAwayFromMetadataLeader)
	if err != nil {
		t.Fatal(err)
	}
	want := chaos.RoleMap{Partition: "t/1", Nodes: map[string][]int{
		chaos.RoleLeader: {4}, chaos.RoleFollowers: {2, 5}, chaos.RoleReplicas: {2, 4, 5},
		chaos.RoleOthers: {1, 3}, chaos.RoleMetadataLeader: {1},
	}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("roles %s, want %s", r, want)
	}
	if r, err = rolesFrom(sts, nodes, "t", 2, "0"); err != nil || r.Nodes[chaos.RoleLeader][0] != 1 {
		t.Errorf("partition 0: %s %v", r, err)
	}
	if _, err := rolesFrom(sts[:1], nodes, "t", 1, chaos.PartitionAwayFromMetadataLeader); err == nil {
		t.Error("picked a partition with a replica on the metadata leader")
	}
	if _, err := rolesFrom(nil, nodes, "t", 2, "0"); err == nil {
		t.Error("roles without any status")
	}
}
