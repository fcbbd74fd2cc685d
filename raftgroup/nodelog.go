package raftgroup

import (
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// nodeLog is one etcd WAL that every group of a node writes through
// (Config.SharedWAL): group commit across groups. Groups hand it records
// and wait; one flusher goroutine writes everything queued as one WAL
// Save, so N groups with work share one fdatasync instead of making N.
//
// Each record is one etcd WAL entry whose index is the log's own sequence
// number, not a raft index. Replay sorts the records back out by group.
// To let old segments go, the flusher periodically writes a checkpoint
// that restates every group's hard state and snapshot, and moves the WAL's
// start (an etcd WAL snapshot record) to just before the oldest record
// that still holds entries some group has not snapshotted.
type nodeLog struct {
	dir     string
	zl      *zap.Logger
	observe func(time.Duration)
	// compact asks a group to snapshot so its records can go; it must
	// not block (the flusher calls it).
	compact func(group uint64)

	mu      sync.Mutex // guards the fields below; a leaf lock
	queue   []*logWrite
	queued  int   // bytes in queue
	waiting int   // writes in queue that someone waits for
	err     error // sticky: after a failed write nothing more is written
	closed  bool
	groups  map[uint64]*groupLog // live and replayed groups
	syncs   uint64

	// Owned by the flusher goroutine (and by open, before it starts).
	spare   []*logWrite // the previous batch's array, for the next queue
	w       *wal.WAL
	seq     uint64   // last sequence number written
	start   uint64   // the WAL's start: records after it are replayed
	ckps    []uint64 // the last busyPinCheckpoints checkpoints, oldest first
	written int64    // bytes since the last checkpoint

	kick   chan struct{} // never closed: writers send on it after unlocking
	retire *retirer      // retires the segments moveStart released
	stopc  chan struct{}
	donec  chan struct{} // the flusher has exited
}

// logWrite is a queued record.
type logWrite struct {
	group   uint64
	recs    [][]byte // one WAL entry each
	kind    byte
	lasts   []uint64        // recSave: each record's last raft index, 0 if none
	snap    *walpb.Snapshot // recSnapshot
	install bool            // recSnapshot
	hs      *raftpb.HardState
	done    func(error) // nil: nobody waits; else called once written
}

// groupLog is what the node log knows of one group.
type groupLog struct {
	hs      *raftpb.HardState
	snap    *walpb.Snapshot
	pins    []logPin        // records holding entries not yet snapshotted
	ents    []*raftpb.Entry // replayed entries, handed over once by claim
	opened  bool            // a Storage is using the group
	claimed bool            // it was opened once in this process
	stale   int             // checkpoints in a row it held stalePin
	// stalePin is the oldest record it held at the last checkpoint. A
	// busy group holds old records at every checkpoint too (its snapshots
	// come less often), but never the same one twice.
	stalePin uint64
}

// logPin says record seq holds entries up to raft index last.
type logPin struct{ seq, last uint64 }

// checkpointEvery is how many bytes go into the log between checkpoints:
// four segments, so that a few segments at most outlive the records in
// them that still matter, and a checkpoint (one more fsync) is rare.
func checkpointEvery() int64 { return 4 * wal.SegmentSizeBytes }

// openNodeLog opens or creates the node log in dir and replays it.
func openNodeLog(dir string, meta []byte, fsync FsyncPolicy, zl *zap.Logger, observe func(time.Duration), compact func(uint64)) (*nodeLog, error) {
	if compact == nil {
		compact = func(uint64) {}
	}
	l := &nodeLog{dir: dir, zl: zl, observe: observe, compact: compact, groups: map[uint64]*groupLog{}, kick: make(chan struct{}, 1), stopc: make(chan struct{}), donec: make(chan struct{})}
	if !wal.Exist(dir) {
		w, err := wal.Create(zl, dir, meta)
		if err != nil {
			return nil, fmt.Errorf("create node wal %s: %w", dir, err)
		}
		if _, err := minSegmentBytes(dir); err != nil {
			w.Close()
			return nil, err
		}
		l.w = w
	} else if err := l.replay(meta, fsync != FsyncNever); err != nil {
		return nil, err
	}
	if fsync == FsyncNever {
		l.w.SetUnsafeNoFsync()
	}
	l.retire = newRetirer(dir, fsync, func(err error) {
		zl.Warn("cannot retire old node wal segments", zap.Error(err))
	})
	go l.run()
	l.retire.wake() // segments a crash left retired (wal_retire.go)
	return l, nil
}

// replay opens an existing log and rebuilds every group's state from it.
func (l *nodeLog) replay(meta []byte, sized bool) error {
	if err := checkWAL(l.dir, sized); err != nil {
		return err
	}
	snaps, err := wal.ValidSnapshotEntries(l.zl, l.dir)
	if err != nil {
		return fmt.Errorf("list node wal checkpoints %s: %w", l.dir, err)
	}
	start := &walpb.Snapshot{Index: new(uint64), Term: new(uint64)}
	if len(snaps) > 0 {
		start = snaps[len(snaps)-1]
	}
	w, got, _, ents, err := readWAL(l.zl, l.dir, start)
	if err != nil {
		return err
	}
	l.w = w
	if err := l.replayRecords(got, meta, start.GetIndex(), ents); err != nil {
		l.w.Close()
		return err
	}
	return nil
}

func (l *nodeLog) replayRecords(got, meta []byte, start uint64, ents []*raftpb.Entry) error {
	if string(got) != string(meta) {
		return fmt.Errorf("open node wal %s: written for node %x, not %x", l.dir, got, meta)
	}
	l.start, l.seq = start, start
	for _, e := range ents {
		rec, err := decodeRecord(e.GetData())
		if err != nil {
			return fmt.Errorf("node wal %s: record %d: %w", l.dir, e.GetIndex(), err)
		}
		if err := l.apply(e.GetIndex(), rec); err != nil {
			return fmt.Errorf("node wal %s: record %d: %w", l.dir, e.GetIndex(), err)
		}
		l.seq = e.GetIndex()
	}
	return nil
}

func (l *nodeLog) group(id uint64) *groupLog {
	g := l.groups[id]
	if g == nil {
		g = &groupLog{}
		l.groups[id] = g
	}
	return g
}

// apply replays one record.
func (l *nodeLog) apply(seq uint64, rec logRecord) error {
	switch rec.kind {
	case recSave:
		g := l.group(rec.group)
		if rec.hs != nil {
			g.hs = rec.hs
		}
		if len(rec.ents) > 0 {
			if err := g.appendEntries(rec.ents); err != nil {
				return fmt.Errorf("group %d: %w", rec.group, err)
			}
			g.pins = append(g.pins, logPin{seq, rec.ents[len(rec.ents)-1].GetIndex()})
		}
	case recSnapshot:
		g := l.group(rec.group)
		g.setSnapshot(rec.snap, rec.install)
	case recRemove:
		delete(l.groups, rec.group)
	case recCheckpoint:
		for _, gs := range rec.groups {
			g := l.group(gs.group)
			if gs.hs != nil {
				g.hs = gs.hs
			}
			if gs.snap != nil && gs.snap.GetIndex() >= g.snap.GetIndex() {
				g.setSnapshot(gs.snap, false)
			}
		}
	}
	return nil
}

// appendEntries adds ents to the replayed log, overwriting any suffix
// they conflict with, as raft's MemoryStorage does.
func (g *groupLog) appendEntries(ents []*raftpb.Entry) error {
	first := ents[0].GetIndex()
	if len(g.ents) > 0 {
		base := g.ents[0].GetIndex()
		last := g.ents[len(g.ents)-1].GetIndex()
		switch {
		case first > last+1:
			return fmt.Errorf("entries from %d leave a gap after %d", first, last)
		case first <= base:
			g.ents = g.ents[:0]
		default:
			g.ents = g.ents[:first-base]
		}
	}
	g.ents = append(g.ents, ents...)
	return nil
}

// setSnapshot records a durable snapshot. An installed one replaces the
// log; a local one drops only the entries it covers.
func (g *groupLog) setSnapshot(s *walpb.Snapshot, install bool) {
	g.snap = s
	if install {
		g.ents, g.pins = nil, nil
		return
	}
	g.release(s.GetIndex())
	for len(g.ents) > 0 && g.ents[0].GetIndex() <= s.GetIndex() {
		g.ents = g.ents[1:]
	}
}

// release unpins the records whose entries are all at or below index.
func (g *groupLog) release(index uint64) {
	n := 0
	for n < len(g.pins) && g.pins[n].last <= index {
		n++
	}
	g.pins = g.pins[n:]
}

// claim hands a group's replayed state to its Storage, once.
func (l *nodeLog) claim(id uint64) (hs *raftpb.HardState, snap *walpb.Snapshot, ents []*raftpb.Entry, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, nil, ErrStopped
	}
	g := l.group(id)
	if g.claimed {
		// Entries written since the claim live only in the group's
		// memory, so a second open in this process would miss them.
		return nil, nil, nil, fmt.Errorf("raftgroup: group %d was already opened on this node wal; reopening it needs a restart", id)
	}
	g.opened, g.claimed = true, true
	hs, snap, ents = g.hs, g.snap, g.ents
	g.ents = nil
	return atLeastSnapshot(hs, snap), snap, ents, nil
}

