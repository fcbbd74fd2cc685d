package raftgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"

	"github.com/raftq/raftq/internal/durable"
)

// Retiring WAL segments. Unlinking a segment frees all of its blocks at
// once, and on a filesystem mounted with online discard (ext4 on this
// project's VMs) the device then trims them in one go, stalling every
// other write on the disk: the fsyncs of this node's WALs and, with
// `raftq dev`, of the other nodes' too. At 150k records/s a node with the
// broker's 4 MiB segments frees a few a second, and the produce p99 fell
// by about half when they were not deleted (BENCHMARKS.md). So both the
// node log and a group's own WAL (DiskStorage) hand released segments to
// a retirer, which retires a segment in three steps:
//
//  1. It renames it out of etcd's sight (".wal" to ".wal.retired.tmp") and
//     syncs the directory, one segment at a time from the oldest, before
//     it shrinks anything. etcd reads every segment from the oldest to
//     the end of the log (wal.ValidSnapshotEntries) and takes a record
//     cut short as the end of the log, so a shortened segment would
//     silently hide every record after it: once renamed, a segment is not
//     read at all.
//  2. It shrinks the file retireStep bytes at a time, pausing retirePause
//     between steps while fewer than retireBacklog bytes wait, so that the
//     device trims a little at a time and a writer faster than the pace
//     cannot fill the disk. (With segments of 64 MiB and more, a
//     checkpoint releases more than retireBacklog, and all but the last
//     64 MiB of it is shrunk without pauses.)
//  3. It unlinks the empty file.
//
// Files a crash or a stop left retired are retired by the first pass
// after the WAL opens. Their names end in ".tmp" because etcd passes over
// such names quietly (wal/util.go, checkWalNames), where any other file in
// a WAL directory costs a warning at every open. Files with the older
// suffix ".retired" (legacyRetiredSuffix) are retired too.
const (
	retiredSuffix       = ".retired.tmp"
	legacyRetiredSuffix = ".retired"
	retireStep          = 512 << 10
	retirePause         = 10 * time.Millisecond
	retireBacklog       = 64 << 20
)

// retireUnlocked retires the WAL segments in dir that no WAL holds locked
// any more (eachUnlocked), and any retired earlier, calling wait between
// steps while few bytes are left to free. The directory is synced after
// each rename and once more before anything is shrunk; a failed sync
// ends the pass with errDirSync before any file is cut.
func retireUnlocked(dir string, sync func(string) error, wait func()) error {
	renameErr := renameUnlocked(dir, sync)
	if errors.Is(renameErr, errDirSync) {
		return renameErr
	}
	names, err := retiredNames(dir)
	if err != nil || len(names) == 0 {
		return errors.Join(renameErr, err)
	}
	if err := sync(dir); err != nil {
		return errors.Join(renameErr, err)
	}
	var backlog int64
	for _, name := range names {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil {
			backlog += st.Size()
		}
	}
	for _, name := range names {
		if err := trimAndRemove(filepath.Join(dir, name), &backlog, wait); err != nil {
			return errors.Join(renameErr, err)
		}
	}
	return renameErr
}

// retiredNames lists the retired segments in dir, oldest first, under
// either suffix.
func retiredNames(dir string) ([]string, error) {
	names, err := sortedNames(dir, retiredSuffix)
	if err != nil {
		return nil, err
	}
	legacy, err := sortedNames(dir, legacyRetiredSuffix)
	return append(legacy, names...), err
}

// renameUnlocked renames the unlocked segments out of etcd's sight,
// oldest first, and syncs the directory after each rename. etcd chains
// its records' CRCs from segment to segment and reads them all, oldest
// first, so the segments it sees must never have a hole: were a newer
// rename durable and an older one not (a filesystem without a journal
// may write directory updates in any order), the log would not open.
func renameUnlocked(dir string, sync func(dir string) error) error {
	return eachUnlocked(dir, func(p string) error {
		if err := os.Rename(p, p+retiredSuffix); err != nil {
			return fmt.Errorf("retire wal segment %s: %w", p, err)
		}
		return sync(dir)
	})
}

