package lazyfs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/raftq/raftq/internal/logging"
)

// FsNamePrefix starts the source name of every lazyfs mount, followed by
// the serving process id, so CleanupStale can tell dead mounts apart.
const FsNamePrefix = "raftq-lazyfs-"

// ErrClosed is returned by operations on an unmounted FS.
var ErrClosed = errors.New("lazyfs: unmounted")

// Config says what to mount where.
type Config struct {
	// Backing is a real directory holding the durable state.
	Backing string
	// Mountpoint is where the lazy view appears; created if missing.
	Mountpoint string
	// SyncBacking also fsyncs the backing file when a client fsyncs, so the
	// durable state survives a real crash of the host too. Off by default:
	// the simulated power loss needs only the page overlay.
	SyncBacking bool
	// WritebackAge turns on the writeback model: a file dirty (changed
	// since its last fsync) for at least this long is written back to the
	// backing file, as by fsync, so a power loss keeps it. Linux's flusher
	// writes back inodes dirty for longer than dirty_expire_centisecs
	// (30 s). Zero, the default, is the worst case: a power loss drops
	// everything not fsynced, however old.
	WritebackAge time.Duration
	// WritebackInterval is how often the writeback model looks for files
	// to write back (Linux's dirty_writeback_centisecs, 5 s, when zero).
	WritebackInterval time.Duration
	// Debug logs every FUSE request (very verbose).
	Debug bool
	// Logger gets mount events; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with the defaults; Backing and Mountpoint
// must still be set.
func DefaultConfig() Config { return Config{} }

// Validate checks the Config.
func (c Config) Validate() error {
	if c.Backing == "" || c.Mountpoint == "" {
		return errors.New("lazyfs: backing and mountpoint must be set")
	}
	if filepath.Clean(c.Backing) == filepath.Clean(c.Mountpoint) {
		return errors.New("lazyfs: backing and mountpoint must differ")
	}
	if c.WritebackAge < 0 || c.WritebackInterval < 0 {
		return errors.New("lazyfs: writeback age and interval must not be negative")
	}
	return nil
}

// DefaultWritebackInterval is Linux's dirty_writeback_centisecs.
const DefaultWritebackInterval = 5 * time.Second

// LinuxWritebackAge is Linux's dirty_expire_centisecs, the age the
// writeback model uses to look like a Linux page cache.
const LinuxWritebackAge = 30 * time.Second

// Model names the power-loss model: "worst-case" or "writeback-<age>".
func (c Config) Model() string {
	if c.WritebackAge > 0 {
		return "writeback-" + c.WritebackAge.String()
	}
	return "worst-case"
}

// Stats counts what the filesystem did since it was mounted.
type Stats struct {
	Fsyncs       int64 // file fsync/fdatasync calls
	DirFsyncs    int64 // directory fsync calls (metadata is synchronous, so they commit nothing)
	Writebacks   int64 // files the writeback model wrote back
	Losses       int64 // LoseUnsynced calls
	PendingBytes int64 // bytes now held in the overlay (whole pages)
	PendingFiles int   // files with changes not yet fsynced
}

// Loss says what one LoseUnsynced dropped.
type Loss struct {
	Files int   // files that had pending changes
	Bytes int64 // overlay bytes dropped (whole pages)
}

// FS is a mounted lazy filesystem. Its methods are safe for concurrent
// use; FUSE requests are served on go-fuse's goroutines.
type FS struct {
	cfg    Config
	log    *slog.Logger
	server *fuse.Server
	root   *node

	// mu guards files and orphans. Lock order: FS.mu -> fileState.mu.
	mu      sync.Mutex
	files   map[uint64]*fileState // live states by backing inode number
	orphans map[*fileState]struct{}
	closed  bool

	// discarding is set while LoseUnsynced flushes the kernel cache: any
	// write arriving then (a dirty page written back from before the power
	// loss) is acknowledged and dropped.
	discarding atomic.Bool

	fsyncs, dirFsyncs, losses, writebacks atomic.Int64

	// stopWriteback ends the writeback goroutine; wbDone is closed when
	// it has. Both are nil without the writeback model.
	stopWriteback, wbDone chan struct{}
}

// Mount mounts a lazy view of cfg.Backing at cfg.Mountpoint.
func Mount(cfg Config) (*FS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.Backing, cfg.Mountpoint} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("lazyfs: create %s: %w", d, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(cfg.Backing, &st); err != nil {
		return nil, fmt.Errorf("lazyfs: stat backing %s: %w", cfg.Backing, err)
	}
	fsys := &FS{
		cfg:     cfg,
		log:     logging.Discard(cfg.Logger),
		files:   map[uint64]*fileState{},
		orphans: map[*fileState]struct{}{},
	}
	fsys.root = &node{fsys: fsys}
	server, err := fs.Mount(cfg.Mountpoint, fsys.root, fsys.options(st.Ino))
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s: %w", cfg.Mountpoint, err)
	}
	fsys.server = server
	if cfg.WritebackAge > 0 {
		fsys.stopWriteback, fsys.wbDone = make(chan struct{}), make(chan struct{})
		go fsys.writebackLoop()
	}
	fsys.log.Info("lazyfs mounted", "mountpoint", cfg.Mountpoint, "backing", cfg.Backing, "model", cfg.Model())
	return fsys, nil
}

