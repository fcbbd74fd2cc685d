package coordinator

import "testing"

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
