package raftgroup

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// run is the flusher: each kick writes everything queued as one WAL Save
// (one fdatasync), then wakes the writers that wait.
func (l *nodeLog) run() {
	defer close(l.donec)
	for {
		select {
		case <-l.kick:
		case <-l.stopc:
			l.flush(true) // closing: what is still queued
			return
		}
		if l.queuedBytes() < yieldBelow {
			runtime.Gosched()
		}
		l.flush(false)
	}
}

// yieldBelow is the queue size under which the flusher yields once before
// it writes: groups that the same network read made runnable then join
// the batch (64 groups of 100 B entries commit 3-5x more with it). A queue
// this big is worth writing at once.
const yieldBelow = 256 << 10

func (l *nodeLog) queuedBytes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}

// flush writes batches while someone waits for a queued write (all: until
// the queue is empty). Writers that arrive while a batch is being written
// form the next one; writes nobody waits for (a commit index moving on)
// go with the next batch that must be durable, not in an fsync of their
// own.
func (l *nodeLog) flush(all bool) {
	for {
		l.mu.Lock()
		if !all && l.waiting == 0 {
			l.mu.Unlock()
			return
		}
		batch := l.queue
		l.queue, l.spare = l.spare[:0], nil
		l.queued, l.waiting = 0, 0
		err := l.err
		l.mu.Unlock()
		if len(batch) == 0 {
			l.spare = batch
			return
		}
		if err == nil {
			err = l.writeBatch(batch)
		}
		l.mu.Lock()
		if err != nil && l.err == nil {
			l.err = err
		}
		if err == nil {
			l.track(batch)
		}
		l.mu.Unlock()
		for i, w := range batch {
			if w.done != nil {
				w.done(err)
			}
			batch[i] = nil
		}
		l.spare = batch[:0]
		if err == nil && l.written >= checkpointEvery() {
			l.checkpoint()
		}
	}
}

// writeBatch saves the batch as consecutive WAL entries; etcd's WAL
// fsyncs once at the end (or cuts a segment, which fsyncs too).
func (l *nodeLog) writeBatch(batch []*logWrite) error {
	var ents []*raftpb.Entry
	for _, w := range batch {
		for _, rec := range w.recs {
			ents = append(ents, &raftpb.Entry{Index: new(l.seq + uint64(len(ents)) + 1), Data: rec})
			l.written += int64(len(rec))
		}
	}
	began := time.Now()
	if err := l.w.Save(nil, ents); err != nil {
		return fmt.Errorf("save node wal %s: %w", l.dir, err)
	}
	if l.observe != nil {
		l.observe(time.Since(began))
	}
	l.seq += uint64(len(ents))
	return nil
}

// track notes what a written batch means for each group; l.mu held.
func (l *nodeLog) track(batch []*logWrite) {
	l.syncs++
	seq := l.seq
	for _, w := range batch {
		seq -= uint64(len(w.recs))
	}
	for _, w := range batch {
		switch w.kind {
		case recSave:
			g := l.group(w.group)
			if w.hs != nil && !raft.IsEmptyHardState(w.hs) {
				g.hs = proto.CloneOf(w.hs)
			}
			for i, last := range w.lasts {
				if last > 0 {
					g.pins = append(g.pins, logPin{seq + uint64(i) + 1, last})
				}
				recycle(w.recs[i])
			}
		case recSnapshot:
			l.group(w.group).setSnapshot(w.snap, w.install)
		case recRemove:
			delete(l.groups, w.group)
		}
		seq += uint64(len(w.recs))
	}
}

// checkpoint restates every group's hard state and snapshot, then moves
// the WAL's start up to the oldest record still pinned and has the
// retirer take the segments wholly before it. It does that on a goroutine
// of its own: unlinking a 16 MiB segment (the raft benchmarks' size) took
// this VM's ext4 (online discard) 8-10 ms, four of them per checkpoint,
// and the flusher, which every group's save waits for, must not spend
// that time. A failed pass is logged; wal_retire.go says when it is
// tried again.
func (l *nodeLog) checkpoint() {
	l.mu.Lock()
	states := make([]groupState, 0, len(l.groups))
	for id, g := range l.groups {
		states = append(states, groupState{group: id, hs: g.hs, snap: g.snap})
	}
	l.mu.Unlock()
	rec := encodeCheckpoint(states)
	seq := l.seq + 1
	err := l.w.Save(&raftpb.HardState{Term: new(uint64(1)), Commit: new(seq)},
		[]*raftpb.Entry{{Index: new(seq), Data: rec}})
	if err == nil {
		l.seq = seq
		err = l.moveStart(seq)
	}
	l.written = 0
	if err != nil {
		l.mu.Lock()
		if l.err == nil {
			l.err = fmt.Errorf("checkpoint node wal %s: %w", l.dir, err)
		}
		l.mu.Unlock()
	}
}

