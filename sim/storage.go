package sim

import (
	"errors"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftq/raftq/raftgroup"
)

// Store is a group's simulated disk. Writes land in a volatile buffer and
// become durable on sync; a crash keeps only a random prefix of the
// buffered writes (a torn tail), as a machine losing its page cache would.
// It outlives the node's incarnations: a restarted node loads from it.
type Store struct {
	durable state
	pending []write
	closed  bool
	// LieAboutSync is a planted bug: a sync request is acknowledged without
	// making anything durable.
	LieAboutSync bool
}

type state struct {
	snap *raftpb.Snapshot
	hs   *raftpb.HardState
	ents []*raftpb.Entry
}

type write struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
	snap *raftpb.Snapshot
	// install: snap came from the leader and replaces the whole log.
	install bool
	done    func(error) // SaveAsync with sync: called once durable
}

var errClosed = errors.New("sim: store closed")

var _ raftgroup.AsyncStorage = (*Store)(nil)

// Load returns the durable state, deep-copied so that no incarnation
// shares memory with the "disk".
func (s *Store) Load() (raftgroup.State, error) {
	s.closed = false
	st := raftgroup.State{}
	if s.durable.snap != nil {
		st.Snapshot = proto.Clone(s.durable.snap).(*raftpb.Snapshot)
	}
	if s.durable.hs != nil {
		st.HardState = proto.Clone(s.durable.hs).(*raftpb.HardState)
	}
	for _, e := range s.durable.ents {
		st.Entries = append(st.Entries, proto.Clone(e).(*raftpb.Entry))
	}
	return st, nil
}

// Save buffers a write and makes every buffered write durable on sync.
func (s *Store) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	if s.closed {
		return errClosed
	}
	if hs == nil && len(ents) == 0 {
		return nil
	}
	s.pending = append(s.pending, newWrite(hs, ents))
	if sync && !s.LieAboutSync {
		s.flush(len(s.pending))
	}
	return nil
}

// newWrite copies what a save hands over, so that no incarnation shares
// memory with the "disk".
func newWrite(hs *raftpb.HardState, ents []*raftpb.Entry) write {
	w := write{ents: slices.Clone(ents)}
	if hs != nil {
		w.hs = proto.Clone(hs).(*raftpb.HardState)
	}
	return w
}

// SaveAsync buffers a write like Save. With sync it completes only when
// the simulator calls Sync (or a later write syncs), so that a group's
// writes stay in flight across ticks while raft goes on; a crash loses
// them unacknowledged.
func (s *Store) SaveAsync(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool, done func(error)) {
	if s.closed {
		done(errClosed)
		return
	}
	if hs == nil && len(ents) == 0 {
		done(nil)
		return
	}
	w := newWrite(hs, ents)
	if !sync || s.LieAboutSync {
		s.pending = append(s.pending, w)
		done(nil)
		return
	}
	w.done = done
	s.pending = append(s.pending, w)
}

// Sync makes every buffered write durable and completes the SaveAsync
// calls waiting for it.
func (s *Store) Sync() {
	if !s.closed {
		s.flush(len(s.pending))
	}
}

// SaveSnapshot is durable on return, as the etcd WAL's snapshot record is.
// An installed snapshot (from the leader) replaces the whole log; a local
// one covers only a prefix.
func (s *Store) SaveSnapshot(snap *raftpb.Snapshot, install bool) error {
	if s.closed {
		return errClosed
	}
	s.pending = append(s.pending, write{snap: proto.Clone(snap).(*raftpb.Snapshot), install: install})
	if !s.LieAboutSync {
		s.flush(len(s.pending))
	}
	return nil
}

// Release is a no-op: the durable log is trimmed when snapshots land.
func (s *Store) Release(*raftpb.Snapshot) error { return nil }

// Close is a clean stop: buffered writes reach the disk (the process
// exits, the machine stays up).
func (s *Store) Close() error {
	s.flush(len(s.pending))
	s.closed = true
	return nil
}

// Crash loses the buffered writes except a prefix of keep of them.
func (s *Store) Crash(keep int) {
	s.flush(min(keep, len(s.pending)))
	s.pending = nil
	s.closed = true
}

// Pending is the number of buffered (unsynced) writes.
func (s *Store) Pending() int { return len(s.pending) }

func (s *Store) flush(n int) {
	done := s.pending[:n]
	for _, w := range done {
		s.durable.apply(w)
	}
	s.pending = s.pending[n:]
	for _, w := range done {
		if w.done != nil {
			w.done(nil)
		}
	}
}

func (d *state) apply(w write) {
	if w.snap != nil {
		idx := w.snap.GetMetadata().GetIndex()
		if idx <= d.snap.GetMetadata().GetIndex() {
			return
		}
		d.snap = w.snap
		kept := d.ents[:0:0]
		for _, e := range d.ents {
			if e.GetIndex() > idx && !w.install {
				kept = append(kept, e)
			}
		}
		d.ents = kept
	}
	if w.hs != nil {
		d.hs = w.hs
	}
	if len(w.ents) > 0 {
		first := w.ents[0].GetIndex()
		kept := d.ents
		for len(kept) > 0 && kept[len(kept)-1].GetIndex() >= first {
			kept = kept[:len(kept)-1]
		}
		d.ents = append(slices.Clone(kept), w.ents...)
	}
}
