package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/raftq/raftq/internal/durable"
	"github.com/raftq/raftq/internal/vfs"
)

// FS is the file-system seam of a Log and a Replica (see internal/vfs
// for the contract). Production uses OSFS; tests and the simulator use
// vfs.Mem or wrap OSFS to inject write and sync failures.
type FS = vfs.FS

// File is an open file; Sync has fdatasync semantics.
type File = vfs.File

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
func readFile(fsys FS, name string) ([]byte, error) { return vfs.ReadFile(fsys, name) }

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
