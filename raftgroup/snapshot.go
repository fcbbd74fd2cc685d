package raftgroup

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// BackgroundSnapshotter is a StateMachine whose snapshots can be made
// durable off the group's goroutine. A partition's snapshot fsyncs
// megabytes of log; done inline it would stall every proposal of the group
// for as long (etcd's server takes its snapshots on another goroutine for
// the same reason).
type BackgroundSnapshotter interface {
	// PrepareSnapshot captures the state as of the last applied entry and
	// returns it with a function that makes it durable. The group runs
	// persist on another goroutine, concurrently with later Apply calls
	// but never with Restore or another persist, and records the snapshot
	// only after persist returns nil.
	PrepareSnapshot() (data []byte, persist func() error, err error)
}

// snapJob is a snapshot being made durable in the background.
type snapJob struct {
	done chan struct{}
	err  error
}

// maybeSnapshot starts a snapshot once SnapshotEntries entries or
// SnapshotBytes bytes were applied since the last one, unless one is
// still being written. The state is captured here, between applies; the
// fsyncs, the snapshot file, the compaction of the raft log (keeping
// catch-up entries for slow followers) and the release of old WAL
// segments happen on another goroutine, or inline in manual mode so that
// the simulator stays deterministic.
//
// A snapshot older than the latest change that added a member is stale
// too (snapshotGate): raft would send it to the new member, which must
// refuse a snapshot whose configuration lacks it.
func (g *Group) maybeSnapshot() {
	entries := g.applied - g.snapIndex
	stale := g.snapIndex < g.memberAddedAt && g.applied >= g.memberAddedAt
	if g.snapping != nil || !stale && entries < g.cfg.SnapshotEntries && g.bytesSinceSnap < g.cfg.SnapshotBytes {
		return
	}
	g.takeSnapshot(entries)
}

// snapshotGate is raft's storage: the group's MemoryStorage, whose
// snapshot raft may send only if it postdates the latest change that
// added a member. An older one's configuration lacks the new member,
// which would refuse it ("not in the ConfState") after the whole body
// had streamed, again at every retry until a newer snapshot came along:
// gigabytes for a large partition's new replica. Until maybeSnapshot's
// fresh one is durable, raft hears it is temporarily unavailable and
// tries again later, as etcd's server makes a fresh snapshot for each
// one it sends.
type snapshotGate struct {
	*raft.MemoryStorage
	g *Group
}

func (s snapshotGate) Snapshot() (*raftpb.Snapshot, error) {
	snap, err := s.MemoryStorage.Snapshot()
	if err == nil && snap.GetMetadata().GetIndex() < s.g.memberAddedAt {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return snap, err
}

// addsMember reports whether configuration b holds a member a lacked.
func addsMember(a, b confView) bool {
	was := map[uint64]bool{}
	for _, ids := range [][]uint64{a.Voters, a.VotersOutgoing, a.Learners, a.LearnersNext} {
		for _, id := range ids {
			was[id] = true
		}
	}
	for _, ids := range [][]uint64{b.Voters, b.VotersOutgoing, b.Learners, b.LearnersNext} {
		for _, id := range ids {
			if !was[id] {
				return true
			}
		}
	}
	return false
}

// snapshotNow snapshots whatever was applied since the last snapshot,
// below the usual thresholds: the shared node WAL asks it of a group
// whose old records keep old segments from being deleted (an idle group
// would otherwise pin them for good). It runs on the group's goroutine.
func (g *Group) snapshotNow() {
	if g.halted || g.snapping != nil || g.applied <= g.snapIndex {
		return
	}
	g.takeSnapshot(g.applied - g.snapIndex)
}

// takeSnapshot captures the state machine at the applied index and
// persists it, in the background unless the host runs manually.
func (g *Group) takeSnapshot(entries uint64) {
	data, persist, err := g.captureSnapshot()
	if err != nil {
		g.fatal("state machine snapshot", err)
		return
	}
	w := snapWrite{
		g: g, index: g.applied, conf: proto.CloneOf(g.confState),
		data: data, persist: persist, keep: g.catchUpEntries(entries),
	}
	g.snapIndex, g.bytesSinceSnap = g.applied, 0
	g.metrics.snapshots.Add(1)
	if g.host.cfg.Manual {
		if err := w.run(); err != nil {
			g.fatal("snapshot", err)
		}
		return
	}
	job := &snapJob{done: make(chan struct{})}
	g.snapping = job
	go func() {
		job.err = w.run()
		close(job.done)
		// Wake the owner to reap the job; a closed group reaps it in
		// shutdown instead.
		_ = g.submit(func() { g.reapSnapshot(job) })
	}()
}

func (g *Group) captureSnapshot() ([]byte, func() error, error) {
	if bs, ok := g.sm.(BackgroundSnapshotter); ok {
		return bs.PrepareSnapshot()
	}
	data, err := g.sm.Snapshot()
	return data, nil, err
}

// reapSnapshot runs on the owner once job has finished.
func (g *Group) reapSnapshot(job *snapJob) {
	if g.snapping != job {
		return
	}
	g.snapping = nil
	if job.err != nil {
		g.fatal("snapshot", job.err)
	}
}

// waitSnapshot blocks until the background snapshot, if any, is done. The
// owner calls it before anything that must not overlap one: installing a
// snapshot from the leader, and closing. It reports the job's error.
func (g *Group) waitSnapshot() error {
	job := g.snapping
	if job == nil {
		return nil
	}
	<-job.done
	g.snapping = nil
	return job.err
}

// snapWrite is the part of a snapshot that touches the disk. Everything it
// uses is either its own copy or safe for concurrent use (MemoryStorage
// and the Storage's snapshot calls lock; the WAL does too).
type snapWrite struct {
	g       *Group
	index   uint64
	conf    *raftpb.ConfState
	data    []byte
	persist func() error // nil: the state machine's data is already durable
	keep    uint64
}

func (w snapWrite) run() error {
	g := w.g
	if w.persist != nil {
		if err := w.persist(); err != nil {
			return fmt.Errorf("state machine: %w", err)
		}
	}
	snap, err := g.mem.CreateSnapshot(w.index, w.conf, w.data)
	if errors.Is(err, raft.ErrSnapOutOfDate) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create snapshot: %w", err)
	}
	if err := g.storage.SaveSnapshot(snap, false); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if w.index > w.keep {
		compact := w.index - w.keep
		if first, _ := g.mem.FirstIndex(); compact > first {
			if err := g.mem.Compact(compact); err != nil && !errors.Is(err, raft.ErrCompacted) {
				return fmt.Errorf("compact: %w", err)
			}
		}
	}
	if err := g.storage.Release(snap); err != nil {
		return fmt.Errorf("release storage: %w", err)
	}
	return nil
}

// catchUpEntries is how many entries to keep behind a snapshot: at most
// SnapshotCatchUpEntries, and about SnapshotCatchUpBytes at the average
// entry size since the last snapshot.
func (g *Group) catchUpEntries(entries uint64) uint64 {
	keep := g.cfg.SnapshotCatchUpEntries
	if entries == 0 || g.bytesSinceSnap == 0 {
		return keep
	}
	avg := max(g.bytesSinceSnap/entries, 1)
	return max(min(keep, g.cfg.SnapshotCatchUpBytes/avg), 1)
}
