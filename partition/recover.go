package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Walk buffer sizes: recovery reads whole segments, lookups a few batches.
const (
	scanBufSize = 1 << 20
	walkBufSize = 8 << 10
)

// recover builds the log from its directory. Segments wholly below the
// checkpointed start are dropped. Segments below the checkpoint's recovery
// point are trusted after a check of their index and tail; the rest are
// read in full, every batch validated, indexes rebuilt, and the first bad
// byte ends the log: later bytes and segments are removed. When recovery
// changed anything it makes the result durable before returning, so that
// data it discarded cannot come back to life after the next crash.
func (l *Log) recover() error {
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	cp, ok, err := readCheckpoint(l.fs, l.dir)
	if err != nil && !ok {
		// Written by rename, a checkpoint is never torn: the disk damaged
		// it, and maybe what it described.
		l.logger.Warn("ignoring unreadable checkpoint; reading every segment", "err", err)
		l.lostData = true
	}
	l.cp = cp
	bases, err := l.tidyDir()
	if err != nil {
		return err
	}
	changed, err := l.loadSegments(bases, cp)
	if err != nil {
		return err
	}
	if err := l.settleStart(cp.start); err != nil {
		return err
	}
	l.lostData = l.lostData || ok && l.active().next < cp.recovery
	return l.finishRecovery(changed)
}

// tidyDir removes leftovers (temp files, indexes without a log) and returns
// the segment bases, sorted.
func (l *Log) tidyDir() ([]int64, error) {
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	logs := map[int64]bool{}
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok {
			logs[base] = true
		}
	}
	for _, e := range entries {
		if l.isLeftover(e.Name(), logs) {
			if err := l.removeFile(e.Name()); err != nil {
				return nil, err
			}
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	return bases, nil
}

func (l *Log) isLeftover(name string, logs map[int64]bool) bool {
	if strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, cleanedSuffix) {
		return true
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if base, ok := parseSegmentName(name, suffix); ok && !logs[base] {
			return true
		}
	}
	return false
}

func (l *Log) removeFile(name string) error {
	l.dirDirty = true
	if err := removeIfExists(l.fs, filepath.Join(l.dir, name)); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// loadSegments opens the segments in order, stopping at the first gap or
// torn segment and removing everything after it.
func (l *Log) loadSegments(bases []int64, cp checkpoint) (changed bool, err error) {
	first := 0
	for first+1 < len(bases) && bases[first+1] <= cp.start {
		first++
	}
	if err := l.removeSegments(bases[:first]); err != nil {
		return false, err
	}
	changed = first > 0
	for i := first; i < len(bases); i++ {
		if n := len(l.segs); n > 0 && bases[i] != l.segs[n-1].next {
			l.logger.Warn("segment does not follow its predecessor; removing it and later ones",
				"segment", bases[i], "expected", l.segs[n-1].next)
			return true, l.removeSegments(bases[i:])
		}
		s, torn, scanned, err := l.openSegment(bases[i], cp.recovery, i == len(bases)-1)
		if err != nil {
			return false, err
		}
		l.segs = append(l.segs, s)
		changed = changed || scanned
		if torn {
			// A cut segment with others after it had been sealed: what
			// followed the cut was written whole.
			l.lostData = l.lostData || i+1 < len(bases)
			return true, l.removeSegments(bases[i+1:])
		}
	}
	return changed, nil
}

func (l *Log) removeSegments(bases []int64) error {
	for _, b := range slices.Backward(bases) {
		path := filepath.Base(segmentPath(l.dir, b))
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
			if err := l.removeFile(path + suffix); err != nil {
				return err
			}
		}
		l.crashPoint("recover-segment-removed")
	}
	return nil
}