// eachUnlocked calls fn, oldest first, on each WAL segment in dir up to the
// first one a WAL still holds locked (the live WAL keeps its segments
// flock'ed, so a failing TryLock means in use), and never on the newest.
// fn runs with the segment locked.
func eachUnlocked(dir string, fn func(path string) error) error {
	names, err := sortedNames(dir, ".wal")
	if err != nil {
		return err
	}
	for _, name := range names[:max(len(names)-1, 0)] {
		p := filepath.Join(dir, name)
		l, err := fileutil.TryLockFile(p, os.O_WRONLY, fileutil.PrivateFileMode)
		if err != nil {
			break // locked: this one and every later segment are live
		}
		err = fn(p)
		l.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// errDirSync marks a failed directory sync: afterwards no rename since
// the last good sync can be trusted to be durable, since a later sync
// that succeeds does not prove it (Linux reports a writeback error once).
var errDirSync = errors.New("sync wal directory")

func syncDir(dir string) error {
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: %w", errDirSync, err)
	}
	return nil
}

func noSync(string) error { return nil }

// trimAndRemove shrinks the retired file at p step by step, then unlinks
// it; *backlog counts the bytes still to free across the files in hand,
// and wait runs between steps while it is under retireBacklog.
func trimAndRemove(p string, backlog *int64, wait func()) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open retired wal segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat retired wal segment: %w", err)
	}
	for size := st.Size(); size > 0; {
		step := min(size, retireStep)
		size -= step
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("trim retired wal segment: %w", err)
		}
		*backlog -= step
		if size > 0 && *backlog < retireBacklog {
			wait()
		}
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("remove retired wal segment: %w", err)
	}
	return nil
}

// pause waits retirePause, or not at all once stop is closed.
func pause(stop <-chan struct{}) {
	t := time.NewTimer(retirePause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}

// retirer retires one WAL directory's released segments on a goroutine of
// its own, which runs only while there is work: wake starts a pass, or
// asks the running one for another. The WAL must stay open until close
// returns, since its locks are what mark the live segments. After a
// failed directory sync it retires nothing more: a renamed segment whose
// rename may not be durable must not be cut, and the WAL's next open
// (whose first pass retires what was left) is the point from which
// renames are known again.
type retirer struct {
	dir  string
	sync func(dir string) error // syncDir, or noSync with FsyncNever
	wait func()                 // between shrink steps: pause(stop)
	warn func(error)            // a failed pass
	stop chan struct{}
	done chan struct{} // closed once close's last pass is over
	wg   sync.WaitGroup

	mu     sync.Mutex
	busy   bool // a pass is running
	again  bool // and another was asked for meanwhile
	closed bool
	halted bool // a directory sync failed; set and read by passes only
}

func newRetirer(dir string, fsync FsyncPolicy, warn func(error)) *retirer {
	r := &retirer{dir: filepath.Clean(dir), sync: syncDir, warn: warn, stop: make(chan struct{}), done: make(chan struct{})}
	if fsync == FsyncNever {
		r.sync = noSync
	}
	r.wait = func() { pause(r.stop) }
	return r
}

// wake asks for a pass over the directory. It never blocks.
func (r *retirer) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
	case r.busy:
		r.again = true
	default:
		r.busy = true
		r.wg.Add(1)
		go r.run()
	}
}

func (r *retirer) run() {
	defer r.wg.Done()
	for {
		r.pass()
		r.mu.Lock()
		if !r.again || r.closed {
			r.busy = false
			r.mu.Unlock()
			return
		}
		r.again = false
		r.mu.Unlock()
	}
}

func (r *retirer) pass() {
	if r.halted {
		return
	}
	err := retireUnlocked(r.dir, r.sync, r.wait)
	if errors.Is(err, errDirSync) {
		r.halted = true
		r.warn(fmt.Errorf("%w; retiring no more segments until the wal is opened again", err))
		return
	}
	if err != nil {
		r.warn(fmt.Errorf("%w; trying again at the next release", err))
	}
}

// close ends the pauses, waits for a running pass, and makes a last one
// without pauses for what the WAL released last. Call it before closing
// the WAL; a second call waits for the first.
func (r *retirer) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	r.wg.Wait()
	r.pass()
	close(r.done)
}
