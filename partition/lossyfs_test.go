package partition

import (
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// lossyFS is the OS file system plus a record of what is not yet durable,
// so that crash can do to the files what a power cut may: drop, cut, zero
// or scramble every byte written since the file's last fsync, and forget
// files created since their directory's last fsync. Removals, renames and
// truncations count as durable at once (the log fsyncs after each anyway).
// It models a crash between two calls, not inside one; the crash loop test
// covers the latter with real processes.
type lossyFS struct {
	mu    sync.Mutex
	files map[string]*lossyState
	open  map[*lossyFile]bool
}

type lossyState struct {
	minDirty int64 // lowest byte changed since the last fsync; MaxInt64 when clean
	created  bool  // created since the directory's last fsync
}

func newLossyFS() *lossyFS {
	return &lossyFS{files: map[string]*lossyState{}, open: map[*lossyFile]bool{}}
}

func (l *lossyFS) state(name string) *lossyState {
	s, ok := l.files[name]
	if !ok {
		s = &lossyState{minDirty: math.MaxInt64}
		l.files[name] = s
	}
	return s
}

func (l *lossyFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, statErr := os.Stat(name)
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	s := l.state(name)
	if statErr != nil && flag&os.O_CREATE != 0 {
		s.created = true
	}
	if flag&os.O_TRUNC != 0 {
		s.minDirty = 0
	}
	lf := &lossyFile{File: osFile{f}, fs: l, name: name}
	l.open[lf] = true
	return lf, nil
}

func (l *lossyFS) Remove(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.files, name)
	return os.Remove(name)
}

func (l *lossyFS) Rename(oldpath, newpath string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	l.files[newpath] = l.state(oldpath)
	delete(l.files, oldpath)
	return nil
}

func (l *lossyFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (l *lossyFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

func (l *lossyFS) SyncDir(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for path, s := range l.files {
		if filepath.Dir(path) == filepath.Clean(name) {
			s.created = false
		}
	}
	return nil
}

// crash closes every open file and damages what was not durable.
func (l *lossyFS) crash(rng *rand.Rand) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for f := range l.open {
		f.File.Close()
	}
	l.open = map[*lossyFile]bool{}
	for _, name := range slices.Sorted(maps.Keys(l.files)) {
		if err := damage(rng, name, l.files[name]); err != nil {
			return err
		}
	}
	l.files = map[string]*lossyState{}
	return nil
}

func damage(rng *rand.Rand, name string, s *lossyState) error {
	if s.created && rng.IntN(2) == 0 {
		return os.Remove(name)
	}
	b, err := os.ReadFile(name)
	if err != nil || s.minDirty >= int64(len(b)) {
		return err
	}
	from := int(s.minDirty)
	cut := from + rng.IntN(len(b)-from+1)
	switch rng.IntN(5) {
	case 0: // everything happened to reach the disk
	case 1:
		b = b[:from]
	case 2:
		b = b[:cut]
	case 3:
		clear(b[cut:])
	case 4:
		for i := cut; i < len(b); i++ {
			b[i] = byte(rng.Uint32())
		}
	}
	return os.WriteFile(name, b, 0o644)
}

type lossyFile struct {
	File
	fs   *lossyFS
	name string
}

func (f *lossyFile) dirty(off int64) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	s := f.fs.state(f.name)
	s.minDirty = min(s.minDirty, off)
}

func (f *lossyFile) WriteAt(p []byte, off int64) (int, error) {
	f.dirty(off)
	return f.File.WriteAt(p, off)
}

func (f *lossyFile) Truncate(size int64) error {
	f.dirty(size)
	return f.File.Truncate(size)
}

func (f *lossyFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.state(f.name).minDirty = math.MaxInt64
	f.fs.mu.Unlock()
	return nil // durability is what this FS pretends; skip the real fsync
}

func (f *lossyFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return f.File.Close()
}
