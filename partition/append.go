package partition

import (
	"fmt"
	"math"
)

// copyLimit is the largest batch Append copies into its scratch buffer to
// stamp and write in one call; larger batches go out as a stamped 16-byte
// prefix and the untouched rest, so the caller's bytes are never modified
// and big batches are not copied.
const copyLimit = 64 << 10

// Append validates batch fully (ValidateBatch) and appends it, stamping the
// assigned base offset and the leader epoch into its header. It returns the
// batch's first and last offsets. It does not fsync: call Sync. A rejected
// batch leaves the log untouched; a failed write makes the log refuse
// further changes (ErrFailed).
func (l *Log) Append(batch []byte, epoch int32) (base, last int64, err error) {
	info, err := ValidateBatch(batch, l.limits().MaxBatchBytes)
	if err != nil {
		return -1, -1, err
	}
	return l.append(batch, info, epoch)
}

// AppendValidated is Append for a batch that ValidateBatch accepted
// upstream (the broker validates before proposing to raft; the apply path
// appends the committed bytes). It checks the header but not the CRC or
// the records, so its cost does not grow with the batch. It does not
// apply MaxBatchBytes either: replicas must all take a committed batch,
// whatever limits each has when it applies it (they change while the log
// is open, SetLimits), so the size limit is the proposer's to enforce.
// Only a batch no segment could index (over math.MaxInt32 bytes) is
// refused. A batch over SegmentBytes gets a segment of its own.
func (l *Log) AppendValidated(batch []byte, epoch int32) (base, last int64, err error) {
	if len(batch) > math.MaxInt32 {
		return -1, -1, &BatchError{Kind: ErrBatchTooLarge, Reason: fmt.Sprintf("%d bytes, limit %d", len(batch), math.MaxInt32)}
	}
	info, err := ParseBatchHeader(batch)
	if err != nil {
		return -1, -1, err
	}
	return l.append(batch, info, epoch)
}

// AppendReplica appends a batch copied from a leader's log (ISR
// replication) as it is: its base offset must be the log end, and its
// partitionLeaderEpoch is kept, so every replica stores the leader's bytes
// at the leader's offsets. Like AppendValidated it checks only the header.
// A base other than the log end is refused with an error wrapping
// ErrOffsetMismatch and changes nothing.
func (l *Log) AppendReplica(batch []byte) (base, last int64, err error) {
	if len(batch) > math.MaxInt32 {
		return -1, -1, &BatchError{Kind: ErrBatchTooLarge, Reason: fmt.Sprintf("%d bytes, limit %d", len(batch), math.MaxInt32)}
	}
	info, err := ParseBatchHeader(batch)
	if err != nil {
		return -1, -1, err
	}
	return l.appendAt(batch, info, info.LeaderEpoch, info.BaseOffset)
}

func (l *Log) append(batch []byte, info BatchInfo, epoch int32) (int64, int64, error) {
	return l.appendAt(batch, info, epoch, -1)
}

// appendAt appends batch stamped with epoch at the log end; want, unless
// negative, is the base offset the caller requires the end to be.
func (l *Log) appendAt(batch []byte, info BatchInfo, epoch int32, want int64) (int64, int64, error) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return -1, -1, err
	}
	base := l.active().next
	if want >= 0 && want != base {
		return -1, -1, fmt.Errorf("%w: batch base %d, log end %d", ErrOffsetMismatch, want, base)
	}
	var marker ControlMarker
	txnal := info.Attributes&(attrTransactional|attrControl) != 0
	if txnal {
		m, err := checkTxnBatch(batch, info)
		if err != nil {
			return -1, -1, err
		}
		if info.ProducerID < 0 {
			return -1, -1, invalid("transactional batch without a producer id")
		}
		marker = m
	}
	last := base + int64(info.LastOffsetDelta)
	if err := l.maybeRoll(int64(len(batch)), last); err != nil {
		return -1, -1, err
	}
	s := l.active()
	if err := l.writeBatch(s, batch, base, epoch); err != nil {
		return -1, -1, l.fail(fmt.Errorf("append to segment %d: %w", s.base, err))
	}
	s.unsynced = true
	if s.rollAt.IsZero() {
		s.rollAt = l.cfg.now()
	}
	h := batchHeader{pos: s.size, size: int64(len(batch)), base: base, last: last, maxTS: info.MaxTimestamp}
	var aborted *AbortedTxn
	if txnal {
		aborted = l.noteTxn(s, info, base, marker)
	}
	l.mu.Lock()
	s.addBatch(h, l.limits().IndexIntervalBytes)
	if aborted != nil {
		s.aborted = append(s.aborted, *aborted)
	}
	l.mu.Unlock()
	l.end.set(s.next)
	if txnal {
		l.publishLSO()
	}
	l.maybeWriteback(s)
	return base, last, nil
}