// atLeastSnapshot raises a hard state that a crash left behind a durable
// installed snapshot (the snapshot's record and the Ready's hard state
// are separate writes): raft refuses a commit index below its snapshot.
// The snapshot is committed, so its index is a true commit index; a term
// raised to the snapshot's carries no vote.
func atLeastSnapshot(hs *raftpb.HardState, snap *walpb.Snapshot) *raftpb.HardState {
	if snap.GetIndex() <= hs.GetCommit() && snap.GetTerm() <= hs.GetTerm() {
		return hs
	}
	out := &raftpb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(max(hs.GetCommit(), snap.GetIndex()))}
	if snap.GetTerm() > hs.GetTerm() {
		out.Term, out.Vote = new(snap.GetTerm()), new(uint64(0))
	}
	return out
}

// has reports whether the log holds anything for group id.
func (l *nodeLog) has(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.groups[id]
	return g != nil && (g.hs != nil || g.snap != nil || len(g.ents) > 0 || len(g.pins) > 0)
}

// release lets the log drop group's records at or below index.
func (l *nodeLog) release(id uint64, index uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.groups[id]; g != nil {
		g.release(index)
	}
}

// closeGroup marks a group no longer open; its records stay.
func (l *nodeLog) closeGroup(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.groups[id]; g != nil {
		g.opened = false
	}
}

