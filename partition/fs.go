package partition

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/raftq/raftq/internal/durable"
)

// FS is the file-system seam of a Log: the handful of calls it makes on
// files and directories. Production uses OSFS; tests wrap it to inject write
// and sync failures or to forget unsynced writes.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	MkdirAll(path string, perm fs.FileMode) error
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(name string) error
}

// File is an open file. Sync has fdatasync semantics: the data and the size
// are durable when it returns nil.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (fs.FileInfo, error)
	Close() error
	Name() string
}

// OSFS returns the operating system's file system.
func OSFS() FS { return osFS{} }

type osFS struct{}

var _ FS = osFS{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

func (osFS) SyncDir(name string) error { return durable.SyncDir(name) }

// durableFS lets internal/durable write through an FS, so that its
// small-file writes see the same faults and crashes as the Log's.
type durableFS struct{ FS }

var _ durable.FS = durableFS{}

func (d durableFS) OpenFile(name string, flag int, perm fs.FileMode) (durable.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil File must not become a non-nil durable.File
	}
	return f, nil
}

// osFile is an *os.File whose Sync is fdatasync. It keeps the *os.File's
// SyscallConn, which startWriteback uses for sync_file_range.
type osFile struct{ *os.File }

func (f osFile) Sync() error { return fdatasync(f.File) }

// readFile reads a whole file through fsys.
func readFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// writeFile replaces name's contents with data, optionally syncing it. It is
// not atomic: callers use it for files whose damage recovery detects.
func writeFile(fsys FS, name string, data []byte, sync bool) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.WriteAt(data, 0); err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(name), err)
	}
	return nil
}

// removeIfExists removes name, ignoring a missing file.
func removeIfExists(fsys FS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
