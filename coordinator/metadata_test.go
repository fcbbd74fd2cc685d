package coordinator

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/raftgroup"
)

// applyCmd proposes c as the next entry of m and returns its result.
func applyCmd(t *testing.T, m *Metadata, c *Command) Result {
	t.Helper()
	data, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Apply(raftgroup.Entry{Index: m.View().Index + 1, Term: 1, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return res.(Result)
}

func withBrokers(t *testing.T, n int) *Metadata {
	t.Helper()
	m := NewMetadata()
	for i := 1; i <= n; i++ {
		b := &Broker{ID: uint64(i), KafkaAddr: fmt.Sprintf("127.0.0.1:%d", 9091+i)}
		if r := applyCmd(t, m, &Command{RegisterBroker: b}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return m
}

func topicID(b byte) [16]byte { return [16]byte{b, 1} }

func TestMetadata_CreateTopicSpreadsLeadersAndReplicas(t *testing.T) {
	m := withBrokers(t, 5)
	r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(1), Partitions: 10, ReplicationFactor: 3}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	leaders, replicas := map[uint64]int{}, map[uint64]int{}
	groups := map[uint64]bool{}
	for _, p := range m.View().Topics["t"].Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("partition %d has replicas %v", p.Index, p.Replicas)
		}
		leaders[p.Replicas[0]]++
		for _, id := range p.Replicas {
			replicas[id]++
		}
		if groups[p.Group] || p.Group == MetadataGroup {
			t.Fatalf("group %d reused", p.Group)
		}
		groups[p.Group] = true
	}
	for id := uint64(1); id <= 5; id++ {
		if got, want := leaders[id], 2; got != want {
			t.Errorf("broker %d preferred leader of %d partitions, want %d", id, got, want)
		}
		if got, want := replicas[id], 6; got != want {
			t.Errorf("broker %d holds %d replicas, want %d", id, got, want)
		}
	}
}

func TestMetadata_PlacementSkipsDeadBrokers(t *testing.T) {
	m := withBrokers(t, 3)
	applyCmd(t, m, &Command{SetAlive: &SetAlive{ID: 2, Alive: false}})
	r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(1), Partitions: 4, ReplicationFactor: 2}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, p := range r.Topic.Partitions {
		if p.HasReplica(2) {
			t.Errorf("partition %d placed on dead broker 2: %v", p.Index, p.Replicas)
		}
	}
	r = applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "u", ID: topicID(2), Partitions: 1, ReplicationFactor: 3}})
	if !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Errorf("RF 3 with 2 live brokers: got %v", r.Err)
	}
}

func TestMetadata_CommandErrorsLeaveStateAlone(t *testing.T) {
	m := withBrokers(t, 3)
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(1), Partitions: 1, ReplicationFactor: 1}})
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "a.b", ID: topicID(7), Partitions: 1, ReplicationFactor: 1}})
	before := m.View()
	cases := []struct {
		name string
		cmd  Command
		want *kerr.Error
	}{
		{"exists", Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(2), Partitions: 1, ReplicationFactor: 1}}, kerr.TopicAlreadyExists},
		{"bad name", Command{CreateTopic: &CreateTopic{Name: "a/b", ID: topicID(3), Partitions: 1, ReplicationFactor: 1}}, kerr.InvalidTopicException},
		{"zero partitions", Command{CreateTopic: &CreateTopic{Name: "z", ID: topicID(4), Partitions: 0, ReplicationFactor: 1}}, kerr.InvalidPartitions},
		{"bad config", Command{CreateTopic: &CreateTopic{Name: "c", ID: topicID(5), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "soon"}}}, kerr.InvalidConfig},
		{"unknown config", Command{CreateTopic: &CreateTopic{Name: "c", ID: topicID(5), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"flux": "1"}}}, kerr.InvalidConfig},
		{"isr reserved", Command{CreateTopic: &CreateTopic{Name: "c", ID: topicID(5), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"replication.mode": "isr"}}}, kerr.InvalidConfig},
		{"delete unknown", Command{DeleteTopic: &DeleteTopic{Name: "nope"}}, kerr.UnknownTopicOrPartition},
		{"shrink", Command{CreatePartitions: &CreatePartitions{Name: "t", Count: 1}}, kerr.InvalidPartitions},
		{"collides", Command{CreateTopic: &CreateTopic{Name: "a_b", ID: topicID(8), Partitions: 1, ReplicationFactor: 1, RefuseCollision: true}}, kerr.InvalidTopicException},
		{"bad assignment", Command{CreateTopic: &CreateTopic{Name: "a", ID: topicID(6), Partitions: 1, Assignment: [][]uint64{{1, 1}}}}, kerr.InvalidReplicaAssignment},
	}
	for _, c := range cases {
		r := applyCmd(t, m, &c.cmd)
		if !errors.Is(r.Err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, r.Err, c.want)
		}
		if m.View() != before {
			t.Errorf("%s: a failed command changed the state", c.name)
		}
	}
}

