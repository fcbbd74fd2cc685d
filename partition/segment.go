package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	baseDigits      = 20
)

// segment is one <base>.log file with its in-memory indexes.
//
// The published fields (size .. lastBase) are written only by the appender
// while it holds Log.mu, and read by readers under Log.mu.RLock (the
// appender may read them without the lock: it is their only writer). A
// truncation replaces index slices instead of shrinking them, so a reader's
// copy of a slice header stays valid.
type segment struct {
	base int64
	path string // directory and base name, without suffix
	f    File
	refs atomic.Int32 // the log's own reference plus one per read in progress

	size     int64 // valid bytes in f
	next     int64 // offset after the last batch
	index    []indexEntry
	times    []timeEntry
	maxTS    int64        // largest batch MaxTimestamp, -1 when none
	lastBase int64        // base offset of the last batch, -1 when empty
	aborted  []AbortedTxn // aborted-transaction index, in marker order

	// Transaction state (txnlog.go), the appender's. txnBase, the
	// transactions open at base, is set when the segment starts.
	txnBase []OngoingTxn
	txnSeen bool // txnBase or a batch here changed transaction state
	txnFile bool // a .txnindex file exists

	// Appender-only state (Log.writeMu).
	sinceIndex    int64     // bytes appended since the last index entry
	rollAt        time.Time // when the first batch arrived (age roll)
	writtenBack   int64     // bytes whose writeback has been started
	unsynced      bool      // log bytes not yet fsynced
	indexUnsynced bool      // .index/.timeindex written but not fsynced
}

func segmentPath(dir string, base int64) string {
	return filepath.Join(dir, fmt.Sprintf("%0*d", baseDigits, base))
}

// parseSegmentName returns the base offset of a "<20 digits><suffix>" name.
func parseSegmentName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != baseDigits {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	return base, err == nil && base >= 0
}

func newSegment(base int64, path string, f File) *segment {
	s := &segment{base: base, path: path, f: f, next: base, maxTS: -1, lastBase: -1}
	s.refs.Store(1)
	return s
}

// createSegment creates an empty segment at base, replacing any leftover
// files of that name.
func createSegment(fsys FS, dir string, base int64) (*segment, error) {
	path := segmentPath(dir, base)
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := removeIfExists(fsys, path+suffix); err != nil {
			return nil, fmt.Errorf("create segment %d: %w", base, err)
		}
	}
	f, err := fsys.OpenFile(path+logSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	return newSegment(base, path, f), nil
}

// addBatch records a batch written at the end of the segment: offsets, size,
// and an index entry when IndexIntervalBytes have passed since the last one.
// Callers publishing a live segment hold Log.mu.
func (s *segment) addBatch(h batchHeader, interval int) {
	if h.pos > 0 && s.sinceIndex >= int64(interval) {
		rel := uint32(h.base - s.base)
		s.index = append(s.index, indexEntry{rel: rel, pos: uint32(h.pos)})
		s.addTimeEntry(max(s.maxTS, h.maxTS), rel)
		s.sinceIndex = 0
	}
	s.sinceIndex += h.size
	s.maxTS = max(s.maxTS, h.maxTS)
	s.size = h.end()
	s.next = h.next()
	s.lastBase = h.base
}

// addTimeEntry appends (ts, rel) when ts beats the last entry.
func (s *segment) addTimeEntry(ts int64, rel uint32) {
	if n := len(s.times); n == 0 || ts > s.times[n-1].ts {
		s.times = append(s.times, timeEntry{ts: ts, rel: rel})
	}
}

// seal adds the closing time-index entry, so the last entry holds the
// segment's largest timestamp. Callers hold Log.mu.
func (s *segment) seal() {
	if s.lastBase >= 0 && s.maxTS >= 0 {
		s.addTimeEntry(s.maxTS, uint32(s.lastBase-s.base))
	}
}

// writeIndexes replaces the .index and .timeindex files with the in-memory
// entries. They are hints: recovery checks them against the log.
func (s *segment) writeIndexes(fsys FS) error {
	if err := writeFile(fsys, s.path+indexSuffix, encodeIndex(s.index), false); err != nil {
		return err
	}
	if err := writeFile(fsys, s.path+timeIndexSuffix, encodeTimeIndex(s.times), false); err != nil {
		return err
	}
	s.indexUnsynced = true
	return s.writeTxnIndex(fsys)
}

// sync makes the segment's log bytes and index files durable.
func (s *segment) sync(fsys FS) error {
	if s.unsynced {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("sync segment %d: %w", s.base, err)
		}
		s.unsynced = false
	}
	if s.indexUnsynced {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if err := syncFile(fsys, s.path+suffix); err != nil {
				return fmt.Errorf("sync segment %d: %w", s.base, err)
			}
		}
		s.indexUnsynced = false
	}
	return nil
}

func syncFile(fsys FS, name string) error {
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// remove deletes the segment's files. The .log goes last, so a crash
// midway leaves a segment that recovery can still open.
func (s *segment) remove(fsys FS) error {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		if err := removeIfExists(fsys, s.path+suffix); err != nil {
			return fmt.Errorf("remove segment %d: %w", s.base, err)
		}
	}
	return nil
}

// acquire takes a reader's reference; callers hold Log.mu (read or write),
// which keeps the log's own reference alive meanwhile.
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference; the last one closes the file.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.f.Close() // read-only use remains; nothing to lose
	}
}

// segView is a reader's consistent copy of a segment's published state.
type segView struct {
	seg   *segment
	size  int64
	next  int64
	index []indexEntry
	times []timeEntry
	maxTS int64
}

// view copies the published state; callers hold Log.mu.
func (s *segment) view() segView {
	return segView{seg: s, size: s.size, next: s.next, index: s.index, times: s.times, maxTS: s.maxTS}
}
