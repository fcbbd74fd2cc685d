package partition

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/raftq/raftq/internal/logging"
)

// Log is one partition replica's log: a directory of segments.
//
// Appends, truncation, retention, Sync and Close come from one goroutine at
// a time (the raft apply loop); writeMu serialises them anyway. Reads come
// from any number of goroutines. See doc.go for the lock order.
type Log struct {
	dir    string
	cfg    Config // its Limits are the ones Open was given; lim holds the current
	lim    atomic.Pointer[Limits]
	fs     FS
	logger *slog.Logger

	// writeMu serialises the mutators. The fields below it are theirs.
	writeMu  sync.Mutex
	cp       checkpoint // as last written
	dirDirty bool       // files created or removed since the last dir fsync
	scratch  []byte
	// lostData: recovery cut bytes that had been written whole (see
	// RecoveryLostData); set by Open only, as epochs is used by it only.
	lostData bool
	epochs   epochCheck

	// mu guards the published state: the segment list, the log start
	// offset, the sticky failure and closed. Only mutators take it for
	// writing, and never across I/O that readers could wait on for long.
	mu     sync.RWMutex
	segs   []*segment // by base offset; the last one is active
	start  int64
	failed error
	closed bool

	hw  watched // high watermark
	end watched // log end offset
	lso watched // last stable offset (txnlog.go)

	txn txnState // ongoing transactions; the mutators' (writeMu)
}

// limits returns the log's current limits.
func (l *Log) limits() *Limits { return l.lim.Load() }

// Limits returns the log's current limits.
func (l *Log) Limits() Limits { return *l.lim.Load() }

// SetLimits changes the log's limits while it is open: the next append,
// roll and retention pass use them. Segments already written keep their
// size and index spacing.
func (l *Log) SetLimits(lim Limits) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	l.lim.Store(&lim)
	return nil
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	Base int64  // offset of its first batch, and its file name
	Next int64  // offset after its last batch
	Size int64  // bytes
	Path string // the .log file
}

// Open opens the log in dir, creating the directory and an empty log at
// offset 0 if needed, and recovers it: a torn tail is cut off, indexes that
// disagree with the log are rebuilt, and files beyond a gap are removed.
// The high watermark starts at the log start offset.
func Open(dir string, cfg Config) (*Log, error) { return open(dir, cfg, epochCheck{}) }

func open(dir string, cfg Config, epochs epochCheck) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FS == nil {
		cfg.FS = OSFS()
	}
	l := &Log{
		dir:    dir,
		cfg:    cfg,
		fs:     cfg.FS,
		logger: logging.Discard(cfg.Logger).With("dir", dir),
		epochs: epochs,
	}
	l.lim.Store(&cfg.Limits)
	if err := l.recover(); err != nil {
		l.releaseAll()
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.end.set(l.active().next)
	l.setHW(l.start)
	if err := l.cutSuspect(); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	return l, nil
}

// RecoveryLostData reports whether Open cut data that had been written
// whole, not only a torn tail a crash can leave: the log ended below its
// checkpoint's recovery point, a cut segment had later ones after it, a
// bad batch was followed by a valid one (bit rot), or the checkpoint
// itself was damaged (written by rename, it is never torn). A replica that says
// so may have lost records it acknowledged.
func (l *Log) RecoveryLostData() bool { return l.lostData }

// Close makes everything durable (unless the log has failed), writes the
// indexes and a checkpoint that lets the next Open skip reading the log,
// and closes the files. A Read in progress still completes: its segment
// reference keeps the file open until it has copied.
func (l *Log) Close() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.closed {
		return nil
	}
	var err error
	if l.failed == nil {
		err = l.closeClean()
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.hw.shut()
	l.end.shut()
	l.lso.shut()
	l.releaseAll()
	return err
}

func (l *Log) closeClean() error {
	a := l.active()
	if err := a.writeIndexes(l.fs); err != nil {
		return l.fail(err)
	}
	return l.sync(true)
}

func (l *Log) releaseAll() {
	for _, s := range l.segs {
		s.release()
	}
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// StartOffset returns the log start offset: the first readable offset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset returns the log end offset (LEO): the offset the next append
// gets.
func (l *Log) EndOffset() int64 { return l.end.load() }

// Size returns the bytes held in all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments lists the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{Base: s.base, Next: s.next, Size: s.size, Path: s.path + logSuffix}
	}
	return out
}

// Err returns the sticky failure (wrapping ErrFailed), ErrClosed, or nil.
func (l *Log) Err() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.usableLocked()
}

func (l *Log) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// writable is usableLocked for mutators, which own the fields.
func (l *Log) writable() error { return l.usableLocked() }

// fail records the first write or sync failure: from then on the log
// refuses changes. It returns the sticky error.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		l.logger.Error("partition log failed; refusing appends until reopened", "err", err)
	}
	return l.failed
}

// crashPoint marks a point where a crash test may kill the process.
func (l *Log) crashPoint(name string) {
	if l.cfg.crashPoint != nil {
		l.cfg.crashPoint(name)
	}
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// segmentFor returns the index of the segment holding offset: the last one
// whose base is at or below it. Callers hold mu.
func (l *Log) segmentFor(offset int64) int {
	return sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
}