// writebackLoop is the writeback model's flusher: every interval it
// writes back each file dirty for at least WritebackAge, whole, as
// Linux's flusher writes back an expired inode's pages (per inode, not
// per page: a page written just before may go with it). So a power loss
// keeps every page dirty for longer than age plus interval, and may keep
// younger ones.
func (fsys *FS) writebackLoop() {
	defer close(fsys.wbDone)
	every := fsys.cfg.WritebackInterval
	if every == 0 {
		every = DefaultWritebackInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-fsys.stopWriteback:
			return
		case now := <-tick.C:
			fsys.writeback(now)
		}
	}
}

// writeback writes back every file due at now. Detached files are
// skipped: no open can reach their data again.
func (fsys *FS) writeback(now time.Time) {
	fsys.mu.Lock()
	states := make([]*fileState, 0, len(fsys.files))
	for _, s := range fsys.files {
		states = append(states, s)
	}
	fsys.mu.Unlock()
	for _, s := range states {
		s.mu.Lock()
		if !s.detached && s.writebackDue(now, fsys.cfg.WritebackAge) {
			if err := s.commit(fsys.cfg.SyncBacking); err != nil {
				fsys.log.Warn("lazyfs writeback", "inode", s.ino, "err", err)
			} else {
				fsys.writebacks.Add(1)
			}
		}
		s.mu.Unlock()
	}
}

// options turns off every kernel cache that could outlive a power loss:
// entries and attributes are never cached, page-cache pages are dropped
// on each open (no FOPEN_KEEP_CACHE) and by LoseUnsynced (NotifyContent).
func (fsys *FS) options(rootIno uint64) *fs.Options {
	zero := time.Duration(0)
	return &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:        fmt.Sprintf("%s%d", FsNamePrefix, os.Getpid()),
			Name:          "lazyfs",
			DirectMount:   true,
			DisableXAttrs: true,
			Debug:         fsys.cfg.Debug,
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		RootStableAttr:  &fs.StableAttr{Ino: rootIno},
	}
}

// Mountpoint returns where the FS is mounted.
func (fsys *FS) Mountpoint() string { return fsys.cfg.Mountpoint }

// Backing returns the directory that holds the durable state.
func (fsys *FS) Backing() string { return fsys.cfg.Backing }

// LoseUnsynced simulates a power loss: every change not yet fsynced is
// dropped, each file reverts to its content at its last fsync (metadata
// operations are synchronous and stay), and the kernel's page cache and
// attributes of every file are invalidated so the dropped bytes are never
// served again. Processes using the mount should be dead first; a write
// that races with this call is lost as if it came just before the loss.
func (fsys *FS) LoseUnsynced() (Loss, error) {
	fsys.discarding.Store(true)
	defer fsys.discarding.Store(false)
	loss, err := fsys.dropPending()
	if err != nil {
		return loss, err
	}
	fsys.invalidateKernel()
	fsys.losses.Add(1)
	fsys.log.Info("lazyfs lost unsynced writes", "mountpoint", fsys.cfg.Mountpoint, "files", loss.Files, "bytes", loss.Bytes)
	return loss, nil
}

func (fsys *FS) dropPending() (Loss, error) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if fsys.closed {
		return Loss{}, ErrClosed
	}
	var loss Loss
	var errs []error
	for _, s := range fsys.allStates() {
		s.mu.Lock()
		wasDirty := s.dirty()
		n, err := s.lose()
		idle := s.opens == 0
		s.mu.Unlock()
		if wasDirty {
			loss.Files++
			loss.Bytes += n
		}
		errs = append(errs, err)
		if idle {
			fsys.forgetLocked(s)
		}
	}
	return loss, errors.Join(errs...)
}

