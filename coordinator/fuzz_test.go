package coordinator

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// fuzzSeedCommands is a plausible metadata log, one command per line.
var fuzzSeedCommands = []string{
	`{"register_broker":{"id":1,"kafka_addr":"127.0.0.1:9092","incarnation":"a"}}`,
	`{"register_broker":{"id":2,"kafka_addr":"127.0.0.1:9093","incarnation":"b"}}`,
	`{"register_broker":{"id":3,"kafka_addr":"127.0.0.1:9094","incarnation":"c"}}`,
	`{"create_topic":{"name":"t","id":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"partitions":3,"replication_factor":3,"configs":{"retention.ms":"1000"}}}`,
	`{"create_topic":{"name":"u","id":[2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"partitions":1,"replication_factor":1,"assignment":[[2]]}}`,
	`{"set_alive":{"id":2,"alive":false}}`,
	`{"leader_hints":[{"group":1,"leader":1,"term":2},{"group":4,"leader":2,"term":1}]}`,
	`{"create_partitions":{"name":"t","count":5}}`,
	`{"alter_configs":{"name":"t","set":{"segment.bytes":"1048576"},"delete":["retention.ms"]}}`,
	`{"alter_configs":{"name":"t","set":{"retention.ms":"5"},"replace":true}}`,
	`{"allocate_producer_ids":{"count":1000}}`,
	`{"delete_topic":{"name":"u"}}`,
}

// FuzzMetadataApply feeds the metadata state machine a log of arbitrary
// entries. It must not panic; an entry it cannot decode is an error, not a
// change; two replicas applying the same log agree byte for byte; a
// snapshot restores to the same state; and the state keeps its invariants
// whatever the log held.
func FuzzMetadataApply(f *testing.F) {
	f.Add([]byte(strings.Join(fuzzSeedCommands, "\n")))
	f.Add([]byte(strings.Join(fuzzSeedCommands[:4], "\n") + "\n{\"create_topic\":{\"name\":\"t\"}}\n{}\nnot json"))
	f.Add([]byte(`{"create_partitions":{"name":"t","count":-1}}` + "\n" + `{"leader_hints":[{"group":0}]}`))
	f.Fuzz(func(t *testing.T, log []byte) {
		a, b := NewMetadata(), NewMetadata()
		for i, line := range bytes.Split(log, []byte("\n")) {
			e := raftgroup.Entry{Index: uint64(i + 1), Data: line}
			before := snapshotOf(t, a)
			res, errA := a.Apply(e)
			_, errB := b.Apply(e)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("entry %d: replicas disagree on whether it decodes: %v / %v", i+1, errA, errB)
			}
			if r, ok := res.(Result); errA != nil || ok && r.Err != nil {
				if after := snapshotOf(t, a); !bytes.Equal(before, after) {
					t.Fatalf("entry %d failed (%v %v) but changed the state", i+1, errA, r.Err)
				}
			}
		}
		checkInvariants(t, a.View())
		sa := snapshotOf(t, a)
		if sb := snapshotOf(t, b); !bytes.Equal(sa, sb) {
			t.Fatalf("two replicas of one log differ:\n%s\n%s", sa, sb)
		}
		c := NewMetadata()
		if err := c.Restore(&raftpb.Snapshot{Data: sa}); err != nil {
			t.Fatalf("restore a snapshot just taken: %v", err)
		}
		if sc := snapshotOf(t, c); !bytes.Equal(sa, sc) {
			t.Fatalf("snapshot does not restore to itself:\n%s\n%s", sa, sc)
		}
	})
}

// FuzzMetadataRestore restores arbitrary snapshot data. Data it accepts
// must give a state that the commands of a normal log then apply to
// without a panic.
func FuzzMetadataRestore(f *testing.F) {
	m := NewMetadata()
	for i, c := range fuzzSeedCommands {
		if _, err := m.Apply(raftgroup.Entry{Index: uint64(i + 1), Data: []byte(c)}); err != nil {
			f.Fatal(err)
		}
	}
	snap, err := m.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	f.Add([]byte(`{"index":3,"brokers":null,"topics":null}`))
	f.Add([]byte(`{"topics":{"x":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := NewMetadata()
		if err := m.Restore(&raftpb.Snapshot{Data: data}); err != nil {
			return
		}
		for i, c := range fuzzSeedCommands {
			if _, err := m.Apply(raftgroup.Entry{Index: uint64(100 + i), Data: []byte(c)}); err != nil {
				t.Fatalf("apply %s after restoring %q: %v", c, data, err)
			}
		}
		m.View().TopicNames()
		m.View().PartitionByGroup(1)
	})
}

func snapshotOf(t *testing.T, m *Metadata) []byte {
	t.Helper()
	b, err := m.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b
}

// checkInvariants is what every applied log must leave: partitions
// numbered by position, each on its own raft group below NextGroup, on
// registered brokers, none twice; topic ids unique and set.
func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	groups := map[uint64]string{}
	ids := map[[16]byte]string{}
	for _, name := range s.TopicNames() {
		tp := s.Topics[name]
		if tp.Name != name || tp.ID == ([16]byte{}) {
			t.Fatalf("topic %q: name %q, id %x", name, tp.Name, tp.ID)
		}
		if other, ok := ids[tp.ID]; ok {
			t.Fatalf("topics %q and %q share id %x", name, other, tp.ID)
		}
		ids[tp.ID] = name
		for i, p := range tp.Partitions {
			where := fmt.Sprintf("%s-%d", name, i)
			if p.Index != int32(i) || p.Group == MetadataGroup || p.Group >= s.NextGroup {
				t.Fatalf("%s: index %d, group %d (next %d)", where, p.Index, p.Group, s.NextGroup)
			}
			if other, ok := groups[p.Group]; ok {
				t.Fatalf("%s and %s share raft group %d", where, other, p.Group)
			}
			groups[p.Group] = where
			if len(p.Replicas) == 0 || len(p.Replicas) != len(slices.Compact(slices.Sorted(slices.Values(p.Replicas)))) {
				t.Fatalf("%s: replicas %v", where, p.Replicas)
			}
			for _, r := range p.Replicas {
				if _, ok := s.Brokers[r]; !ok {
					t.Fatalf("%s: replica on unregistered broker %d", where, r)
				}
			}
		}
	}
}
