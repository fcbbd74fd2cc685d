package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FS is the handful of calls the partition log and replica make on files
// and directories.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	MkdirAll(path string, perm fs.FileMode) error
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(name string) error
}

// File is an open file. Sync has fdatasync semantics: the data and the
// size are durable when it returns nil.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (fs.FileInfo, error)
	Close() error
	Name() string
}

// ReadFile reads a whole file through fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
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

// RemoveAll removes path and everything under it, as os.RemoveAll does; a
// missing path is not an error.
func RemoveAll(fsys FS, path string) error {
	ents, err := fsys.ReadDir(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		// Not a directory (or unreadable): remove it as a file.
		if rerr := fsys.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return rerr
		}
		return nil
	}
	for _, e := range ents {
		if err := RemoveAll(fsys, filepath.Join(path, e.Name())); err != nil {
			return err
		}
	}
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Glob returns the entries of dir whose names start with prefix, as full
// paths in name order (ReadDir's order). A missing dir has none.
func Glob(fsys FS, dir, prefix string) ([]string, error) {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dir %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