// writeBatch writes batch at the end of s with its header stamped.
func (l *Log) writeBatch(s *segment, batch []byte, base int64, epoch int32) error {
	if len(batch) <= copyLimit {
		buf := append(l.scratch[:0], batch...)
		l.scratch = buf
		stampHeader(buf, base, epoch)
		_, err := s.f.WriteAt(buf, s.size)
		return err
	}
	var prefix [offMagic]byte
	copy(prefix[:], batch)
	stampHeader(prefix[:], base, epoch)
	if _, err := s.f.WriteAt(prefix[:], s.size); err != nil {
		return err
	}
	l.crashPoint("append-prefix-written")
	_, err := s.f.WriteAt(batch[offMagic:], s.size+offMagic)
	return err
}

// maybeRoll starts a new segment when a batch of size bytes ending at
// offset last does not belong in the active one: it would pass
// SegmentBytes, overflow the 32-bit relative offsets, or the segment is
// older than SegmentAge.
func (l *Log) maybeRoll(size, last int64) error {
	s := l.active()
	if s.size == 0 {
		return nil
	}
	lim := l.limits()
	full := s.size+size > lim.SegmentBytes
	wide := last-s.base > math.MaxInt32
	old := lim.SegmentAge > 0 && l.cfg.now().Sub(s.rollAt) >= lim.SegmentAge
	if full || wide || old {
		return l.roll()
	}
	return nil
}

// Roll seals the active segment and starts a new one at the log end. It
// does nothing when the active segment is empty. Like Append, it does not
// fsync; the next Sync does.
func (l *Log) Roll() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if l.active().size == 0 {
		return nil
	}
	return l.roll()
}

func (l *Log) roll() error {
	old := l.active()
	l.mu.Lock()
	old.seal()
	l.mu.Unlock()
	if err := old.writeIndexes(l.fs); err != nil {
		return l.fail(fmt.Errorf("roll: %w", err))
	}
	l.crashPoint("roll-indexes-written")
	s, err := createSegment(l.fs, l.dir, old.next)
	if err != nil {
		return l.fail(fmt.Errorf("roll: %w", err))
	}
	l.startSegmentTxns(s)
	if err := s.writeTxnIndex(l.fs); err != nil {
		s.release()
		return l.fail(fmt.Errorf("roll: %w", err))
	}
	l.dirDirty = true
	l.crashPoint("roll-segment-created")
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	return nil
}

// Sync makes every appended batch durable (fdatasync of the segments
// written since the last Sync, their index files once sealed, and the
// directory when files came or went) and then, when that covered sealed
// segments or a moved log start, the checkpoint. Any error makes the log
// refuse further changes: after a failed fsync the page cache cannot be
// trusted, so the node must reopen (and recover) the log.
func (l *Log) Sync() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	return l.sync(false)
}

// sync is Sync under writeMu. With clean set (Close) it also records the
// log end as the recovery point: the active segment's indexes are on disk.
func (l *Log) sync(clean bool) error {
	sealedSynced := false
	a := l.active()
	// Unsynced segments form a suffix of the list: every Sync cleans them
	// all, and only the active segment takes new writes.
	first := len(l.segs) - 1
	for first > 0 && (l.segs[first-1].unsynced || l.segs[first-1].indexUnsynced) {
		first--
	}
	for _, s := range l.segs[first:] {
		dirty := s.unsynced || s.indexUnsynced
		if err := s.sync(l.fs); err != nil {
			return l.fail(err)
		}
		l.crashPoint("sync-segment")
		sealedSynced = sealedSynced || (dirty && s != a)
	}
	if l.dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("sync dir: %w", err))
		}
		l.dirDirty = false
		l.crashPoint("sync-dir")
	}
	cp := checkpoint{start: l.start, recovery: max(l.cp.recovery, a.base)}
	if clean {
		cp.recovery = a.next
	}
	if cp == l.cp || (!sealedSynced && !clean && cp.start == l.cp.start) {
		return nil
	}
	if err := l.writeCheckpoint(cp); err != nil {
		return l.fail(err)
	}
	return nil
}
