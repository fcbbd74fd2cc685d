package groups

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// Machine is the replicated state machine of one __consumer_offsets
// partition: the groups that hash to it, their generations, members and
// assignments, and their committed offsets.
//
// Apply, Snapshot and Restore run on the raft group's goroutine; readers
// (the coordinator, on any goroutine) go through the accessors, which take
// mu for reading. The state lives in memory and is rebuilt on every start
// from the group's raft snapshot and the WAL after it (Applied is 0).
type Machine struct {
	mu sync.RWMutex // guards st; a leaf lock
	st *state
}

var _ raftgroup.StateMachine = (*Machine)(nil)

// NewMachine returns an empty offsets partition state machine.
func NewMachine() *Machine { return &Machine{st: newState()} }

// Applied is zero: the state is rebuilt from snapshot and WAL on start.
func (m *Machine) Applied() uint64 { return 0 }

// Apply applies one committed entry. Entries that are no group command
// (a leader's no-op, or a produce batch someone sent to the internal
// topic) change nothing and return a Result with INVALID_REQUEST (the
// no-op: nil); apply never fails, so a replica never halts on bad input.
func (m *Machine) Apply(e raftgroup.Entry) (any, error) {
	if len(e.Data) == 0 {
		return nil, nil
	}
	c, err := DecodeCommand(e.Data)
	if err != nil {
		return Result{Code: kerr.InvalidRequest.Code}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.apply(c, e.Index), nil
}

// Group returns the group's replicated state, or nil. The caller must not
// modify it.
func (m *Machine) Group(name string) *Group {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.groups[name]
}

// Groups returns every group, sorted by name.
func (m *Machine) Groups() []*Group {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Group, 0, len(m.st.groups))
	for _, g := range m.st.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Offsets returns a copy of the group's committed offsets.
func (m *Machine) Offsets(group string) map[TopicPartition]Offset {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[TopicPartition]Offset, len(m.st.offsets[group]))
	for tp, o := range m.st.offsets[group] {
		out[tp] = o
	}
	return out
}

// Offset returns one committed offset.
func (m *Machine) Offset(group string, tp TopicPartition) (Offset, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o, ok := m.st.offsets[group][tp]
	return o, ok
}

// Unstable returns, of the partitions asked (nil: all), those for which
// group has transactional offsets waiting for their marker: OffsetFetch
// with require_stable answers UNSTABLE_OFFSET_COMMIT for them (KIP-447).
func (m *Machine) Unstable(group string, want []TopicPartition) map[TopicPartition]bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.pendingFor(group, want)
}

// Pending returns a copy of the group's pending transactional offsets by
// producer id.
func (m *Machine) Pending(group string) map[int64]*PendingTxn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[int64]*PendingTxn, len(m.st.pending[group]))
	for pid, p := range m.st.pending[group] {
		out[pid] = p.clone()
	}
	return out
}

// Producer returns what the partition has seen of a transactional
// producer.
func (m *Machine) Producer(pid int64) (ProducerSeen, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.st.producers[pid]
	return p, ok
}

// wouldExpire reports whether an Expire at nowMs would remove anything.
func (m *Machine) wouldExpire(nowMs, retentionMs int64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for name, g := range m.st.groups {
		if len(g.Members) > 0 {
			continue
		}
		if len(m.st.offsets[name]) == 0 && len(m.st.pending[name]) == 0 {
			return true
		}
		for _, o := range m.st.offsets[name] {
			if expired(g, o, nowMs, retentionMs) {
				return true
			}
		}
	}
	for pid, p := range m.st.producers {
		if nowMs-p.LastMs >= retentionMs && !m.st.hasPending(pid) {
			return true
		}
	}
	return false
}

// snapshotDoc is the snapshot's encoding: JSON with sorted keys and
// sorted offset lists, so equal states encode to equal bytes.
type snapshotDoc struct {
	Groups    map[string]*Group        `json:"groups"`
	Offsets   map[string][]savedOffset `json:"offsets"`
	Pending   map[string][]savedTxn    `json:"pending,omitempty"`
	Producers []savedProducer          `json:"producers,omitempty"`
}