func TestMetadata_CreatePartitionsKeepsExisting(t *testing.T) {
	m := withBrokers(t, 3)
	first := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(1), Partitions: 2, ReplicationFactor: 3}}).Topic
	r := applyCmd(t, m, &Command{CreatePartitions: &CreatePartitions{Name: "t", Count: 5}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	got := m.View().Topics["t"]
	if len(got.Partitions) != 5 || got.Partitions[1].Group != first.Partitions[1].Group {
		t.Errorf("partitions after grow: %+v", got.Partitions)
	}
	if len(first.Partitions) != 2 {
		t.Error("the published topic before the change was modified")
	}
}

func TestMetadata_InternalTopicsKeepTheirShape(t *testing.T) {
	m := withBrokers(t, 3)
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "__consumer_offsets", ID: topicID(9), Partitions: 3, ReplicationFactor: 3, Internal: true}})
	if r := applyCmd(t, m, &Command{CreatePartitions: &CreatePartitions{Name: "__consumer_offsets", Count: 6}}); !errors.Is(r.Err, kerr.InvalidRequest) {
		t.Errorf("growing an internal topic: %v, want INVALID_REQUEST", r.Err)
	}
	if r := applyCmd(t, m, &Command{DeleteTopic: &DeleteTopic{Name: "__consumer_offsets"}}); r.Err == nil {
		t.Error("an internal topic was deleted")
	}
}

func TestMetadata_LeaderHintsKeepNewestTerm(t *testing.T) {
	m := withBrokers(t, 3)
	tp := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(1), Partitions: 1, ReplicationFactor: 3}}).Topic
	g := tp.Partitions[0].Group
	applyCmd(t, m, &Command{LeaderHints: []LeaderHint{{Group: g, Leader: 2, Term: 5}}})
	applyCmd(t, m, &Command{LeaderHints: []LeaderHint{{Group: g, Leader: 3, Term: 4}, {Group: 999, Leader: 1, Term: 9}}})
	p := m.View().Topics["t"].Partitions[0]
	if p.Leader != 2 || p.LeaderTerm != 5 {
		t.Errorf("leader hint = %d@%d, want 2@5", p.Leader, p.LeaderTerm)
	}
}

func TestMetadata_ProducerIDBlocksDoNotOverlap(t *testing.T) {
	m := withBrokers(t, 1)
	a := applyCmd(t, m, &Command{AllocateProducerIDs: &AllocateProducerIDs{Node: 1, Count: 100}})
	b := applyCmd(t, m, &Command{AllocateProducerIDs: &AllocateProducerIDs{Node: 2, Count: 100}})
	if a.ProducerIDStart+100 > b.ProducerIDStart {
		t.Errorf("blocks overlap: %d and %d", a.ProducerIDStart, b.ProducerIDStart)
	}
}

func TestMetadata_SnapshotRestore(t *testing.T) {
	m := withBrokers(t, 3)
	applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: "t", ID: topicID(1), Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "1000"}}})
	data, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m2 := NewMetadata()
	changed := m2.Changed()
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(7)}}
	if err := m2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Error("Restore did not signal a change")
	}
	got := m2.View().Topics["t"]
	if got == nil || len(got.Partitions) != 3 || got.ConfigInt("retention.ms") != 1000 || m2.View().NextGroup != m.View().NextGroup {
		t.Errorf("restored state differs: %+v", m2.View())
	}
}

func TestMetadata_BadEntryIsFatal(t *testing.T) {
	if _, err := NewMetadata().Apply(raftgroup.Entry{Index: 1, Data: []byte("{")}); err == nil {
		t.Error("undecodable entry applied without error")
	}
}

func TestTopic_ConfigDefaults(t *testing.T) {
	tp := &Topic{Configs: map[string]string{"retention.bytes": "10"}}
	if tp.ConfigInt("retention.bytes") != 10 || tp.Config("replication.mode") != ModeRaft || tp.ConfigInt("segment.bytes") != 1<<30 {
		t.Errorf("configs: %v %v %v", tp.ConfigInt("retention.bytes"), tp.Config("replication.mode"), tp.ConfigInt("segment.bytes"))
	}
}

// A broker re-registers freely from its own data directory, but the same
// id from another one (a node whose data was wiped) is refused and leaves
// the registration as it was.
func TestMetadata_RegisterRefusesAnotherIncarnation(t *testing.T) {
	m := NewMetadata()
	reg := func(inc, addr string) Result {
		return applyCmd(t, m, &Command{RegisterBroker: &Broker{ID: 3, KafkaAddr: addr, Incarnation: inc}})
	}
	if r := reg("a", "h:1"); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := reg("a", "h:2"); r.Err != nil {
		t.Fatalf("re-registration from the same data dir: %v", r.Err)
	}
	r := reg("b", "h:3")
	if !errors.Is(r.Err, kerr.InconsistentClusterID) {
		t.Fatalf("registration from another data dir: %v, want INCONSISTENT_CLUSTER_ID", r.Err)
	}
	if b := m.View().Brokers[3]; b.Incarnation != "a" || b.KafkaAddr != "h:2" {
		t.Errorf("refused registration changed the broker: %+v", b)
	}
}

// A create written before collisions were refused (no RefuseCollision)
// replays as it was applied then: the topic is created.
func TestMetadata_OldCollidingCreateReplaysAsApplied(t *testing.T) {
	m := withBrokers(t, 1)
	for i, name := range []string{"a.b", "a_b"} {
		if r := applyCmd(t, m, &Command{CreateTopic: &CreateTopic{Name: name, ID: topicID(byte(i + 1)), Partitions: 1, ReplicationFactor: 1}}); r.Err != nil {
			t.Fatalf("create %s from an old log: %v", name, r.Err)
		}
	}
}
