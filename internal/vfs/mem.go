package vfs

import (
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory FS with crash semantics (see the package doc).
type Mem struct {
	// LieAboutSync is a planted bug: File.Sync and SyncDir report success
	// and make nothing durable.
	LieAboutSync bool

	mu      sync.Mutex
	dirs    map[string]bool   // every directory, durable at once
	live    map[string]*inode // file entries as a reader sees them
	durable map[string]*inode // file entries as a crash leaves them
	open    map[*memFile]bool
}

// inode is one file's contents: data as written, synced as last made
// durable, and the operations between the two, in order.
type inode struct {
	data    []byte
	synced  []byte
	pending []memOp
}

// memOp is a write (data at off) or, when trunc, a truncation to off.
type memOp struct {
	off   int64
	data  []byte
	trunc bool
}

var _ FS = (*Mem)(nil)

// NewMem returns an empty in-memory file system holding only "/".
func NewMem() *Mem {
	return &Mem{
		dirs: map[string]bool{"/": true, ".": true},
		live: map[string]*inode{}, durable: map[string]*inode{}, open: map[*memFile]bool{},
	}
}

func clean(name string) string { return filepath.Clean(name) }

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// OpenFile opens name. O_CREATE, O_EXCL, O_TRUNC and the access modes are
// honoured; O_APPEND is refused (nothing here appends by position).
func (m *Mem) OpenFile(name string, flag int, _ fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if flag&os.O_APPEND != 0 {
		return nil, pathErr("open", name, fs.ErrInvalid)
	}
	if m.dirs[p] {
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, pathErr("open", name, fs.ErrInvalid)
		}
		return &memFile{m: m, name: name, dir: true}, nil
	}
	ino, ok := m.live[p]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case !ok:
		if !m.dirs[filepath.Dir(p)] {
			return nil, pathErr("open", name, fs.ErrNotExist)
		}
		ino = &inode{}
		m.live[p] = ino
	}
	if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		ino.truncate(0)
	}
	f := &memFile{m: m, name: name, ino: ino, write: flag&(os.O_WRONLY|os.O_RDWR) != 0}
	m.open[f] = true
	return f, nil
}

// Remove removes a file, or an empty directory.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if m.dirs[p] {
		if len(m.children(p)) > 0 {
			return pathErr("remove", name, fs.ErrExist)
		}
		delete(m.dirs, p)
		for f := range m.durable { // its entries go with it
			if filepath.Dir(f) == p {
				delete(m.durable, f)
			}
		}
		return nil
	}
	if _, ok := m.live[p]; !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	delete(m.live, p)
	return nil
}

// Rename moves a file (durable once both directories are synced) or a
// directory with everything under it (durable at once).
func (m *Mem) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, np := clean(oldpath), clean(newpath)
	if !m.dirs[filepath.Dir(np)] {
		return pathErr("rename", newpath, fs.ErrNotExist)
	}
	if m.dirs[op] {
		if m.dirs[np] || m.live[np] != nil {
			return pathErr("rename", newpath, fs.ErrExist)
		}
		m.moveTree(op, np)
		return nil
	}
	ino, ok := m.live[op]
	if !ok {
		return pathErr("rename", oldpath, fs.ErrNotExist)
	}
	if m.dirs[np] {
		return pathErr("rename", newpath, fs.ErrExist)
	}
	delete(m.live, op)
	m.live[np] = ino
	return nil
}

// moveTree renames directory op to np in every view.
func (m *Mem) moveTree(op, np string) {
	move := func(name string) (string, bool) {
		if name == op {
			return np, true
		}
		if rest, ok := strings.CutPrefix(name, op+string(filepath.Separator)); ok {
			return filepath.Join(np, rest), true
		}
		return "", false
	}
	for _, d := range slices.Collect(maps.Keys(m.dirs)) {
		if to, ok := move(d); ok {
			delete(m.dirs, d)
			m.dirs[to] = true
		}
	}
	for _, view := range []map[string]*inode{m.live, m.durable} {
		for _, name := range slices.Collect(maps.Keys(view)) {
			if to, ok := move(name); ok {
				view[to] = view[name]
				delete(view, name)
			}
		}
	}
}

// children returns the names directly inside dir, sorted, with whether
// each is a directory.
func (m *Mem) children(dir string) map[string]bool {
	out := map[string]bool{}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			out[filepath.Base(d)] = true
		}
	}
	for f := range m.live {
		if filepath.Dir(f) == dir {
			out[filepath.Base(f)] = false
		}
	}
	return out
}

