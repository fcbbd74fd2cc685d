package coordinator

import (
	"strings"
	"testing"
)

// Compaction's keys and values came with config version 1: an entry of
// version 0 (every entry written before) is refused them as it was, one
// of version 1 takes them.
func TestConfigVersion_Compaction(t *testing.T) {
	cases := []map[string]string{
		{"cleanup.policy": "compact"},
		{"cleanup.policy": "compact,delete"},
		{"delete.retention.ms": "1000"},
		{"min.cleanable.dirty.ratio": "0.1"},
	}
	for i, cfgs := range cases {
		for _, version := range []int{0, CurrentConfigVersion} {
			m := withBrokers(t, 3)
			r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "c", ID: topicID(byte(10 + i)), Partitions: 1, ReplicationFactor: 1, Configs: cfgs, ConfigVersion: version}})
			if refused := r.Err != nil; refused != (version == 0) {
				t.Errorf("%v at version %d: err %v", cfgs, version, r.Err)
			}
		}
	}
	m := withBrokers(t, 3)
	if r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "c", ID: topicID(30), Partitions: 1, ReplicationFactor: 1, ConfigVersion: CurrentConfigVersion}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, bad := range []map[string]string{{"min.cleanable.dirty.ratio": "1.5"}, {"delete.retention.ms": "-1"}, {"cleanup.policy": "shred"}} {
		if r := applyCmd(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "c", Set: bad, ConfigVersion: CurrentConfigVersion}}); r.Err == nil {
			t.Errorf("alter to %v was taken", bad)
		}
	}
	if r := applyCmd(t, m, &Command{AlterConfigs: &AlterConfigs{Name: "c", Set: map[string]string{"cleanup.policy": "compact"}}}); r.Err == nil {
		t.Error("a version-0 alter to compact was taken")
	}
}

// Kafka's other topic configs are taken from version 2 with values Kafka
// takes, described as not enforced; truly unknown names still fail, with
// Kafka's message.
func TestConfigVersion_KafkaConfigs(t *testing.T) {
	m := withBrokers(t, 3)
	ok := map[string]string{"preallocate": "true", "segment.jitter.ms": "10", "compression.zstd.level": "9", "remote.storage.enable": "false"}
	if r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "k", ID: topicID(40), Partitions: 1, ReplicationFactor: 1, Configs: ok, ConfigVersion: CurrentConfigVersion}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for k := range ok {
		if !NotEnforced(k) {
			t.Errorf("%s is not described as not enforced", k)
		}
	}
	if NotEnforced("retention.ms") {
		t.Error("retention.ms is described as not enforced")
	}
	for i, bad := range []map[string]string{{"preallocate": "yes"}, {"compression.zstd.level": "40"}, {"no.such.key": "1"}} {
		r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "b", ID: topicID(byte(41 + i)), Partitions: 1, ReplicationFactor: 1, Configs: bad, ConfigVersion: CurrentConfigVersion}})
		if r.Err == nil {
			t.Errorf("%v was taken", bad)
		}
	}
	r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "b", ID: topicID(45), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"no.such.key": "1"}, ConfigVersion: CurrentConfigVersion}})
	if r.Err == nil || !strings.Contains(r.Err.Error(), "Unknown topic config name: no.such.key") {
		t.Errorf("unknown key: %v, want Kafka's message", r.Err)
	}
	if r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "v1", ID: topicID(46), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"preallocate": "true"}, ConfigVersion: 1}}); r.Err == nil {
		t.Error("a version-1 entry took a version-2 key")
	}
}
