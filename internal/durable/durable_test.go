package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

var errInjected = errors.New("injected")

// faultFS is the OS file system with one operation failing.
type faultFS struct {
	FS
	fail string // "open", "write", "sync", "close", "rename", "syncdir"
}

func (f faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if f.fail == "open" {
		return nil, errInjected
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f.fail}, nil
}

func (f faultFS) Rename(oldpath, newpath string) error {
	if f.fail == "rename" {
		return errInjected
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f faultFS) SyncDir(name string) error {
	if f.fail == "syncdir" {
		return errInjected
	}
	return f.FS.SyncDir(name)
}

type faultFile struct {
	File
	fail string
}

func (f faultFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fail == "write" {
		n, _ := f.File.WriteAt(b[:len(b)/2], off) // a torn write
		return n, errInjected
	}
	return f.File.WriteAt(b, off)
}

func (f faultFile) Sync() error {
	if f.fail == "sync" {
		return errInjected
	}
	return f.File.Sync()
}

func (f faultFile) Close() error {
	err := f.File.Close()
	if f.fail == "close" {
		return errInjected
	}
	return err
}

func readString(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteFile_ReplacesContents(t *testing.T) {
	name := filepath.Join(t.TempDir(), "state")
	for _, data := range []string{"first, and longer", "second"} {
		if err := WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := readString(t, name); got != data {
			t.Fatalf("contents %q, want %q", got, data)
		}
	}
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Mode().Perm(), fs.FileMode(0o600); got != want {
		t.Errorf("mode %v, want %v", got, want)
	}
	if _, err := os.Stat(name + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temp file left behind: %v", err)
	}
}

// TestWriter_FailureLeavesOldFile: a write failing at any step before the
// rename leaves the old contents and no temp file; a failed directory
// sync is reported.
func TestWriter_FailureLeavesOldFile(t *testing.T) {
	for _, fail := range []string{"open", "write", "sync", "close", "rename"} {
		t.Run(fail, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "state")
			if err := WriteFile(name, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := Writer{FS: faultFS{OS(), fail}}.WriteFile(name, []byte("new contents"), 0o644)
			if !errors.Is(err, errInjected) {
				t.Fatalf("error %v, want the injected one", err)
			}
			if got := readString(t, name); got != "old" {
				t.Errorf("contents %q after a failed write, want the old ones", got)
			}
			if _, err := os.Stat(name + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("temp file left behind: %v", err)
			}
		})
	}
	t.Run("syncdir", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "state")
		if err := (Writer{FS: faultFS{OS(), "syncdir"}}).WriteFile(name, []byte("new"), 0o644); !errors.Is(err, errInjected) {
			t.Fatalf("error %v, want the injected one: the rename's durability is unknown", err)
		}
	})
}

// TestWriter_AfterTemp: the hook runs once the temp file holds the new
// contents and before the target changes.
func TestWriter_AfterTemp(t *testing.T) {
	name := filepath.Join(t.TempDir(), "state")
	if err := WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	ran := false
	w := Writer{FS: OS(), AfterTemp: func() {
		ran = true
		if got := readString(t, name+".tmp"); got != "new" {
			t.Errorf("temp file holds %q at the hook", got)
		}
		if got := readString(t, name); got != "old" {
			t.Errorf("target holds %q before the rename", got)
		}
	}}
	if err := w.WriteFile(name, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("AfterTemp did not run")
	}
}

// TestWriteFile_StaleTempReplaced: a temp file a crash left behind does
// not get in the way.
func TestWriteFile_StaleTempReplaced(t *testing.T) {
	name := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(name+".tmp", []byte("a crashed write, longer than the next"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(name, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, name); got != "new" {
		t.Fatalf("contents %q, want %q", got, "new")
	}
}

func TestSyncDir_MissingDir(t *testing.T) {
	if err := SyncDir(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error %v, want not-exist", err)
	}
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
