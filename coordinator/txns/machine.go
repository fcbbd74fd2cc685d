package txns

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// Machine is the replicated state machine of one __transaction_state
// partition: the transactional ids that hash to it, their producer ids
// and epochs, their transactions, and the producer ids it may hand out.
//
// Apply, Snapshot and Restore run on the raft group's goroutine; readers
// (the hosting coordinator, on any goroutine) go through the accessors,
// which take mu for reading and return copies. The state lives in memory
// and is rebuilt on every start from the group's raft snapshot and the
// WAL after it (Applied is 0).
type Machine struct {
	mu sync.RWMutex // guards st; a leaf lock
	st *state
}

var _ raftgroup.StateMachine = (*Machine)(nil)

// NewMachine returns an empty transaction partition state machine.
func NewMachine() *Machine { return &Machine{st: newState()} }

// Applied is zero: the state is rebuilt from snapshot and WAL on start.
func (m *Machine) Applied() uint64 { return 0 }

// Apply applies one committed entry and returns its Result. Entries that
// are no transaction command (a leader's no-op: nil; anything else:
// INVALID_REQUEST) change nothing; Apply never fails, so a replica never
// halts on bad input.
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
	return m.st.apply(c), nil
}

// Txn returns a copy of the state of transactional id, or nil.
func (m *Machine) Txn(id string) *Txn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if t := m.st.txns[id]; t != nil {
		return t.Clone()
	}
	return nil
}

// Txns returns a copy of every transactional id's state, sorted by id.
func (m *Machine) Txns() []*Txn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.list(func(*Txn) bool { return true })
}

func (s *state) list(keep func(*Txn) bool) []*Txn {
	var out []*Txn
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		if t := s.txns[id]; keep(t) {
			out = append(out, t.Clone())
		}
	}
	return out
}

// Describe answers DescribeTransactions for one id: its state, or
// INVALID_REQUEST for an empty id and TRANSACTIONAL_ID_NOT_FOUND for an
// unknown (or expired) one.
func (m *Machine) Describe(id string) (*Txn, int16) {
	if id == "" {
		return nil, kerr.InvalidRequest.Code
	}
	if t := m.Txn(id); t != nil {
		return t, 0
	}
	return nil, kerr.TransactionalIDNotFound.Code
}

// ListFilter selects transactions for ListTransactions. Empty filters
// match everything.
type ListFilter struct {
	States      []State // v0+: any of these states
	ProducerIDs []int64 // v0+: any of these producer ids
	// MinDurationMs (v1+, KIP-994; nil for the request's -1) keeps only
	// transactions open (Ongoing or Prepare*) for longer than it as of
	// NowMs.
	MinDurationMs *int64
	NowMs         int64
	// IDPattern (v2+, KIP-1152), when set, must match the id.
	IDPattern *regexp.Regexp
}

func (f *ListFilter) match(t *Txn) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, t.State):
		return false
	case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, t.ProducerID):
		return false
	case f.MinDurationMs != nil && (t.StartMs < 0 || !open(t.State) || f.NowMs-t.StartMs <= *f.MinDurationMs):
		return false
	case f.IDPattern != nil && !f.IDPattern.MatchString(t.ID):
		return false
	}
	return true
}

func open(s State) bool { return s == StateOngoing || s.preparing() }

// List answers ListTransactions: the transactions f selects, sorted by id.
func (m *Machine) List(f ListFilter) []*Txn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.list(f.match)
}

// Pending returns the transactions whose markers are still to be written
// (PrepareCommit or PrepareAbort), sorted by id, with the partitions and
// groups still waiting. A new leader resumes writing them from here.
func (m *Machine) Pending() []PendingTxn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []PendingTxn
	for _, t := range m.st.list(func(t *Txn) bool { return t.State.preparing() }) {
		out = append(out, PendingTxn{TransactionalID: t.ID, ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch,
			Commit: t.State == StatePrepareCommit, Partitions: t.Partitions, Groups: t.Groups, MarkerSeq: t.MarkerSeq})
	}
	return out
}

// Verify answers a verify-only AddPartitionsToTxn (KIP-890) from the
// local state without a proposal, as the AddPartitions command's
// verify-only form would at apply. It is a local read: a deposed leader
// may answer NONE for a transaction its successor has already ended, the
// hanging transaction KIP-890 exists to prevent, so the coordinator
// answers verification through the log (Coordinator.AddPartitions); this
// is for callers that know their state is current.
func (m *Machine) Verify(id string, producerID int64, epoch int16, parts Partitions) TxnResult {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.verify(AddTxn{TransactionalID: id, ProducerID: producerID, ProducerEpoch: epoch, VerifyOnly: true, Partitions: parts})
}

// FreeProducerIDs is how many granted producer ids are left to hand out;
// the leader grants another block before it runs out.
func (m *Machine) FreeProducerIDs() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.freeIDs()
}

// CoordinatorEpoch is the term of the last applied Barrier: the
// coordinator epoch the current leader's WriteTxnMarkers carry, by which
// partitions refuse markers from a deposed coordinator.
func (m *Machine) CoordinatorEpoch() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.epoch
}

// TickDue reports whether a Tick at nowMs would change anything, so that
// the leader proposes one only then.
func (m *Machine) TickDue(nowMs, expirationMs int64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, t := range m.st.txns {
		if timedOut(t, nowMs) || expired(t, nowMs, expirationMs) {
			return true
		}
	}
	return false
}

// snapshotDoc is the snapshot's encoding: JSON, whose maps encode with
// sorted keys and whose lists are kept sorted, so equal states encode to
// equal bytes.
type snapshotDoc struct {
	Epoch   uint64            `json:"epoch"`
	Txns    map[string]*Txn   `json:"txns"`
	Free    []ProducerIDBlock `json:"free"`
	Granted int64             `json:"granted"`
}

// Snapshot encodes the whole state.
func (m *Machine) Snapshot() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	free := m.st.free
	if free == nil {
		free = []ProducerIDBlock{}
	}
	return json.Marshal(snapshotDoc{Epoch: m.st.epoch, Txns: m.st.txns, Free: free, Granted: m.st.granted})
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
		return fmt.Errorf("restore transaction snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
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
		return nil, fmt.Errorf("txns: decode snapshot: %w", err)
	}
	for id, t := range doc.Txns {
		if t == nil || t.ID != id || !t.State.valid() {
			return nil, fmt.Errorf("txns: decode snapshot: transactional id %q is malformed", id)
		}
		parts, ok := t.Partitions.normalized()
		if !ok || !slices.IsSorted(t.Groups) || len(slices.Compact(slices.Clone(t.Groups))) != len(t.Groups) {
			return nil, fmt.Errorf("txns: decode snapshot: partitions or groups of %q are malformed", id)
		}
		t.Partitions = parts
		st.txns[id] = t
	}
	st.epoch, st.granted = doc.Epoch, doc.Granted
	for _, b := range doc.Free {
		if b.Count <= 0 || b.Start < 0 || b.Start+b.Count > doc.Granted {
			return nil, fmt.Errorf("txns: decode snapshot: producer id block %+v is malformed", b)
		}
		st.free = append(st.free, b)
	}
	return st, nil
}