// moveStart makes the record after the oldest pinned one, or the
// checkpoint at seq, where replay begins.
func (l *nodeLog) moveStart(seq uint64) error {
	start, stale := l.pinnedStart(seq)
	// A group still holding records from before the previous checkpoint
	// is idle or snapshots rarely: have it snapshot, so the next
	// checkpoint can move past them.
	for _, id := range stale {
		l.compact(id)
	}
	defer l.retire.wake() // also retries a pass that failed before
	if start <= l.start {
		return nil
	}
	rec := &walpb.Snapshot{Index: new(start), Term: new(uint64(0)), ConfState: &raftpb.ConfState{}}
	if err := l.w.SaveSnapshot(rec); err != nil {
		return err
	}
	l.start = start
	if err := l.w.ReleaseLockTo(start); err != nil {
		return err
	}
	return nil
}

// pinnedStart returns where replay must begin for a checkpoint at seq,
// and the groups to ask to snapshot (shouldCompact), oldest records first.
func (l *nodeLog) pinnedStart(seq uint64) (start uint64, stale []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start = seq - 1
	long := l.checkpointsAgo(busyPinCheckpoints)
	for id, g := range l.groups {
		if len(g.pins) == 0 {
			continue
		}
		start = min(start, g.pins[0].seq-1)
		if l.shouldCompact(g, long) {
			stale = append(stale, id)
		} else {
			g.stale = 0
		}
	}
	// The oldest pins hold the start back: ask those groups first, and
	// only so many at a time, so that a thousand groups written once are
	// not all told to snapshot (and fsync) in the same moment.
	slices.SortFunc(stale, func(a, b uint64) int { return cmp.Compare(l.groups[a].pins[0].seq, l.groups[b].pins[0].seq) })
	stale = stale[:min(len(stale), compactPerCheckpoint)]
	for _, id := range stale {
		g := l.groups[id]
		if g.pins[0].seq != g.stalePin {
			g.stale, g.stalePin = 0, g.pins[0].seq
		}
		if g.stale++; g.stale == 3 || g.stale%100 == 0 {
			l.zl.Warn("a raft group keeps old node wal segments from being deleted: asked to snapshot at three checkpoints, it still holds the same log entries (not applied, or the group is not running here)",
				zap.Uint64("group", id), zap.Int("checkpoints", g.stale), zap.Uint64("record", g.pins[0].seq))
		}
	}
	l.noteCheckpoint(seq)
	return start, stale
}

// noteCheckpoint remembers a checkpoint at seq, keeping the last
// busyPinCheckpoints; l.mu held.
func (l *nodeLog) noteCheckpoint(seq uint64) {
	l.ckps = append(l.ckps, seq)
	if len(l.ckps) > busyPinCheckpoints {
		l.ckps = l.ckps[1:]
	}
}

// shouldCompact reports whether a group holding records from before the
// previous checkpoint is asked to snapshot: when it wrote no entries since
// (it is idle, and nothing else would make it snapshot), or when its
// oldest record predates long, the checkpoint busyPinCheckpoints back. A
// busy group snapshots on its own (Config.SnapshotBytes) and is left to
// it: asking every busy group at every checkpoint (every second under
// produce load on 4 MiB segments) made them all snapshot at once, each
// an fsync of its state machine, four times as often as their own
// thresholds do, and stalled the other writes on the disk behind them.
func (l *nodeLog) shouldCompact(g *groupLog, long uint64) bool {
	prev := l.checkpointsAgo(1)
	first, newest := g.pins[0].seq, g.pins[len(g.pins)-1].seq
	return first <= prev && (newest <= prev || first <= long)
}

// checkpointsAgo returns the sequence number of the checkpoint n back,
// or 0 if there were fewer.
func (l *nodeLog) checkpointsAgo(n int) uint64 {
	if len(l.ckps) < n {
		return 0
	}
	return l.ckps[len(l.ckps)-n]
}

// busyPinCheckpoints is how many checkpoints a busy group may hold a
// record for before it is asked to snapshot: the log then keeps at most
// about that many times checkpointEvery bytes for it.
const busyPinCheckpoints = 8

// compactPerCheckpoint is how many groups one checkpoint asks to snapshot.
const compactPerCheckpoint = 64
