package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FS is the part of a file system a durable write uses.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(name string) error
}

// File is an open file: written at an offset, synced, closed.
type File interface {
	WriteAt(b []byte, off int64) (int, error)
	Sync() error
	Close() error
}

// OS returns the operating system's file system.
func OS() FS { return osFS{} }

type osFS struct{}

var _ FS = osFS{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil *os.File must not become a non-nil File
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) SyncDir(name string) error            { return SyncDir(name) }

// Writer writes small files durably through FS.
type Writer struct {
	FS FS
	// AfterTemp, if set, runs once the temp file is durable and before
	// the rename: a crash test's stopping point.
	AfterTemp func()
}

// WriteFile replaces name with data durably on the operating system's
// file system: temp file, fsync, rename, directory fsync.
func WriteFile(name string, data []byte, perm fs.FileMode) error {
	return Writer{FS: OS()}.WriteFile(name, data, perm)
}

// WriteFile replaces name with data durably: temp file, fsync, rename,
// directory fsync. On an error the old file is left as it was.
func (w Writer) WriteFile(name string, data []byte, perm fs.FileMode) error {
	tmp := name + ".tmp"
	if err := w.writeTemp(tmp, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", name, errors.Join(err, w.removeTemp(tmp)))
	}
	if w.AfterTemp != nil {
		w.AfterTemp()
	}
	if err := w.FS.Rename(tmp, name); err != nil {
		return fmt.Errorf("write %s: %w", name, errors.Join(err, w.removeTemp(tmp)))
	}
	if err := w.FS.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("write %s: sync dir: %w", name, err)
	}
	return nil
}

func (w Writer) writeTemp(tmp string, data []byte, perm fs.FileMode) error {
	f, err := w.FS.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err = f.WriteAt(data, 0); err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// removeTemp removes a failed write's temp file; one that is not there is
// no error.
func (w Writer) removeTemp(tmp string) error {
	if err := w.FS.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	return nil
}

// SyncDir fsyncs the directory dir, making its entries (creations,
// renames, removals) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
