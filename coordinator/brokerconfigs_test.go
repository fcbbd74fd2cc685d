package coordinator

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"
)

// Broker configs resolve as Kafka resolves them: the highest-priority
// synonym set wins, hours and minutes become milliseconds, a negative
// retention is unlimited, list items lose their spaces; the topic
// defaults name every synonym set, the winner first.
func TestResolveTopicDefaults(t *testing.T) {
	for _, tc := range []struct {
		set       map[string]string
		topic     string
		want      string
		wantNames []string
	}{
		{map[string]string{"log.retention.hours": "1"}, "retention.ms", "3600000", []string{"log.retention.hours"}},
		{map[string]string{"log.retention.minutes": "2"}, "retention.ms", "120000", []string{"log.retention.minutes"}},
		{map[string]string{"log.retention.hours": "1", "log.retention.ms": "5000"}, "retention.ms", "5000", []string{"log.retention.ms", "log.retention.hours"}},
		{map[string]string{"log.retention.ms": "-5"}, "retention.ms", "-1", []string{"log.retention.ms"}},
		{map[string]string{"log.retention.hours": "-1"}, "retention.ms", "-1", []string{"log.retention.hours"}},
		{map[string]string{"log.roll.hours": "2"}, "segment.ms", "7200000", []string{"log.roll.hours"}},
		{map[string]string{"log.cleanup.policy": " compact, delete "}, "cleanup.policy", "compact,delete", []string{"log.cleanup.policy"}},
		{map[string]string{"log.cleaner.min.cleanable.ratio": "0.1"}, "min.cleanable.dirty.ratio", "0.1", []string{"log.cleaner.min.cleanable.ratio"}},
		{map[string]string{"log.cleaner.delete.retention.ms": "1000"}, "delete.retention.ms", "1000", []string{"log.cleaner.delete.retention.ms"}},
		{map[string]string{"message.max.bytes": "2000000"}, "max.message.bytes", "2000000", []string{"message.max.bytes"}},
		{map[string]string{"log.flush.scheduler.interval.ms": "10", "log.flush.interval.ms": "20"}, "flush.ms", "20", []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}},
		{map[string]string{"min.insync.replicas": "2"}, "min.insync.replicas", "2", []string{"min.insync.replicas"}},
	} {
		got, err := ResolveTopicDefaults(tc.set)
		if err != nil {
			t.Errorf("%v: %v", tc.set, err)
			continue
		}
		d, ok := got[tc.topic]
		var names []string
		for _, s := range d.Set {
			names = append(names, s.Name)
		}
		if !ok || d.Value != tc.want || !slices.Equal(names, tc.wantNames) || len(got) != 1 {
			t.Errorf("%v: %s = %+v (all %v), want %s from %v", tc.set, tc.topic, d, got, tc.want, tc.wantNames)
		}
	}
	if got, err := ResolveTopicDefaults(nil); err != nil || len(got) != 0 {
		t.Errorf("no broker configs: %v %v, want no defaults", got, err)
	}
}

// A broker config raftq does not know, or a value its topic config would
// not take, is an error that names it.
func TestResolveTopicDefaults_Refused(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"log.retension.ms": "1"}, "unknown broker config log.retension.ms: raftq takes these Kafka broker configs, the defaults of topic configs: compression.gzip.level,"},
		{map[string]string{"log.retention.hours": "a day"}, `broker config log.retention.hours=a day: not an int: "a day"`},
		{map[string]string{"log.retention.hours": "9999999999"}, "not an int"},
		{map[string]string{"log.roll.hours": "0"}, "broker config log.roll.hours=0: as segment.ms 0: must be at least 1"},
		{map[string]string{"log.cleanup.policy": "shred"}, "log.cleanup.policy=shred: as cleanup.policy shred: must be one of"},
		{map[string]string{"log.cleaner.min.cleanable.ratio": "2"}, "must be in [0, 1]"},
		{map[string]string{"min.insync.replicas": "0"}, "min.insync.replicas=0"},
		{map[string]string{"log.segment.bytes": "10", "a.first": "1"}, "unknown broker config a.first"},
	} {
		_, err := ResolveTopicDefaults(tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.set, err, tc.want)
		}
	}
}

// The table follows Kafka's: every topic config with a server default
// has broker synonyms, each synonym points back to its topic config, and
// the synonym holding Kafka's built-in default resolves to the topic
// config's own default (log.retention.hours=168 is 7 days of retention.ms).
func TestBrokerConfigDefs_KafkaDefaults(t *testing.T) {
	noServerDefault := []string{"replication.mode", "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
		"remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable"}
	for _, d := range TopicConfigDefs() {
		syns := BrokerSynonyms(d.Name)
		if slices.Contains(noServerDefault, d.Name) {
			if len(syns) > 0 {
				t.Errorf("%s has broker synonyms %v; Kafka has none", d.Name, syns)
			}
			continue
		}
		def, ok := BuiltinDefault(d.Name)
		if !ok {
			t.Errorf("%s: no broker synonym with a default", d.Name)
			continue
		}
		if v, err := def.topicValue(def.Default); err != nil || v != d.Default {
			t.Errorf("%s=%s resolves to %s %q (%v), want the topic default %q", def.Name, def.Default, d.Name, v, err, d.Default)
		}
		for _, s := range syns {
			if s.Topic != d.Name || brokerConfigDefs[s.Name].Topic != d.Name {
				t.Errorf("synonym %s of %s names topic config %s", s.Name, d.Name, s.Topic)
			}
		}
	}
	if got := len(BrokerConfigDefs()); got != len(BrokerConfigNames()) || got < 30 {
		t.Errorf("%d broker configs, %d names", got, len(BrokerConfigNames()))
	}
}

