package partition

import (
	"fmt"
	"slices"
)

// Truncate removes every batch at or above offset, so the log ends at
// offset; a batch that straddles offset goes whole, and the new end is
// returned. A replica drops its uncommitted tail this way. Offsets at or
// above the end change nothing; offsets below the start are out of range.
// Unlike Append, Truncate is durable when it returns: discarded batches do
// not come back after a crash. The high watermark is lowered to the new end
// if it was above it. A Read in progress over the removed bytes may
// read garbage: callers never truncate below the high watermark they serve
// reads up to.
func (l *Log) Truncate(offset int64) (int64, error) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return -1, err
	}
	end := l.active().next
	if offset >= end {
		return end, nil
	}
	if offset < l.start {
		return -1, &OffsetOutOfRangeError{Offset: offset, Start: l.start, End: end}
	}
	i := l.segmentFor(offset)
	s := l.segs[i]
	cut, err := s.truncationPoint(offset)
	if err != nil {
		return -1, err
	}
	txn, aborted, err := l.replayTxns(s, cut.size)
	if err != nil {
		return -1, err
	}
	if err := l.lowerRecoveryPoint(cut.next); err != nil {
		return -1, err
	}
	l.crashPoint("truncate-checkpointed")
	removed := l.unpublishAfter(i, s, cut, aborted)
	l.txn = txn
	if err := l.finishTruncate(s, removed); err != nil {
		return -1, err
	}
	l.end.set(cut.next)
	l.setHW(min(l.hw.load(), cut.next))
	return cut.next, nil
}

// truncatedState is a segment's published state after a cut.
type truncatedState struct {
	tail
	index      []indexEntry
	times      []timeEntry
	sinceIndex int64
}

// truncationPoint computes the state of s cut before the batch holding
// offset, re-walking only from the last surviving index entry to recompute
// the largest timestamp.
func (s *segment) truncationPoint(offset int64) (truncatedState, error) {
	v := s.view()
	h, ok, err := v.find(offset)
	if err != nil {
		return truncatedState{}, err
	}
	if !ok {
		h = batchHeader{pos: v.size, base: v.next}
	}
	rel := uint32(h.base - s.base)
	t := truncatedState{index: truncateIndex(s.index, rel), times: truncateTimeIndex(s.times, rel)}
	from := indexEntry{}
	if n := len(t.index); n > 0 {
		from = t.index[n-1]
	}
	t.tail = tail{size: int64(from.pos), next: s.base + int64(from.rel), lastBase: -1, maxTS: -1}
	if n := len(t.times); n > 0 {
		t.maxTS = t.times[n-1].ts
	}
	t.tail, err = walkTail(s.f, t.tail, h.pos, false)
	if err != nil {
		return truncatedState{}, fmt.Errorf("truncate segment %d: %w: %w", s.base, ErrCorruptLog, err)
	}
	t.sinceIndex = t.size - int64(from.pos)
	return t, nil
}

// lowerRecoveryPoint makes sure the checkpoint neither vouches for bytes
// about to change nor keeps a start above the new end, before the cut.
func (l *Log) lowerRecoveryPoint(offset int64) error {
	if offset >= l.cp.recovery && offset >= l.cp.start {
		return nil
	}
	cp := checkpoint{start: min(l.start, offset), recovery: min(l.cp.recovery, offset)}
	if err := l.writeCheckpoint(cp); err != nil {
		return l.fail(err)
	}
	return nil
}

// unpublishAfter makes segment i, cut to t, the active one, and returns the
// segments after it.
func (l *Log) unpublishAfter(i int, s *segment, t truncatedState, aborted []AbortedTxn) []*segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	removed := slices.Clone(l.segs[i+1:])
	l.segs = slices.Clone(l.segs[:i+1])
	s.size, s.next, s.lastBase, s.maxTS = t.size, t.next, t.lastBase, t.maxTS
	s.index, s.times = t.index, t.times
	s.sinceIndex = t.sinceIndex
	s.aborted = aborted
	l.start = min(l.start, t.next)
	return removed
}

// finishTruncate deletes the removed segments (newest first), cuts the
// file, and makes both durable. The cut segment's index files are left
// stale: recovery rejects entries beyond the file, and the next seal or
// Close rewrites them.
func (l *Log) finishTruncate(s *segment, removed []*segment) error {
	for _, r := range slices.Backward(removed) {
		err := r.remove(l.fs)
		r.release()
		if err != nil {
			return l.fail(fmt.Errorf("truncate: %w", err))
		}
		l.dirDirty = true
		l.crashPoint("truncate-segment-removed")
	}
	if err := s.f.Truncate(s.size); err != nil {
		return l.fail(fmt.Errorf("truncate segment %d: %w", s.base, err))
	}
	s.writtenBack = min(s.writtenBack, s.size)
	if s.rollAt.IsZero() || s.size == 0 {
		s.rollAt = l.cfg.now()
	}
	if err := s.f.Sync(); err != nil {
		return l.fail(fmt.Errorf("truncate segment %d: sync: %w", s.base, err))
	}
	s.unsynced = false
	if l.dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("truncate: sync dir: %w", err))
		}
		l.dirDirty = false
	}
	return nil
}

// Reset empties the log and restarts it at offset, as when a replica
// installs a snapshot that is ahead of its log. It is durable when it
// returns. The start, end and high watermark all become offset.
func (l *Log) Reset(offset int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if offset < 0 {
		return &OffsetOutOfRangeError{Offset: offset, Start: 0, End: 0}
	}
	cp := checkpoint{start: offset, recovery: offset}
	if err := l.writeCheckpoint(cp); err != nil {
		return l.fail(err)
	}
	s, err := createSegment(l.fs, l.dir, offset)
	if err != nil {
		return l.fail(fmt.Errorf("reset: %w", err))
	}
	l.mu.Lock()
	old := l.segs
	l.segs, l.start = []*segment{s}, offset
	l.mu.Unlock()
	for _, o := range slices.Backward(old) {
		if o.base != offset && err == nil {
			err = o.remove(l.fs)
		}
		o.release()
	}
	if err != nil {
		return l.fail(fmt.Errorf("reset: %w", err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("reset: sync dir: %w", err))
	}
	l.dirDirty = false
	l.txn = newTxnState(nil)
	l.end.set(offset)
	l.setHW(offset)
	return nil
}
