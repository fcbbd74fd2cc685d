package coordinator

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ISR configs carry Kafka's names, types and defaults, and the keys
// only ISR mode reads say why a raft topic refuses them.
func TestTopicConfigDefs_ISRConfigs(t *testing.T) {
	want := map[string]struct {
		def     string
		typ     kmsg.ConfigType
		isrOnly bool
	}{
		"replication.mode":               {"raft", kmsg.ConfigTypeString, false},
		"min.insync.replicas":            {"1", kmsg.ConfigTypeInt, true},
		"unclean.leader.election.enable": {"false", kmsg.ConfigTypeBoolean, true},
		"flush.messages":                 {"9223372036854775807", kmsg.ConfigTypeLong, true},
		"flush.ms":                       {"9223372036854775807", kmsg.ConfigTypeLong, true},
		"retention.ms":                   {"604800000", kmsg.ConfigTypeLong, false},
	}
	seen := 0
	for _, d := range TopicConfigDefs() {
		w, ok := want[d.Name]
		if !ok {
			continue
		}
		seen++
		if d.Default != w.def || d.Type != w.typ || (d.ISROnly != "") != w.isrOnly {
			t.Errorf("%s: default %q type %v isr-only %q; want %q %v %v", d.Name, d.Default, d.Type, d.ISROnly, w.def, w.typ, w.isrOnly)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d configs", seen, len(want))
	}
}

func TestCheckCreate(t *testing.T) {
	cases := []struct {
		name string
		cfgs map[string]string
		rf   int
		want string // a substring of the error; "" for none
	}{
		{"raft defaults", nil, 3, ""},
		{"raft explicit mode", map[string]string{"replication.mode": "raft", "retention.ms": "5"}, 3, ""},
		{"raft min isr", map[string]string{"min.insync.replicas": "2"}, 3, "min.insync.replicas applies to replication.mode=isr; a raft topic's acks=all waits for a majority of its replicas"},
		{"raft min isr at its default", map[string]string{"min.insync.replicas": "1"}, 3, "min.insync.replicas applies"},
		{"raft unclean", map[string]string{"unclean.leader.election.enable": "false"}, 3, "unclean.leader.election.enable applies to replication.mode=isr"},
		{"raft flush.messages", map[string]string{"flush.messages": "1"}, 3, "--fsync"},
		{"raft flush.ms", map[string]string{"replication.mode": "raft", "flush.ms": "1000"}, 3, "flush.ms applies"},
		{"isr everything", map[string]string{"replication.mode": "isr", "min.insync.replicas": "2", "unclean.leader.election.enable": "true", "flush.messages": "1", "flush.ms": "10"}, 3, ""},
		{"isr min isr = rf", map[string]string{"replication.mode": "isr", "min.insync.replicas": "3"}, 3, ""},
		{"isr min isr > rf", map[string]string{"replication.mode": "isr", "min.insync.replicas": "4"}, 3, "min.insync.replicas 4 exceeds the replication factor 3"},
		{"isr bad min isr is apply's", map[string]string{"replication.mode": "isr", "min.insync.replicas": "x"}, 3, ""},
	}
	for _, c := range cases {
		err := CheckCreate(c.cfgs, c.rf)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		case c.want != "" && (!errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want INVALID_CONFIG with %q", c.name, err, c.want)
		}
	}
}

func TestCheckAlter(t *testing.T) {
	three := []Partition{{Replicas: []uint64{1, 2, 3}}}
	raft := &Topic{Name: "r", Partitions: three}
	legacy := &Topic{Name: "l", Partitions: three, Configs: map[string]string{"min.insync.replicas": "2"}}
	isr := &Topic{Name: "i", Partitions: three, Configs: map[string]string{"replication.mode": "isr"}}
	cases := []struct {
		name    string
		t       *Topic
		set     map[string]string
		del     []string
		replace bool
		want    string
	}{
		{"raft other key", raft, map[string]string{"retention.ms": "5"}, nil, false, ""},
		{"raft to isr", raft, map[string]string{"replication.mode": "isr"}, nil, false, "replication.mode cannot change after creation (topic \"r\" is raft)"},
		{"raft to raft", raft, map[string]string{"replication.mode": "raft"}, nil, false, ""},
		{"bad mode is apply's", raft, map[string]string{"replication.mode": "paxos"}, nil, false, ""},
		{"raft min isr", raft, map[string]string{"min.insync.replicas": "2"}, nil, false, "min.insync.replicas applies to replication.mode=isr"},
		{"raft flush", raft, map[string]string{"flush.ms": "2"}, nil, true, "flush.ms applies"},
		{"raft legacy key kept", legacy, map[string]string{"retention.ms": "5"}, nil, false, ""},
		{"raft legacy key deleted", legacy, nil, []string{"min.insync.replicas"}, false, ""},
		{"isr to raft", isr, map[string]string{"replication.mode": "raft"}, nil, false, "replication.mode cannot change after creation"},
		{"isr mode deleted", isr, nil, []string{"replication.mode"}, false, "replication.mode cannot change after creation"},
		{"isr replace without mode", isr, map[string]string{"retention.ms": "5"}, nil, true, "name replication.mode=isr or use IncrementalAlterConfigs"},
		{"isr replace with mode", isr, map[string]string{"replication.mode": "isr", "flush.messages": "1"}, nil, true, ""},
		{"isr min isr", isr, map[string]string{"min.insync.replicas": "3", "unclean.leader.election.enable": "true"}, nil, false, ""},
		{"isr min isr > rf", isr, map[string]string{"min.insync.replicas": "4"}, nil, false, "exceeds the replication factor 3"},
	}
	for _, c := range cases {
		err := CheckAlter(c.t, c.set, c.del, c.replace)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		case c.want != "" && (!errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want INVALID_CONFIG with %q", c.name, err, c.want)
		}
	}
}

// Before ISR mode flush.messages and flush.ms were unknown keys, so an
// entry setting them on a raft topic was refused; apply still refuses it,
// so such an entry replays as it was applied. min.insync.replicas was
// accepted on raft topics and still is at apply (only the broker refuses
// it), as the golden log's topic "b" shows.
func TestApply_FlushConfigsOnRaftTopicsRefusedAsBefore(t *testing.T) {
	m := withBrokers(t, 3)
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "r", ID: topicID(1), Partitions: 1, ReplicationFactor: 3}})
	before := m.View()
	for _, c := range []Command{
		{CreateTopic: &CreateTopic{Name: "f", ID: topicID(2), Partitions: 1, ReplicationFactor: 3, Configs: map[string]string{"flush.messages": "1"}}},
		{CreateTopic: &CreateTopic{Name: "f", ID: topicID(2), Partitions: 1, ReplicationFactor: 3, Configs: map[string]string{"replication.mode": "raft", "flush.ms": "1"}}},
		{AlterConfigs: &AlterConfigs{Name: "r", Set: map[string]string{"flush.ms": "1"}}},
		{AlterConfigs: &AlterConfigs{Name: "r", Set: map[string]string{"flush.messages": "1"}, Replace: true}},
	} {
		if r := applyCmd(t, m, &c); !errors.Is(r.Err, kerr.InvalidConfig) {
			t.Errorf("%+v: %v, want INVALID_CONFIG", c, r.Err)
		}
		if m.View() != before {
			t.Errorf("%+v: a refused command changed the state", c)
		}
	}
	if r := applyCmd(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "r", Set: map[string]string{"min.insync.replicas": "2"}}}); r.Err != nil {
		t.Errorf("apply refused min.insync.replicas on a raft topic, as no binary before did: %v", r.Err)
	}
}

