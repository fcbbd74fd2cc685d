package partition

import (
	"fmt"
	"slices"
)

// AdvanceStart moves the log start offset up to offset (DeleteRecords, or
// retention) and deletes the segments that lie wholly below it. The active
// segment is never deleted. Offsets at or below the start change nothing;
// offsets above the end are out of range. The move is durable at the next
// Sync; until then a crash may bring back the old start. A high watermark
// below the new start is raised to it.
func (l *Log) AdvanceStart(offset int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if end := l.active().next; offset > end {
		return &OffsetOutOfRangeError{Offset: offset, Start: l.start, End: end}
	}
	if offset <= l.start {
		return nil
	}
	if err := l.syncDirBeforeRemoving(offset); err != nil {
		return err
	}
	removed := l.unpublishBelow(offset)
	var err error
	for _, s := range removed {
		if err == nil {
			err = s.remove(l.fs)
			l.crashPoint("advance-segment-removed")
		}
		s.release()
	}
	if len(removed) > 0 {
		l.dirDirty = true
	}
	l.setHW(max(l.hw.load(), offset)) // the LSO moves with the start too
	if err != nil {
		return l.fail(fmt.Errorf("advance start: %w", err))
	}
	return nil
}

// syncDirBeforeRemoving makes the directory durable before segments are
// deleted when files were created since the last sync: otherwise a crash
// could keep the deletions but lose the newer segment files, and the log
// end would fall below offsets already synced.
func (l *Log) syncDirBeforeRemoving(offset int64) error {
	if !l.dirDirty || len(l.segs) < 2 || l.segs[0].next > offset {
		return nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("advance start: sync dir: %w", err))
	}
	l.dirDirty = false
	return nil
}

// unpublishBelow sets the start and drops the sealed segments that end at
// or below it.
func (l *Log) unpublishBelow(offset int64) []*segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start = offset
	k := 0
	for k < len(l.segs)-1 && l.segs[k].next <= offset {
		k++
	}
	removed := slices.Clone(l.segs[:k])
	l.segs = slices.Clone(l.segs[k:])
	return removed
}

// RetentionOffset returns the log start offset that the retention settings
// allow now: past the oldest sealed segments while the log is larger than
// RetentionBytes without them, or their newest record is older than
// RetentionAge. Only segments wholly below the high watermark qualify, and
// only a prefix of the log. The leader proposes the result; every replica
// applies it with AdvanceStart.
func (l *Log) RetentionOffset() int64 {
	views, start, hw := l.sealedViews()
	defer func() {
		for _, v := range views {
			v.seg.release()
		}
	}()
	cutoff := l.cfg.now().Add(-l.limits().RetentionAge).UnixMilli()
	var total int64
	for _, v := range views {
		total += v.size
	}
	total += l.activeSize()
	for _, v := range views {
		if v.next > hw || !(l.overBytes(total, v.size) || l.expired(v, cutoff)) {
			break
		}
		total -= v.size
		start = max(start, v.next)
	}
	return start
}

// ApplyRetention is AdvanceStart(RetentionOffset()), for a log whose
// retention is not replicated (single replica, tests).
func (l *Log) ApplyRetention() (int64, error) {
	off := l.RetentionOffset()
	return off, l.AdvanceStart(off)
}

func (l *Log) sealedViews() ([]segView, int64, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, l.start, l.hw.load()
	}
	views := make([]segView, 0, len(l.segs)-1)
	for _, s := range l.segs[:len(l.segs)-1] {
		s.acquire()
		views = append(views, s.view())
	}
	return views, l.start, l.hw.load()
}

func (l *Log) activeSize() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().size
}

func (l *Log) overBytes(total, size int64) bool {
	limit := l.limits().RetentionBytes
	return limit >= 0 && total-size >= limit
}

// expired reports whether a segment's newest record is older than cutoff
// (Unix ms). A segment without timestamps uses its file's modification
// time, as Kafka does.
func (l *Log) expired(v segView, cutoff int64) bool {
	if l.limits().RetentionAge <= 0 {
		return false
	}
	ts := v.maxTS
	if ts < 0 {
		st, err := v.seg.f.Stat()
		if err != nil {
			return false
		}
		ts = st.ModTime().UnixMilli()
	}
	return ts < cutoff
}