// openSegment opens one segment: trusted if its index and tail check out
// and it ends at or below the recovery point, else scanned in full. The
// last segment's tail batches are also checksummed when trusted: it is the
// one a crash is most likely to have touched, and its tail is small.
func (l *Log) openSegment(base, recoveryPoint int64, last bool) (s *segment, torn, scanned bool, err error) {
	path := segmentPath(l.dir, base)
	f, err := l.fs.OpenFile(path+logSuffix, os.O_RDWR, 0)
	if err != nil {
		return nil, false, false, fmt.Errorf("open segment %d: %w", base, err)
	}
	s = newSegment(base, path, f)
	st, err := f.Stat()
	if err != nil {
		s.release()
		return nil, false, false, fmt.Errorf("open segment %d: %w", base, err)
	}
	if len(l.segs) == 0 {
		// Nothing older is left to rebuild the transactions open at the
		// first segment's base from: its .txnindex keeps them.
		l.txn = newTxnState(l.readTxnBase(s))
	}
	l.startSegmentTxns(s)
	if l.trustFiles() && !s.txnSeen && !fileExists(l.fs, path+txnIndexSuffix) && l.loadTrusted(s, st.Size(), recoveryPoint, last) {
		return s, false, false, nil
	}
	torn, err = l.scanSegment(s, st.Size())
	if err != nil {
		s.release()
		return nil, false, false, err
	}
	txnOK := l.txnIndexMatches(s)
	if !torn && s.next <= recoveryPoint && l.indexesMatch(s) && txnOK {
		// Durable, whole and its index files right: nothing to rewrite
		// or sync.
		s.unsynced = false
		return s, false, false, nil
	}
	return s, torn, true, nil
}

// trustFiles says whether recovery trusts segments below the recovery
// point after a cheap check instead of reading every batch
// (Config.UnsafeSkipCRCChecks).
func (l *Log) trustFiles() bool { return l.cfg.UnsafeSkipCRCChecks }

// indexesMatch reports whether the segment's index files hold what the
// scan rebuilt (the time index sealed or not).
func (l *Log) indexesMatch(s *segment) bool {
	ib, err := readFile(l.fs, s.path+indexSuffix)
	if err != nil || !bytes.Equal(ib, encodeIndex(s.index)) {
		return false
	}
	tb, err := readFile(l.fs, s.path+timeIndexSuffix)
	if err != nil {
		return false
	}
	if bytes.Equal(tb, encodeTimeIndex(s.times)) {
		return true
	}
	sealed := segment{base: s.base, times: slices.Clip(s.times), maxTS: s.maxTS, lastBase: s.lastBase}
	sealed.seal()
	return bytes.Equal(tb, encodeTimeIndex(sealed.times))
}

// loadTrusted adopts the on-disk indexes of a segment that ends at or below
// the recovery point, after checking that they rise, that the batch at the
// last index entry is where the entry says, and that the batches from there
// chain exactly to the end of the file. It reads a few KiB, not the
// segment.
func (l *Log) loadTrusted(s *segment, size, recoveryPoint int64, verify bool) bool {
	index, times, err := l.readIndexes(s)
	if err != nil || !l.firstBatchMatches(s, size) {
		return false
	}
	from := indexEntry{}
	if n := len(index); n > 0 {
		from = index[n-1]
	}
	if int64(from.pos) >= max(size, 1) {
		return false
	}
	t := tail{size: int64(from.pos), next: s.base + int64(from.rel), lastBase: -1, maxTS: -1}
	if n := len(times); n > 0 {
		t.maxTS = times[n-1].ts
	}
	t, err = walkTail(s.f, t, size, verify)
	if err != nil || t.next > recoveryPoint || !timesWithin(times, t.next-s.base) {
		return false
	}
	s.index, s.times = index, times
	s.size, s.next, s.maxTS, s.lastBase = t.size, t.next, t.maxTS, t.lastBase
	s.sinceIndex = size - int64(from.pos)
	return true
}

// tail is what a header walk learns about the end of a segment.
type tail struct {
	size, next, lastBase, maxTS int64
}

// walkTail steps through the headers from t.size to limit, checking that
// each batch starts at the offset where the previous one ended, and with
// verify set that each batch is valid (CRC included).
func walkTail(f File, t tail, limit int64, verify bool) (tail, error) {
	w := newWalker(f, t.size, limit, walkBufSize)
	defer w.close()
	for {
		h, err := w.next()
		if err == nil && verify {
			h, err = revalidate(w, h)
		}
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return t, err
		}
		if h.base != t.next {
			return t, fmt.Errorf("batch at %d has base %d, want %d: %w", h.pos, h.base, t.next, errTorn)
		}
		t.size, t.next, t.lastBase = h.end(), h.next(), h.base
		t.maxTS = max(t.maxTS, h.maxTS)
	}
}

// revalidate re-reads the batch the walker just stepped over and validates
// it in full.
func revalidate(w *walker, h batchHeader) (batchHeader, error) {
	w.pos = h.pos
	h, b, err := w.nextBatch()
	if err == nil {
		_, err = ValidateStoredBatch(b)
	}
	return h, err
}

