package jepsen

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

func TestRaftqConfig_Validate(t *testing.T) {
	good := DefaultRaftqConfig()
	good.Binary = "/bin/true"
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with a binary: %v", err)
	}
	for name, mod := range map[string]func(*RaftqConfig){
		"no binary":     func(c *RaftqConfig) { c.Binary = "" },
		"no nodes":      func(c *RaftqConfig) { c.Nodes = 0 },
		"bad fsync":     func(c *RaftqConfig) { c.Fsync = "sometimes" },
		"no report dir": func(c *RaftqConfig) { c.Run.ReportDir = "" },
		"no timeout":    func(c *RaftqConfig) { c.ReadyTimeout = 0 },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRaftqConfig_PlanMembership(t *testing.T) {
	c := DefaultRaftqConfig()
	c.Schedule.Kinds = []chaos.Kind{chaos.KindMembership, chaos.KindKill}
	c.Run.Workload.Duration = 5 * time.Minute
	s, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Config.Membership; m.ReplicationFactor != 3 || m.MinReplicas != 1 || len(s.Config.Nodes) != 5 || s.Config.Duration != 5*time.Minute {
		t.Errorf("raft: membership %+v on %v for %s", m, s.Config.Nodes, s.Config.Duration)
	}
	c.Run.Workload.TopicConfigs = map[string]string{"replication.mode": "isr", "min.insync.replicas": "2"}
	if s, err = c.Plan(); err != nil || s.Config.Membership.MinReplicas != 2 {
		t.Errorf("isr, min.insync.replicas 2: %+v, %v", s.Config.Membership, err)
	}
	if got := c.setup().MembershipActions; !slices.Equal(got, []string{"move", "reorder", "cancel", "kill-mid-move", "decommission"}) {
		t.Errorf("setup names actions %v", got)
	}
	c.Run.Workload.TopicConfigs["min.insync.replicas"] = "4"
	if _, err := c.Plan(); err == nil {
		t.Error("targets of at least 4 replicas for a topic of 3 were planned")
	}
	c.Run.Workload.TopicConfigs["min.insync.replicas"] = "two"
	if _, err := c.Plan(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("min.insync.replicas two: %v", err)
	}
}

func TestLeadersFrom_HighestTermLeads(t *testing.T) {
	st := func(node uint64, parts ...any) raftqStatus {
		s := raftqStatus{NodeID: node}
		for i := 0; i < len(parts); i += 3 {
			s.Partitions = append(s.Partitions, struct {
				Topic     string   `json:"topic"`
				Partition int32    `json:"partition"`
				Role      string   `json:"role"`
				Term      uint64   `json:"term"`
				Leader    uint64   `json:"leader"`
				Replicas  []uint64 `json:"replicas"`
			}{Topic: "t", Partition: int32(parts[i].(int)), Role: parts[i+1].(string), Term: uint64(parts[i+2].(int))})
		}
		return s
	}
	got := leadersFrom([]raftqStatus{
		st(1, 0, "leader", 3, 1, "follower", 4),
		st(2, 0, "follower", 4, 1, "leader", 4),
		st(3, 0, "leader", 5), // a newer leader of t/0; the old one has not heard yet
	}, "t")
	if want := map[int32]int{0: 3, 1: 2}; !maps.Equal(got, want) {
		t.Errorf("leaders %v, want %v", got, want)
	}
}

func TestMetadataLeader_OnlyASelfDeclaredLeader(t *testing.T) {
	st := func(node uint64, role string, term uint64) raftqStatus {
		s := raftqStatus{NodeID: node}
		s.Metadata.Role, s.Metadata.Term, s.Metadata.Leader = role, term, 9
		return s
	}
	if got := metadataLeader([]raftqStatus{st(1, "leader", 3), st(2, "follower", 4), st(3, "leader", 4)}); got != 3 {
		t.Errorf("leader %d, want 3 (the leader of the higher term)", got)
	}
	if got := metadataLeader([]raftqStatus{st(1, "follower", 3)}); got != 0 {
		t.Errorf("leader %d without a node that leads, want 0", got)
	}
}