func mustResolve(t *testing.T, set map[string]string) TopicDefaults {
	t.Helper()
	d, err := ResolveTopicDefaults(set)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func setDefaults(t *testing.T, m *Metadata, d TopicDefaults) Result {
	t.Helper()
	return applyChecked(t, m, &Command{SetTopicDefaults: &SetTopicDefaults{Defaults: d, ConfigVersion: CurrentConfigVersion}})
}

// SetTopicDefaults gives every topic that sets no value of its own the
// cluster's default, existing topics and new ones, through a snapshot
// too; replacing them by none brings Kafka's defaults back.
func TestSetTopicDefaults(t *testing.T) {
	m := withBrokers(t, 3)
	applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "own", ID: topicID(1), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}}})
	applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "old", ID: topicID(2), Partitions: 1, ReplicationFactor: 1}})
	if r := setDefaults(t, m, mustResolve(t, map[string]string{"log.retention.hours": "1", "log.cleanup.policy": "compact"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "new", ID: topicID(3), Partitions: 1, ReplicationFactor: 1, ConfigVersion: CurrentConfigVersion}})
	check := func(s *State, when string) {
		t.Helper()
		for name, want := range map[string]string{"own": "1000", "old": "3600000", "new": "3600000"} {
			tp := s.Topics[name]
			if got := tp.Config("retention.ms"); got != want {
				t.Errorf("%s: topic %s retention.ms %s, want %s", when, name, got, want)
			}
			if got := tp.Config("cleanup.policy"); got != "compact" {
				t.Errorf("%s: topic %s cleanup.policy %s, want the default compact", when, name, got)
			}
			if d, ok := tp.ClusterDefault("retention.ms"); !ok || d.Set[0] != (BrokerSetting{"log.retention.hours", "1"}) {
				t.Errorf("%s: topic %s cluster default %+v %v", when, name, d, ok)
			}
		}
	}
	check(m.View(), "applied")
	data, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m2 := NewMetadata()
	if err := m2.Restore(&raftpb.Snapshot{Data: data}); err != nil {
		t.Fatal(err)
	}
	check(m2.View(), "restored")
	setDefaults(t, m, nil)
	if s := m.View(); s.TopicDefaults != nil || s.Topics["old"].Config("retention.ms") != "604800000" || s.Topics["new"].Config("cleanup.policy") != "delete" {
		t.Errorf("defaults cleared: %v, old retention.ms %s, new cleanup.policy %s", s.TopicDefaults,
			s.Topics["old"].Config("retention.ms"), s.Topics["new"].Config("cleanup.policy"))
	}
}

// Apply refuses defaults that no broker config could have given: bad
// values, keys without a broker synonym, keys newer than the entry's
// config version, a default no broker config set; the state stays.
func TestSetTopicDefaults_Refused(t *testing.T) {
	m := withBrokers(t, 1)
	set := []BrokerSetting{{"x", "1"}}
	for _, tc := range []struct {
		d       TopicDefaults
		version int
	}{
		{TopicDefaults{"retention.ms": {Value: "soon", Set: set}}, CurrentConfigVersion},
		{TopicDefaults{"replication.mode": {Value: ModeISR, Set: set}}, CurrentConfigVersion},
		{TopicDefaults{"preallocate": {Value: "true", Set: set}}, 1},
		{TopicDefaults{"cleanup.policy": {Value: "compact", Set: set}}, 0},
		{TopicDefaults{"retention.ms": {Value: "1"}}, CurrentConfigVersion},
		{TopicDefaults{"no.such.config": {Value: "1", Set: set}}, CurrentConfigVersion},
	} {
		before := snapshotOf(t, m)
		r := applyChecked(t, m, &Command{SetTopicDefaults: &SetTopicDefaults{Defaults: tc.d, ConfigVersion: tc.version}})
		if !errors.Is(r.Err, kerr.InvalidConfig) {
			t.Errorf("%+v at version %d: %v, want INVALID_CONFIG", tc.d, tc.version, r.Err)
		}
		if after := snapshotOf(t, m); string(before) != string(after) {
			t.Errorf("%+v refused but changed the state", tc.d)
		}
	}
}

// A default unclean.leader.election.enable elects where nobody in the
// ISR can lead, as the topic's own value does; a default
// min.insync.replicas above a new ISR topic's replication factor does
// not refuse it (Kafka refuses only the topic's own value).
func TestSetTopicDefaults_ISR(t *testing.T) {
	m := isrCluster(t, 3, nil, []uint64{1, 2, 3})
	alter(t, m, alterItem(m.View(), part(m, 0), 1))
	setAlive(t, m, 1, false)
	wantPartition(t, part(m, 0), 0, ids(1), nil)
	setDefaults(t, m, mustResolve(t, map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "3"}))
	if p := part(m, 0); p.Leader != 2 || !p.Recovering || !slices.Equal(p.ISR, ids(2)) {
		t.Errorf("unclean election after the default changed: %+v", p)
	}
	r := applyChecked(t, m, &Command{CreateTopic: &CreateTopic{Name: "j", ID: topicID(7), Partitions: 1, ReplicationFactor: 2,
		Configs: map[string]string{"replication.mode": ModeISR}, AllowISR: true, ConfigVersion: CurrentConfigVersion}})
	if r.Err != nil || r.Topic.ConfigInt("min.insync.replicas") != 3 {
		t.Errorf("an ISR topic of 2 replicas under a default min.insync.replicas 3: %v %+v", r.Err, r.Topic)
	}
}