func timesWithin(times []timeEntry, span int64) bool {
	return len(times) == 0 || int64(times[len(times)-1].rel) < max(span, 1)
}

func (l *Log) readIndexes(s *segment) ([]indexEntry, []timeEntry, error) {
	ib, err := readFile(l.fs, s.path+indexSuffix)
	if err != nil {
		return nil, nil, err
	}
	index, err := decodeIndex(ib)
	if err != nil {
		return nil, nil, err
	}
	tb, err := readFile(l.fs, s.path+timeIndexSuffix)
	if err != nil {
		return nil, nil, err
	}
	times, err := decodeTimeIndex(tb)
	return index, times, err
}

// firstBatchMatches checks that a non-empty segment starts with a batch at
// its own base offset.
func (l *Log) firstBatchMatches(s *segment, size int64) bool {
	if size == 0 {
		return true
	}
	h, err := newWalker(s.f, 0, size, batchHeaderSize).next()
	return err == nil && h.base == s.base
}

// scanSegment reads a segment in full, validating every batch and its
// offset, rebuilding the indexes, and cutting the file at the first byte
// that is not a valid next batch.
func (l *Log) scanSegment(s *segment, size int64) (torn bool, err error) {
	// A segment smaller than the buffer needs no more than its size (a node
	// opening thousands of small partitions would otherwise allocate a
	// whole buffer for each); the walker grows it for a larger batch.
	w := newWalker(s.f, 0, size, int(min(scanBufSize, max(size, batchHeaderSize))))
	defer w.close()
	for {
		h, b, err := w.nextBatch()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && h.base != s.next {
			err = fmt.Errorf("batch at %d has base %d, want %d", h.pos, h.base, s.next)
		}
		var info BatchInfo
		if err == nil {
			info, err = ValidateStoredBatch(b)
		}
		if err == nil {
			err = l.epochs.check(h.base, b)
		}
		if err != nil {
			l.logger.Warn("cutting segment at its first bad batch", "segment", s.base, "pos", s.size, "size", size, "err", err)
			l.lostData = l.lostData || h.size > 0 && validBatchFollows(w)
			break
		}
		s.addBatch(h, l.limits().IndexIntervalBytes)
		l.recoverTxn(s, info, h.base, b)
	}
	if s.size < size {
		if err := s.f.Truncate(s.size); err != nil {
			return false, fmt.Errorf("cut segment %d at %d: %w", s.base, s.size, err)
		}
		l.crashPoint("recover-segment-cut")
		torn = true
	}
	s.unsynced = true
	return torn, nil
}

// validBatchFollows reports whether the walker, just past a batch that
// failed its checks, stands at a whole, valid batch: the bad one was
// damaged after it was written (bit rot), not torn by a crash, which
// leaves nothing valid after it.
func validBatchFollows(w *walker) bool {
	_, b, err := w.nextBatch()
	if err != nil {
		return false
	}
	_, err = ValidateStoredBatch(b)
	return err == nil
}

// settleStart sets the log start offset: the checkpoint's, unless
// retention removed segments beyond it. If recovery lost every batch at or
// above it (or found no segment), the log restarts empty there.
func (l *Log) settleStart(cpStart int64) error {
	if len(l.segs) > 0 && l.active().next >= cpStart {
		l.start = max(cpStart, l.segs[0].base)
		return nil
	}
	for _, s := range l.segs {
		s.release()
	}
	if err := l.removeSegments(segmentBases(l.segs)); err != nil {
		return err
	}
	l.segs = nil
	l.txn = newTxnState(nil)
	s, err := createSegment(l.fs, l.dir, cpStart)
	if err != nil {
		return err
	}
	l.dirDirty = true
	l.segs, l.start = []*segment{s}, cpStart
	return nil
}

func segmentBases(segs []*segment) []int64 {
	out := make([]int64, len(segs))
	for i, s := range segs {
		out[i] = s.base
	}
	return out
}

// finishRecovery seals the older segments, writes rebuilt indexes, and, if
// recovery changed anything, syncs it all and records a checkpoint whose
// recovery point is the log end, so the next Open reads nothing again.
func (l *Log) finishRecovery(changed bool) error {
	a := l.active()
	if a.size > 0 {
		a.rollAt = l.cfg.now()
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		s.seal()
	}
	if !changed && !l.dirDirty {
		return nil
	}
	for _, s := range l.segs {
		if s.unsynced {
			if err := s.writeIndexes(l.fs); err != nil {
				return err
			}
		}
	}
	return l.sync(true)
}
