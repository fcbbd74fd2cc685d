package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

func write(t *testing.T, m *Mem, name string, data []byte, sync bool) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, m *Mem, name string) ([]byte, bool) {
	t.Helper()
	b, err := ReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func newDir(t *testing.T) *Mem {
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMem_SyncedFileAndEntrySurvive(t *testing.T) {
	m := newDir(t)
	write(t, m, "/d/a", []byte("hello"), true)
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(50) {
		m.Crash(rand.New(rand.NewPCG(seed, 1)))
		if b, ok := read(t, m, "/d/a"); !ok || string(b) != "hello" {
			t.Fatalf("seed %d: synced file after crash: %q, present %v", seed, b, ok)
		}
	}
}

func TestMem_EntryLostWithoutSyncDir(t *testing.T) {
	m := newDir(t)
	write(t, m, "/d/a", []byte("hello"), true)
	m.Crash(rand.New(rand.NewPCG(1, 1)))
	if _, ok := read(t, m, "/d/a"); ok {
		t.Fatal("a file whose directory was never synced survived a crash")
	}
}

func TestMem_UnsyncedWritesKeepAPrefix(t *testing.T) {
	sawLoss, sawKeep, sawTorn := false, false, false
	for seed := range uint64(200) {
		m := newDir(t)
		write(t, m, "/d/a", []byte("base"), true)
		if err := m.SyncDir("/d"); err != nil {
			t.Fatal(err)
		}
		f, _ := m.OpenFile("/d/a", os.O_RDWR, 0)
		f.WriteAt([]byte("-one"), 4)
		f.WriteAt([]byte("-two"), 8)
		m.Crash(rand.New(rand.NewPCG(seed, 2)))
		b, _ := read(t, m, "/d/a")
		full := "base-one-two"
		if !bytes.HasPrefix([]byte(full), b) || len(b) < 4 {
			t.Fatalf("seed %d: %q is not a prefix of %q that keeps the synced bytes", seed, b, full)
		}
		switch len(b) {
		case 4:
			sawLoss = true
		case 12:
			sawKeep = true
		case 8:
		default:
			sawTorn = true
		}
		if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("a file open at the crash still writes: %v", err)
		}
	}
	if !sawLoss || !sawKeep || !sawTorn {
		t.Fatalf("crashes never lost (%v), kept (%v) or tore (%v) unsynced writes", sawLoss, sawKeep, sawTorn)
	}
}

func TestMem_RenameRevertsWithoutSyncDir(t *testing.T) {
	m := newDir(t)
	write(t, m, "/d/cp", []byte("old"), true)
	m.SyncDir("/d")
	write(t, m, "/d/cp.tmp", []byte("new"), true)
	if err := m.Rename("/d/cp.tmp", "/d/cp"); err != nil {
		t.Fatal(err)
	}
	if b, _ := read(t, m, "/d/cp"); string(b) != "new" {
		t.Fatalf("after rename: %q", b)
	}
	m.Crash(rand.New(rand.NewPCG(3, 3)))
	if b, _ := read(t, m, "/d/cp"); string(b) != "old" {
		t.Fatalf("an unsynced rename survived a crash: %q", b)
	}
	write(t, m, "/d/cp.tmp", []byte("new"), true)
	m.Rename("/d/cp.tmp", "/d/cp")
	m.SyncDir("/d")
	m.Crash(rand.New(rand.NewPCG(3, 3)))
	if b, _ := read(t, m, "/d/cp"); string(b) != "new" {
		t.Fatalf("a synced rename was lost: %q", b)
	}
	if _, ok := read(t, m, "/d/cp.tmp"); ok {
		t.Fatal("the renamed temp file came back")
	}
}

func TestMem_LieAboutSyncLosesEverything(t *testing.T) {
	m := newDir(t)
	m.LieAboutSync = true
	write(t, m, "/d/a", []byte("hello"), true)
	m.SyncDir("/d")
	m.Crash(rand.New(rand.NewPCG(4, 4)))
	if _, ok := read(t, m, "/d/a"); ok {
		t.Fatal("with LieAboutSync a crash kept a file")
	}
}

func TestMem_DirectoryTree(t *testing.T) {
	m := newDir(t)
	m.MkdirAll("/d/x/y", 0o755)
	write(t, m, "/d/x/y/f", []byte("1"), true)
	m.SyncDir("/d/x/y")
	if _, err := m.OpenFile("/nope/f", os.O_CREATE|os.O_RDWR, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in a missing directory: %v", err)
	}
	if err := m.Rename("/d/x", "/d/z"); err != nil {
		t.Fatal(err)
	}
	m.Crash(rand.New(rand.NewPCG(5, 5)))
	if b, ok := read(t, m, "/d/z/y/f"); !ok || string(b) != "1" {
		t.Fatalf("file under a renamed directory: %q %v", b, ok)
	}
	ents, err := m.ReadDir("/d")
	if err != nil || len(ents) != 1 || ents[0].Name() != "z" || !ents[0].IsDir() {
		t.Fatalf("ReadDir /d = %v, %v", ents, err)
	}
	if err := m.Remove("/d/z"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("removing a non-empty directory: %v", err)
	}
	if err := RemoveAll(m, "/d/z"); err != nil {
		t.Fatal(err)
	}
	m.Crash(rand.New(rand.NewPCG(5, 5)))
	if got := m.Paths(); len(got) != 0 {
		t.Fatalf("files left after RemoveAll and a crash: %v", got)
	}
}

func TestMem_CrashIsDeterministic(t *testing.T) {
	run := func() []byte {
		m := newDir(t)
		write(t, m, "/d/a", []byte("base"), true)
		m.SyncDir("/d")
		f, _ := m.OpenFile("/d/a", os.O_RDWR, 0)
		for i := range 20 {
			f.WriteAt(bytes.Repeat([]byte{byte(i)}, 7), int64(4+7*i))
		}
		m.Crash(rand.New(rand.NewPCG(9, 9)))
		b, _ := read(t, m, "/d/a")
		return b
	}
	if a, b := run(), run(); !slices.Equal(a, b) {
		t.Fatalf("one seed, two outcomes: %d and %d bytes", len(a), len(b))
	}
}

func TestMem_DamageSurvivesACrash(t *testing.T) {
	m := newDir(t)
	write(t, m, "/d/a", []byte("hello"), true)
	m.SyncDir("/d")
	if err := m.Damage("/d/a", func(b []byte) []byte { b[0] ^= 1; return b[:3] }); err != nil {
		t.Fatal(err)
	}
	m.Crash(rand.New(rand.NewPCG(6, 6)))
	if b, _ := read(t, m, "/d/a"); string(b) != "iel" {
		t.Fatalf("after damage and a crash: %q", b)
	}
	if err := m.Damage("/d/none", func(b []byte) []byte { return b }); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("damaging a missing file: %v", err)
	}
}
