package coordinator

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// Metadata is group 0's state machine. Apply publishes a new immutable
// *State; View returns the current one to any goroutine.
type Metadata struct {
	state atomic.Pointer[State]

	mu      sync.Mutex // guards changed
	changed chan struct{}
}

var _ raftgroup.StateMachine = (*Metadata)(nil)

// NewMetadata returns an empty metadata state machine.
func NewMetadata() *Metadata {
	m := &Metadata{changed: make(chan struct{})}
	m.state.Store(newState())
	return m
}

// View returns the current state. The caller must not modify it.
func (m *Metadata) View() *State { return m.state.Load() }

// Changed returns a channel closed at the next change of state.
func (m *Metadata) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *Metadata) publish(s *State) {
	m.state.Store(s)
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// Applied is zero: the metadata lives in memory and is rebuilt from the
// group's snapshot and WAL on every start.
func (m *Metadata) Applied() uint64 { return 0 }

// Apply applies one committed command. A command that fails (say, a topic
// that exists already) leaves the state as it was and returns its error in
// the Result; only an undecodable entry is fatal.
func (m *Metadata) Apply(e raftgroup.Entry) (any, error) {
	if len(e.Data) == 0 {
		return nil, nil // a new leader's no-op
	}
	c, err := DecodeCommand(e.Data)
	if err != nil {
		return nil, fmt.Errorf("apply metadata entry %d: %w", e.Index, err)
	}
	s := m.View().clone()
	res := apply(s, c, e.Index)
	if res.Err == nil {
		s.Index = e.Index
		m.publish(s)
	}
	return res, nil
}

// Try applies c to a copy of the current state without publishing it, for
// validate-only requests and early error answers.
func (m *Metadata) Try(c *Command) Result {
	s := m.View().clone()
	return apply(s, c, s.Index+1)
}

// Snapshot encodes the whole state.
func (m *Metadata) Snapshot() ([]byte, error) {
	return json.Marshal(m.View())
}

// SnapshotBody is nil: the snapshot data is the whole state.
func (m *Metadata) SnapshotBody(*raftpb.Snapshot) (io.ReadCloser, error) { return nil, nil }

// ReceiveSnapshot has nothing to stage.
func (m *Metadata) ReceiveSnapshot(_ *raftpb.Snapshot, body io.Reader) error {
	if body != nil {
		_, err := io.Copy(io.Discard, body)
		return err
	}
	return nil
}

// Restore replaces the state with the snapshot's.
func (m *Metadata) Restore(snap *raftpb.Snapshot) error {
	s := newState()
	if len(snap.GetData()) > 0 {
		if err := json.Unmarshal(snap.GetData(), s); err != nil {
			return fmt.Errorf("restore metadata snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
		}
		s.linkDefaults()
		if err := s.check(); err != nil {
			return fmt.Errorf("restore metadata snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
		}
	}
	m.publish(s)
	return nil
}