type savedProducer struct {
	ProducerID int64 `json:"producer_id"`
	ProducerSeen
}

type savedOffset struct {
	TopicPartition
	Offset
}

// savedTxn is one producer's pending offsets in a group.
type savedTxn struct {
	ProducerID    int64         `json:"producer_id"`
	ProducerEpoch int16         `json:"producer_epoch"`
	Offsets       []savedOffset `json:"offsets"`
}

// sortedOffsets lists offs by topic and partition.
func sortedOffsets(offs map[TopicPartition]Offset) []savedOffset {
	list := make([]savedOffset, 0, len(offs))
	for tp, o := range offs {
		list = append(list, savedOffset{tp, o})
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return list
}

// Snapshot encodes the whole state.
func (m *Machine) Snapshot() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	doc := snapshotDoc{Groups: m.st.groups, Offsets: map[string][]savedOffset{}, Pending: map[string][]savedTxn{}}
	for name, offs := range m.st.offsets {
		doc.Offsets[name] = sortedOffsets(offs)
	}
	for name, byProducer := range m.st.pending {
		list := make([]savedTxn, 0, len(byProducer))
		for pid, p := range byProducer {
			list = append(list, savedTxn{ProducerID: pid, ProducerEpoch: p.ProducerEpoch, Offsets: sortedOffsets(p.Offsets)})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ProducerID < list[j].ProducerID })
		doc.Pending[name] = list
	}
	for pid, p := range m.st.producers {
		doc.Producers = append(doc.Producers, savedProducer{pid, p})
	}
	sort.Slice(doc.Producers, func(i, j int) bool { return doc.Producers[i].ProducerID < doc.Producers[j].ProducerID })
	return json.Marshal(doc)
}

// SnapshotBody is nil: the snapshot data is the whole state.
func (m *Machine) SnapshotBody(*raftpb.Snapshot) (io.ReadCloser, error) { return nil, nil }

// ReceiveSnapshot has nothing to stage.
func (m *Machine) ReceiveSnapshot(_ *raftpb.Snapshot, body io.Reader) error {
	if body != nil {
		_, err := io.Copy(io.Discard, body)
		return err
	}
	return nil
}

// Restore replaces the state with the snapshot's.
func (m *Machine) Restore(snap *raftpb.Snapshot) error {
	st, err := decodeSnapshot(snap.GetData())
	if err != nil {
		return fmt.Errorf("restore offsets snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	m.mu.Lock()
	m.st = st
	m.mu.Unlock()
	return nil
}

func decodeSnapshot(b []byte) (*state, error) {
	st := newState()
	if len(b) == 0 {
		return st, nil
	}
	var doc snapshotDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("groups: decode snapshot: %w", err)
	}
	for name, g := range doc.Groups {
		if g == nil {
			return nil, fmt.Errorf("groups: decode snapshot: group %q is null", name)
		}
		if g.Members == nil {
			g.Members = map[string]*Member{}
		}
		for id, mem := range g.Members {
			if mem == nil {
				return nil, fmt.Errorf("groups: decode snapshot: member %q of %q is null", id, name)
			}
		}
		st.groups[name] = g
	}
	for name, list := range doc.Offsets {
		offs := map[TopicPartition]Offset{}
		for _, so := range list {
			offs[so.TopicPartition] = so.Offset
		}
		st.offsets[name] = offs
	}
	for name, list := range doc.Pending {
		if st.groups[name] == nil {
			return nil, fmt.Errorf("groups: decode snapshot: pending offsets of unknown group %q", name)
		}
		byProducer := map[int64]*PendingTxn{}
		for _, sp := range list {
			p := &PendingTxn{ProducerEpoch: sp.ProducerEpoch, Offsets: map[TopicPartition]Offset{}}
			for _, so := range sp.Offsets {
				p.Offsets[so.TopicPartition] = so.Offset
			}
			byProducer[sp.ProducerID] = p
		}
		if len(byProducer) > 0 {
			st.pending[name] = byProducer
		}
	}
	for _, sp := range doc.Producers {
		st.producers[sp.ProducerID] = sp.ProducerSeen
	}
	return st, nil
}
