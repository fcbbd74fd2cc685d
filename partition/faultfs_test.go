package partition

import (
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// faultFS wraps the OS file system with hooks, for tests of one layer: the
// hooks decide how much of a write lands and whether syncs fail, and it
// counts the bytes read.
type faultFS struct {
	inner FS
	mu    sync.Mutex
	// write, when set, returns how many bytes of p to write and the error
	// to report after writing them.
	write func(name string, p []byte, off int64) (int, error)
	// sync, when set, returns an error instead of syncing.
	sync func(name string) error
	// afterWrite, when set, sees the error of every hooked write once the
	// allowed bytes have landed.
	afterWrite func(err error)
	// noSync skips real fsyncs, for tests that never cut power.
	noSync bool
	read   atomic.Int64
}

func newFaultFS() *faultFS { return &faultFS{inner: OSFS()} }

func (f *faultFS) setWrite(h func(name string, p []byte, off int64) (int, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.write = h
}

func (f *faultFS) setSync(h func(name string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sync = h
}

func (f *faultFS) hooks() (func(string, []byte, int64) (int, error), func(string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.write, f.sync
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Remove(name string) error                     { return f.inner.Remove(name) }
func (f *faultFS) Rename(o, n string) error                     { return f.inner.Rename(o, n) }
func (f *faultFS) ReadDir(name string) ([]fs.DirEntry, error)   { return f.inner.ReadDir(name) }
func (f *faultFS) MkdirAll(path string, perm fs.FileMode) error { return f.inner.MkdirAll(path, perm) }

func (f *faultFS) SyncDir(name string) error {
	if _, s := f.hooks(); s != nil {
		if err := s(name); err != nil {
			return err
		}
	}
	if f.noSync {
		return nil
	}
	return f.inner.SyncDir(name)
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.read.Add(int64(n))
	return n, err
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	w, _ := f.fs.hooks()
	if w == nil {
		return f.File.WriteAt(p, off)
	}
	allow, herr := w(filepath.Base(f.Name()), p, off)
	n, err := f.File.WriteAt(p[:min(allow, len(p))], off)
	if err == nil {
		err = herr
	}
	if f.fs.afterWrite != nil {
		f.fs.afterWrite(err)
	}
	return n, err
}

func (f *faultFile) Sync() error {
	if _, s := f.fs.hooks(); s != nil {
		if err := s(filepath.Base(f.Name())); err != nil {
			return err
		}
	}
	if f.fs.noSync {
		return nil
	}
	return f.File.Sync()
}
