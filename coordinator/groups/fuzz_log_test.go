package groups

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// fuzzGroupLog is a plausible group coordinator log: one command's JSON
// per line (Apply sees each with the command prefix).
func fuzzGroupLog(f *testing.F) []string {
	tp := func(p int32) TopicPartition { return TopicPartition{"t", p} }
	var out []string
	for _, c := range []*Command{
		{NewGeneration: &NewGeneration{Group: "g", Generation: 1, ProtocolType: "consumer", Protocol: "range", Leader: "m1",
			Members: []*Member{{ID: "m1", Protocols: []Protocol{{Name: "range"}}}}}},
		{Assign: &Assign{Group: "g", Generation: 1, Assignments: map[string][]byte{"m1": {1, 2}}}},
		{Commit: &Commit{Group: "g", Generation: 1, MemberID: "m1", Offsets: []CommitOffset{{TopicPartition: tp(0), Offset: 5}}}},
		{Commit: &Commit{Group: "s", Generation: -1, Offsets: []CommitOffset{{TopicPartition: tp(1), Offset: 9}}}},
		{Remove: &Remove{Group: "g", Members: []string{"m1"}}},
		{DeleteOffsets: &DeleteOffsets{Group: "s", Partitions: []TopicPartition{tp(1)}}},
		{Expire: &Expire{NowMs: 1 << 40, RetentionMs: 1}},
		{DeleteGroups: &DeleteGroups{Groups: []string{"s", "g", "none"}}},
		{TxnCommit: &TxnCommit{Group: "x", ProducerID: 4, Generation: -1, Offsets: []CommitOffset{{TopicPartition: tp(0), Offset: 2}}}},
		{TxnCommit: &TxnCommit{Group: "g", ProducerID: 5, ProducerEpoch: 1, Generation: -1, Offsets: []CommitOffset{{TopicPartition: tp(0), Offset: 7}}}},
		{TxnMarker: &TxnMarker{ProducerID: 4, ProducerEpoch: 2, Commit: true, NowMs: 5}},
		{TxnCommit: &TxnCommit{Group: "g", ProducerID: 5, ProducerEpoch: 0, Generation: -1, Offsets: []CommitOffset{{TopicPartition: tp(1), Offset: 1}}}},
		{TxnCommit: &TxnCommit{Group: "x", ProducerID: 4, ProducerEpoch: 1, Generation: -1, Offsets: []CommitOffset{{TopicPartition: tp(0), Offset: 3}}}},
		{Expire: &Expire{NowMs: 1 << 41, RetentionMs: 1}},
		{Barrier: &Barrier{Term: 3}},
	} {
		b, err := c.Encode()
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, string(b[1:]))
	}
	return out
}

// FuzzMachineApplyLog applies an arbitrary log to two replicas of the
// group machine, and to a third that restarts from a snapshot halfway.
// Apply never fails or panics; the replicas agree on every result and end
// in the same state, snapshot for snapshot.
func FuzzMachineApplyLog(f *testing.F) {
	seed := fuzzGroupLog(f)
	f.Add([]byte(strings.Join(seed, "\n")), uint8(3))
	f.Add([]byte(strings.Join(seed[:3], "\n")+"\n{}\nnot json\n"+seed[3]), uint8(1))
	f.Fuzz(func(t *testing.T, log []byte, cut uint8) {
		lines := bytes.Split(log, []byte("\n"))
		if len(lines) > 200 {
			return
		}
		a, b, c := NewMachine(), NewMachine(), NewMachine()
		for i, line := range lines {
			e := raftgroup.Entry{Index: uint64(i + 1), Term: 1, Data: append([]byte{commandMagic}, line...)}
			ra, errA := a.Apply(e)
			rb, errB := b.Apply(e)
			if errA != nil || errB != nil || !reflect.DeepEqual(ra, rb) {
				t.Fatalf("entry %d: %v %+v / %v %+v", i+1, errA, ra, errB, rb)
			}
			if i == int(cut) {
				snap := snapshotOf(t, a)
				c = NewMachine()
				if err := c.Restore(&raftpb.Snapshot{Data: snap}); err != nil {
					t.Fatalf("restore a snapshot just taken: %v", err)
				}
				continue
			}
			if rc, err := c.Apply(e); err != nil || i > int(cut) && !reflect.DeepEqual(rc, ra) {
				t.Fatalf("entry %d after the restart: %v %+v, want %+v", i+1, err, rc, ra)
			}
		}
		want := snapshotOf(t, a)
		if got := snapshotOf(t, b); !bytes.Equal(got, want) {
			t.Fatalf("replicas differ:\n%s\n%s", got, want)
		}
		if int(cut) < len(lines) {
			if got := snapshotOf(t, c); !bytes.Equal(got, want) {
				t.Fatalf("the replica restarted from a snapshot differs:\n%s\n%s", got, want)
			}
		}
	})
}

func snapshotOf(t *testing.T, m *Machine) []byte {
	t.Helper()
	b, err := m.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b
}