// An ISR topic's flush configs pass apply; raising min.insync.replicas
// above the replication factor is refused and changes nothing.
func TestApply_ISRTopicConfigs(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"flush.messages": "1", "flush.ms": "100", "min.insync.replicas": "2"}, []uint64{1, 2, 3})
	if got := m.View().Topics["i"].ConfigInt("flush.messages"); got != 1 {
		t.Errorf("flush.messages %d, want 1", got)
	}
	before := m.View()
	if r := applyCmd(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "i", Set: map[string]string{"min.insync.replicas": "4"}}}); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Errorf("min.insync.replicas 4 of RF 3: %v, want INVALID_CONFIG", r.Err)
	}
	if m.View() != before {
		t.Error("a refused alter changed the state")
	}
	if r := applyChecked(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "i", Set: map[string]string{"min.insync.replicas": "3"}}}); r.Err != nil {
		t.Errorf("min.insync.replicas 3 of RF 3: %v", r.Err)
	}
}

// Apply refuses a change of mode in the preflight's words: a node whose
// metadata lags proposes without the preflight, and its client must
// still learn what to do.
func TestApply_ModeChangeSaysWhatToDo(t *testing.T) {
	m := isrCluster(t, 3, map[string]string{"min.insync.replicas": "2"}, []uint64{1, 2, 3})
	cases := []struct {
		name string
		ac   *AlterConfigs
		want string
	}{
		{"replace without the mode", &AlterConfigs{Name: "i", Set: map[string]string{"retention.ms": "1000"}, Replace: true}, "name replication.mode=isr or use IncrementalAlterConfigs"},
		{"set to raft", &AlterConfigs{Name: "i", Set: map[string]string{"replication.mode": "raft"}}, "create a new topic with replication.mode=raft instead"},
	}
	for _, c := range cases {
		r := applyCmd(t, m, &Command{AlterConfigs: c.ac})
		if !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.Err.Error(), c.want) {
			t.Errorf("%s: %v, want INVALID_CONFIG saying %q", c.name, r.Err, c.want)
		}
	}
}
