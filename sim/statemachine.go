package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// record is one applied entry as a replica saw it.
type record struct {
	Pos  pos
	Data string
}

// pos is where a payload sits in the log: the raft index and, for small
// proposals coalesced into one entry, the payload's place in it.
type pos struct {
	Index uint64
	Sub   int
}

func (p pos) less(q pos) bool { return p.Index < q.Index || p.Index == q.Index && p.Sub < q.Sub }

// StateMachine is the simulated replica state: the sequence of applied
// entries. It is volatile (Applied is 0 after a restart), so a restarted
// replica is rebuilt from its snapshot and log, as the metadata state
// machine is. Every apply and restore is reported to the checker.
type StateMachine struct {
	node, group uint64
	chk         *checker
	applied     []record
	staged      map[uint64][]byte
	// ApplyTwice is a planted bug: each entry is applied twice.
	ApplyTwice bool
}

var _ raftgroup.StateMachine = (*StateMachine)(nil)

func newStateMachine(node, group uint64, chk *checker) *StateMachine {
	return &StateMachine{node: node, group: group, chk: chk, staged: map[uint64][]byte{}}
}

// Applied is always 0: nothing is durable outside raft's storage.
func (m *StateMachine) Applied() uint64 { return 0 }

// Apply records the entry and reports it to the checker.
func (m *StateMachine) Apply(e raftgroup.Entry) (any, error) {
	r := record{Pos: pos{e.Index, e.Sub}, Data: string(e.Data)}
	m.applied = append(m.applied, r)
	m.chk.onApply(m.node, m.group, r)
	if m.ApplyTwice {
		m.applied = append(m.applied, r)
		m.chk.onApply(m.node, m.group, r)
	}
	return r.Pos, nil
}

// Snapshot encodes the whole applied sequence (runs are short).
func (m *StateMachine) Snapshot() ([]byte, error) { return json.Marshal(m.applied) }

// SnapshotBody derives bulk data from the snapshot, which Restore checks
// arrived intact.
func (m *StateMachine) SnapshotBody(snap *raftpb.Snapshot) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(body(snap))), nil
}

func body(snap *raftpb.Snapshot) []byte {
	return fmt.Appendf(nil, "body %d/%d %d", snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm(), len(snap.GetData()))
}

// ReceiveSnapshot stages the body.
func (m *StateMachine) ReceiveSnapshot(snap *raftpb.Snapshot, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.staged[snap.GetMetadata().GetIndex()] = b
	return nil
}

// Restore replaces the sequence with the snapshot's. A snapshot the
// replica took itself needs no staged body; one from a leader does.
func (m *StateMachine) Restore(snap *raftpb.Snapshot) error {
	var seq []record
	if err := json.Unmarshal(snap.GetData(), &seq); err != nil {
		return fmt.Errorf("sim: decode snapshot: %w", err)
	}
	if b, ok := m.staged[snap.GetMetadata().GetIndex()]; ok && !bytes.Equal(b, body(snap)) {
		return fmt.Errorf("sim: snapshot %d body corrupted", snap.GetMetadata().GetIndex())
	}
	m.applied = seq
	m.chk.onRestore(m.node, m.group, seq)
	return nil
}