// write queues w and, if wait, blocks until it is durable.
func (l *nodeLog) write(w *logWrite, wait bool) error {
	if !wait {
		return l.enqueue(w, false)
	}
	ch := make(chan error, 1)
	w.done = func(err error) { ch <- err }
	if err := l.enqueue(w, true); err != nil {
		return err
	}
	return <-ch
}

// enqueue adds w to the next batch; kick wakes the flusher for it.
func (l *nodeLog) enqueue(w *logWrite, kick bool) error {
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	l.queue = append(l.queue, w)
	for _, r := range w.recs {
		l.queued += len(r)
	}
	if w.done != nil {
		l.waiting++
	}
	l.mu.Unlock()
	if kick {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

func (l *nodeLog) usable() error {
	switch {
	case l.err != nil:
		return l.err
	case l.closed:
		return ErrStopped
	}
	return nil
}

func (l *nodeLog) save(group uint64, hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	w := &logWrite{group: group, kind: recSave, hs: hs}
	splitSave(w, hs, ents)
	return l.write(w, sync)
}

// saveAsync queues a save without waiting: done runs on the flusher once
// the batch holding it is fsynced (sync), or at once when it is queued.
// A group's saves reach the WAL, and their done calls run, in the order
// it queued them.
func (l *nodeLog) saveAsync(group uint64, hs *raftpb.HardState, ents []*raftpb.Entry, sync bool, done func(error)) {
	w := &logWrite{group: group, kind: recSave, hs: hs}
	splitSave(w, hs, ents)
	if sync {
		w.done = done
	}
	if err := l.enqueue(w, sync); err != nil {
		done(err)
		return
	}
	if !sync {
		done(nil)
	}
}

// saveChunk bounds the bytes of entries in one record, unless a single
// entry is bigger. etcd's WAL encodes a record into a 1 MiB buffer it
// keeps; a bigger record is marshalled into a fresh allocation and then
// copied again to pad it to 8 bytes, which made a 64 KiB workload spend a
// fifth of its CPU in that copy.
const saveChunk = 768 << 10

// recordBufs recycles save records once the WAL has copied them.
var recordBufs sync.Pool

// splitSave encodes a Save as records of about saveChunk bytes of
// entries each. The hard state goes in the last: a torn write that keeps
// a prefix of them never leaves a commit index above the entries kept.
func splitSave(w *logWrite, hs *raftpb.HardState, ents []*raftpb.Entry) {
	for start := 0; start < len(ents) || len(w.recs) == 0; {
		end, size := start, 24
		for end < len(ents) {
			next := proto.Size(ents[end]) + 10
			if end > start && size+next > saveChunk {
				break
			}
			size += next
			end++
		}
		var chunkHS *raftpb.HardState
		if end == len(ents) {
			chunkHS = hs
		}
		w.recs = append(w.recs, appendSave(recordBuf(size), w.group, chunkHS, ents[start:end]))
		var last uint64
		if end > start {
			last = ents[end-1].GetIndex()
		}
		w.lasts = append(w.lasts, last)
		start = end
	}
}

func recordBuf(size int) []byte {
	if p, ok := recordBufs.Get().(*[]byte); ok && cap(*p) >= size {
		return (*p)[:0]
	}
	return make([]byte, 0, size)
}

// recycle returns a written save record's buffer to the pool.
func recycle(b []byte) {
	if cap(b) <= 4*saveChunk {
		recordBufs.Put(&b)
	}
}

func (l *nodeLog) saveSnapshot(group uint64, s *walpb.Snapshot, install bool) error {
	return l.write(&logWrite{group: group, kind: recSnapshot, recs: [][]byte{encodeSnapshot(group, s, install)}, snap: s, install: install}, true)
}

// remove forgets group for good: its replica left this node.
func (l *nodeLog) remove(group uint64) error {
	return l.write(&logWrite{group: group, kind: recRemove, recs: [][]byte{encodeRemove(group)}}, true)
}

// close flushes what is queued, stops the flusher and closes the WAL.
func (l *nodeLog) close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stopc)
	<-l.donec
	// The retirer takes only segments the WAL has unlocked; it must be
	// done, after the last checkpoint, before Close unlocks them all.
	l.retire.close()
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	if cerr := l.w.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close node wal %s: %w", l.dir, cerr)
	}
	return err
}

// fsyncs is how many WAL Saves the log has made.
func (l *nodeLog) fsyncs() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncs
}