// invalidateKernel drops cached pages and attributes of every file inode
// the kernel knows. Dirty pages the kernel writes back while it does so
// arrive as writes and are discarded.
func (fsys *FS) invalidateKernel() {
	var walk func(in *fs.Inode)
	walk = func(in *fs.Inode) {
		for _, ch := range in.Children() {
			if ch.IsDir() {
				walk(ch)
				continue
			}
			// ENOENT means the kernel already forgot the inode.
			_ = ch.NotifyContent(0, 0)
		}
	}
	walk(fsys.root.EmbeddedInode())
}

// Stats returns counters and the overlay's current size.
func (fsys *FS) Stats() Stats {
	st := Stats{Fsyncs: fsys.fsyncs.Load(), DirFsyncs: fsys.dirFsyncs.Load(), Losses: fsys.losses.Load(), Writebacks: fsys.writebacks.Load()}
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	for _, s := range fsys.allStates() {
		s.mu.Lock()
		st.PendingBytes += s.pendingBytes()
		if s.dirty() {
			st.PendingFiles++
		}
		s.mu.Unlock()
	}
	return st
}

// Unmount unmounts the FS (lazily if it is busy), waits for the server to
// stop and closes every backing file. Pending writes are dropped, as on a
// power loss. Calling it again is a no-op.
func (fsys *FS) Unmount() error {
	fsys.mu.Lock()
	if fsys.closed {
		fsys.mu.Unlock()
		return nil
	}
	fsys.closed = true
	fsys.mu.Unlock()
	if fsys.stopWriteback != nil {
		close(fsys.stopWriteback)
		<-fsys.wbDone
	}
	err := fsys.server.Unmount()
	if err != nil {
		// Busy (a process still has a file or cwd there): detach it now;
		// the kernel finishes when the last user goes.
		if derr := syscall.Unmount(fsys.cfg.Mountpoint, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("lazyfs: unmount %s: %w", fsys.cfg.Mountpoint, errors.Join(err, derr))
		}
	}
	fsys.server.Wait()
	fsys.closeAll()
	fsys.log.Info("lazyfs unmounted", "mountpoint", fsys.cfg.Mountpoint)
	return nil
}

func (fsys *FS) closeAll() {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	for _, s := range fsys.allStates() {
		s.f.Close()
	}
	clear(fsys.files)
	clear(fsys.orphans)
}

// allStates lists live and orphaned states; the caller holds mu.
func (fsys *FS) allStates() []*fileState {
	out := make([]*fileState, 0, len(fsys.files)+len(fsys.orphans))
	for _, s := range fsys.files {
		out = append(out, s)
	}
	for s := range fsys.orphans {
		out = append(out, s)
	}
	return out
}

// acquire returns the state of the backing file f (inode ino), creating it
// from f or, when one exists, closing f. With open it counts a handle.
func (fsys *FS) acquire(f *os.File, ino uint64, open bool) (*fileState, error) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	s, ok := fsys.files[ino]
	if ok {
		f.Close()
	} else {
		var err error
		if s, err = newFileState(ino, f); err != nil {
			f.Close()
			return nil, err
		}
		fsys.files[ino] = s
	}
	if open {
		s.mu.Lock()
		s.opens++
		s.mu.Unlock()
	}
	return s, nil
}

// state returns the live state of inode ino, or nil.
func (fsys *FS) state(ino uint64) *fileState {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	return fsys.files[ino]
}

// release drops one handle and forgets the state once it is idle and clean.
func (fsys *FS) release(s *fileState) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	s.mu.Lock()
	s.opens--
	idle := s.opens == 0 && (!s.dirty() || s.detached)
	s.mu.Unlock()
	if idle {
		fsys.forgetLocked(s)
	}
}

// settle forgets s if no handle has it open and it holds nothing pending.
func (fsys *FS) settle(s *fileState) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	s.mu.Lock()
	idle := s.opens == 0 && !s.dirty()
	s.mu.Unlock()
	if idle {
		fsys.forgetLocked(s)
	}
}

// detach is called when the last name of inode ino is gone: its pending
// data can never be reached by a new open, so it lives only as long as its
// handles.
func (fsys *FS) detach(ino uint64) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	s, ok := fsys.files[ino]
	if !ok {
		return
	}
	delete(fsys.files, ino)
	s.mu.Lock()
	s.detached = true
	idle := s.opens == 0
	s.mu.Unlock()
	if idle {
		s.f.Close()
		return
	}
	fsys.orphans[s] = struct{}{}
}

// forgetLocked removes s and closes its backing file; the caller holds mu.
func (fsys *FS) forgetLocked(s *fileState) {
	if fsys.files[s.ino] == s {
		delete(fsys.files, s.ino)
	}
	delete(fsys.orphans, s)
	s.f.Close()
}