// ReadDir lists a directory in name order.
func (m *Mem) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if !m.dirs[p] {
		if m.live[p] != nil {
			return nil, pathErr("readdir", name, fs.ErrInvalid)
		}
		return nil, pathErr("readdir", name, fs.ErrNotExist)
	}
	kids := m.children(p)
	out := make([]fs.DirEntry, 0, len(kids))
	for _, n := range slices.Sorted(maps.Keys(kids)) {
		fi := memInfo{name: n, dir: kids[n]}
		if !fi.dir {
			fi.size = int64(len(m.live[filepath.Join(p, n)].data))
		}
		out = append(out, fs.FileInfoToDirEntry(fi))
	}
	return out, nil
}

// MkdirAll creates path and its parents.
func (m *Mem) MkdirAll(path string, _ fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := clean(path); !m.dirs[p]; p = filepath.Dir(p) {
		if m.live[p] != nil {
			return pathErr("mkdir", p, fs.ErrExist)
		}
		m.dirs[p] = true
	}
	return nil
}

// SyncDir makes the file entries directly inside name durable.
func (m *Mem) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if !m.dirs[p] {
		return pathErr("syncdir", name, fs.ErrNotExist)
	}
	if m.LieAboutSync {
		return nil
	}
	for _, view := range []map[string]*inode{m.durable, m.live} {
		for f := range view {
			if filepath.Dir(f) != p {
				continue
			}
			if ino, ok := m.live[f]; ok {
				m.durable[f] = ino
			} else {
				delete(m.durable, f)
			}
		}
	}
	return nil
}

// Crash closes every open file and leaves what a power cut may: the
// durable entries, each with its synced bytes and a random prefix of the
// operations after them, the first one lost possibly torn.
func (m *Mem) Crash(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for f := range m.open {
		f.closed = true
	}
	clear(m.open)
	seen := map[*inode]bool{}
	m.live = map[string]*inode{}
	for _, name := range slices.Sorted(maps.Keys(m.durable)) {
		ino := m.durable[name]
		if !seen[ino] {
			seen[ino] = true
			ino.crash(rng)
		}
		m.live[name] = ino
	}
}

// Damage rewrites a file's contents as a failing disk might, for a fault
// injector: damage gets the bytes and returns what the disk now holds. It
// changes the synced bytes too (a crash does not undo it) and is meant
// for a file of a stopped node: nothing open should hold it.
func (m *Mem) Damage(name string, damage func([]byte) []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.live[clean(name)]
	if !ok {
		return pathErr("damage", name, fs.ErrNotExist)
	}
	ino.data = damage(slices.Clone(ino.data))
	ino.sync()
	return nil
}

// Paths returns every file path, sorted: for a fault injector to pick one.
func (m *Mem) Paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.live))
}

func (ino *inode) write(b []byte, off int64) {
	if end := off + int64(len(b)); end > int64(len(ino.data)) {
		ino.data = append(ino.data, make([]byte, end-int64(len(ino.data)))...)
	}
	copy(ino.data[off:], b)
	ino.pending = append(ino.pending, memOp{off: off, data: slices.Clone(b)})
}

func (ino *inode) truncate(size int64) {
	if size <= int64(len(ino.data)) {
		ino.data = ino.data[:size]
	} else {
		ino.data = append(ino.data, make([]byte, size-int64(len(ino.data)))...)
	}
	ino.pending = append(ino.pending, memOp{off: size, trunc: true})
}

func (ino *inode) sync() {
	ino.synced = slices.Clone(ino.data)
	ino.pending = nil
}

// crash rebuilds the file from its synced bytes and a random prefix of
// its pending operations.
func (ino *inode) crash(rng *rand.Rand) {
	ops := ino.pending
	keep := rng.IntN(len(ops) + 1)
	ino.data, ino.pending = slices.Clone(ino.synced), nil
	for i, op := range ops {
		if i > keep {
			break
		}
		switch {
		case op.trunc && i < keep:
			ino.truncate(op.off)
		case op.trunc:
		case i < keep:
			ino.write(op.data, op.off)
		default: // torn: a prefix of the first lost write arrives
			if n := rng.IntN(len(op.data) + 1); n > 0 {
				ino.write(op.data[:n], op.off)
			}
		}
	}
	ino.sync()
}

// memFile is an open file (or directory, for Stat).
type memFile struct {
	m      *Mem
	name   string
	ino    *inode
	dir    bool
	write  bool
	closed bool
}

func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, fs.ErrClosed)
	case f.dir && op != "stat" && op != "close":
		return pathErr(op, f.name, fs.ErrInvalid)
	case write && !f.write:
		return pathErr(op, f.name, fs.ErrPermission)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	f.ino.write(p, off)
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	f.ino.truncate(size)
	return nil
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	if !f.m.LieAboutSync {
		f.ino.sync()
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	if f.dir {
		return memInfo{name: filepath.Base(f.name), dir: true}, nil
	}
	return memInfo{name: filepath.Base(f.name), size: int64(len(f.ino.data))}, nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	delete(f.m.open, f)
	return nil
}

func (f *memFile) Name() string { return f.name }

// memInfo is the fs.FileInfo of a Mem file or directory.
type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
