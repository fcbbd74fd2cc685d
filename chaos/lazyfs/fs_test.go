package lazyfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftq/raftq/chaos/internal/testenv"
	"github.com/raftq/raftq/internal/mounts"
)

// mountTest mounts a fresh lazyfs for t and unmounts it when t ends.
func mountTest(t testing.TB) *FS {
	t.Helper()
	testenv.Require(t, Available())
	dir := t.TempDir()
	fsys, err := Mount(Config{Backing: filepath.Join(dir, "backing"), Mountpoint: filepath.Join(dir, "mnt")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return fsys
}

func lose(t testing.TB, fsys *FS) Loss {
	t.Helper()
	l, err := fsys.LoseUnsynced()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustWrite(t testing.TB, f *os.File, b []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func mustSync(t testing.TB, f *os.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openRW(t testing.TB, p string, flag int) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR|flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFS_LoseUnsyncedKeepsOnlyFsyncedContent(t *testing.T) {
	fsys := mountTest(t)
	p := filepath.Join(fsys.Mountpoint(), "wal")
	f := openRW(t, p, os.O_CREATE)
	mustWrite(t, f, []byte("durable-part|"), 0)
	mustSync(t, f)
	mustWrite(t, f, []byte("lost-append"), 13)
	mustWrite(t, f, []byte("DURABLE"), 0) // overwrite of synced bytes, also lost
	if got, want := string(readFile(t, p)), "DURABLE-part|lost-append"; got != want {
		t.Fatalf("before loss: %q, want %q", got, want)
	}
	if got := readFile(t, filepath.Join(fsys.Backing(), "wal")); string(got) != "durable-part|" {
		t.Fatalf("backing file has %q before any fsync of the new writes", got)
	}
	f.Close()

	l := lose(t, fsys)
	if l.Files != 1 || l.Bytes == 0 {
		t.Errorf("loss = %+v, want 1 file and some bytes", l)
	}
	if got, want := string(readFile(t, p)), "durable-part|"; got != want {
		t.Fatalf("after loss: %q, want %q", got, want)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 13 {
		t.Errorf("size after loss = %d, want 13", fi.Size())
	}
}

// TestFS_KernelServesNoDroppedBytes reads through a descriptor and a
// mapping (in another process) that stay open across the loss: the page
// cache must not answer with the dropped bytes.
func TestFS_KernelServesNoDroppedBytes(t *testing.T) {
	fsys := mountTest(t)
	p := filepath.Join(fsys.Mountpoint(), "seg")
	f := openRW(t, p, os.O_CREATE)
	old := bytes.Repeat([]byte{'o'}, 2*pageSize)
	mustWrite(t, f, old, 0)
	mustSync(t, f)
	mapper := startInteractive(t, "mmap", p)
	if got := mapper.line(t); got != "ready" {
		t.Fatalf("mmap helper: %q", got)
	}
	if got := mapper.ask(t, "peek 4"); got != "oooo" {
		t.Fatalf("mapping before the write: %q", got)
	}
	mustWrite(t, f, bytes.Repeat([]byte{'N'}, 2*pageSize), 0)
	buf := make([]byte, len(old))
	if _, err := f.ReadAt(buf, 0); err != nil || buf[0] != 'N' {
		t.Fatalf("new bytes not visible before the loss (read %q.., err %v)", buf[:1], err)
	}
	if got := mapper.ask(t, "peek 4"); got != "NNNN" {
		t.Fatalf("mapping after the write: %q", got)
	}

	lose(t, fsys)
	if got := mapper.ask(t, "peek 4"); got != "oooo" {
		t.Fatalf("the mapping served dropped bytes: %q", got)
	}
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, old) {
		t.Fatalf("read through the open descriptor served dropped bytes: %q...", buf[:8])
	}
}

func TestFS_TruncateIsLazyData(t *testing.T) {
	fsys := mountTest(t)
	p := filepath.Join(fsys.Mountpoint(), "t")
	f := openRW(t, p, os.O_CREATE)
	mustWrite(t, f, bytes.Repeat([]byte{'a'}, 10000), 0)
	mustSync(t, f)
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, []byte("b"), 5000)
	got := readFile(t, p)
	if len(got) != 5001 || got[99] != 'a' || got[100] != 0 || got[4999] != 0 || got[5000] != 'b' {
		t.Fatalf("view after truncate+write is wrong (len %d)", len(got))
	}
	lose(t, fsys)
	if got := readFile(t, p); !bytes.Equal(got, bytes.Repeat([]byte{'a'}, 10000)) {
		t.Fatalf("after loss: len %d, want the 10000 fsynced bytes", len(got))
	}

	if err := os.Truncate(p, 10); err != nil { // by name: no handle
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Size() != 10 {
		t.Fatalf("size after truncate(2) = %d, want 10", fi.Size())
	}
	mustSync(t, f)
	lose(t, fsys)
	if got := readFile(t, p); !bytes.Equal(got, bytes.Repeat([]byte{'a'}, 10)) {
		t.Fatalf("fsynced truncation was lost: len %d", len(got))
	}
}

func TestFS_OpenTruncAndAppend(t *testing.T) {
	fsys := mountTest(t)
	p := filepath.Join(fsys.Mountpoint(), "a")
	f := openRW(t, p, os.O_CREATE|os.O_APPEND)
	for _, s := range []string{"one ", "two ", "three"} {
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, f)
	if got := string(readFile(t, p)); got != "one two three" {
		t.Fatalf("append: %q", got)
	}
	g := openRW(t, p, os.O_TRUNC)
	if _, err := g.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, p)); got != "new" {
		t.Fatalf("after O_TRUNC: %q", got)
	}
	lose(t, fsys)
	if got := string(readFile(t, p)); got != "one two three" {
		t.Fatalf("an unsynced O_TRUNC survived the loss: %q", got)
	}
}

func TestFS_FallocateExtendsLazily(t *testing.T) {
	fsys := mountTest(t)
	p := filepath.Join(fsys.Mountpoint(), "prealloc")
	f := openRW(t, p, os.O_CREATE)
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 2<<20); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != 1<<20 {
		t.Fatalf("size after fallocate = %d, want 1 MiB", fi.Size())
	}
	if st := fsys.Stats(); st.PendingBytes != 0 {
		t.Errorf("preallocation took %d bytes of overlay memory, want 0", st.PendingBytes)
	}
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 10)
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("punch hole: %v, want EOPNOTSUPP", err)
	}
	lose(t, fsys)
	if fi, _ := f.Stat(); fi.Size() != 0 {
		t.Fatalf("size after loss = %d, want 0", fi.Size())
	}
}

// TestFS_MetadataIsSynchronous pins the rule: create, rename, unlink and
// mkdir apply at once; file contents wait for fsync.
func TestFS_MetadataIsSynchronous(t *testing.T) {
	fsys := mountTest(t)
	mnt := fsys.Mountpoint()
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "d", "tmp"), []byte("never synced"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "d", "tmp"), filepath.Join(mnt, "d", "final")); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(mnt, "gone")
	f := openRW(t, gone, os.O_CREATE)
	mustWrite(t, f, []byte("synced"), 0)
	mustSync(t, f)
	f.Close()
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(filepath.Join(mnt, "d"))
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, dir)
	dir.Close()

	lose(t, fsys)
	got, err := os.ReadFile(filepath.Join(mnt, "d", "final"))
	if err != nil {
		t.Fatalf("renamed file gone after loss: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("renamed never-synced file has %q after loss, want empty", got)
	}
	if _, err := os.Stat(filepath.Join(mnt, "d", "tmp")); !os.IsNotExist(err) {
		t.Errorf("old name back after loss: %v", err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("unlinked file back after loss: %v", err)
	}
	if got := fsys.Stats().DirFsyncs; got != 1 {
		t.Errorf("dir fsyncs = %d, want 1", got)
	}
}

// TestFS_RenameOverReplacesPendingTarget checks that pending data of a
// replaced file cannot leak into the file that took its name.
func TestFS_RenameOverReplacesPendingTarget(t *testing.T) {
	fsys := mountTest(t)
	mnt := fsys.Mountpoint()
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	fa := openRW(t, a, os.O_CREATE)
	mustWrite(t, fa, []byte("A-synced"), 0)
	mustSync(t, fa)
	fb := openRW(t, b, os.O_CREATE)
	mustWrite(t, fb, []byte("B-pending"), 0)
	fb.Close()
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, b)); got != "A-synced" {
		t.Fatalf("after rename over: %q", got)
	}
	lose(t, fsys)
	if got := string(readFile(t, b)); got != "A-synced" {
		t.Fatalf("after loss: %q", got)
	}
}

// TestFS_LocksAreKernelLocal checks the OFD lock etcd's WAL takes: the
// kernel enforces it on the mount without the filesystem's help.
func TestFS_LocksAreKernelLocal(t *testing.T) {
	fsys := mountTest(t)
	p := filepath.Join(fsys.Mountpoint(), "lock")
	f1, f2 := openRW(t, p, os.O_CREATE), openRW(t, p, 0)
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f1.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	lk = syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f2.Fd(), unix.F_OFD_SETLK, &lk); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("second OFD lock: %v, want EAGAIN", err)
	}
	if err := syscall.Flock(int(f1.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("second flock: %v, want EWOULDBLOCK", err)
	}
}

func TestFS_RemountKeepsFsyncedData(t *testing.T) {
	testenv.Require(t, Available())
	dir := t.TempDir()
	cfg := Config{Backing: filepath.Join(dir, "b"), Mountpoint: filepath.Join(dir, "m")}
	fsys, err := Mount(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(cfg.Mountpoint, "x"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, []byte("kept"), 0)
	mustSync(t, f)
	mustWrite(t, f, []byte("-dropped"), 4)
	f.Close()
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}
	fsys, err = Mount(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Unmount()
	if got := string(readFile(t, filepath.Join(cfg.Mountpoint, "x"))); got != "kept" {
		t.Fatalf("after remount: %q, want %q", got, "kept")
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []Config{{}, {Backing: "/a"}, {Backing: "/a", Mountpoint: "/a/"}} {
		if c.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
	if err := (Config{Backing: "/a", Mountpoint: "/b"}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestStaleMount(t *testing.T) {
	m, ok := staleMount(mounts.Mount{Point: "/tmp/x y/mnt", Dev: "0:95", FSType: "fuse.lazyfs", Source: FsNamePrefix + "4242"})
	if !ok || m.PID != 4242 || m.Mountpoint != "/tmp/x y/mnt" || m.Dev != "0:95" {
		t.Fatalf("staleMount = %+v, %v", m, ok)
	}
	for _, src := range []string{"/dev/sda1", FsNamePrefix + "x", FsNamePrefix + "0"} {
		if _, ok := staleMount(mounts.Mount{Point: "/", Dev: "8:1", FSType: "ext4", Source: src}); ok {
			t.Errorf("source %q taken for a lazyfs mount", src)
		}
	}
}

// TestFS_KilledWriterLosesUnsyncedAndRestarts is the node life cycle: a
// process writes (some fsynced, some not), is killed, the power is lost,
// and a new process runs on the same mount.
func TestFS_KilledWriterLosesUnsyncedAndRestarts(t *testing.T) {
	fsys := mountTest(t)
	p := filepath.Join(fsys.Mountpoint(), "log")
	w := startInteractive(t, "writer", p)
	if got := w.line(t); got != "ready" {
		t.Fatalf("writer: %q", got)
	}
	if got := string(readFile(t, p)); got != "SSSSSUUUUU" {
		t.Fatalf("while running: %q", got)
	}
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	w.cmd.Wait()
	lose(t, fsys)
	if got := string(readFile(t, p)); got != "SSSSS" {
		t.Fatalf("after kill and loss: %q, want only the fsynced records", got)
	}
	w2 := startInteractive(t, "writer", p)
	if got := w2.line(t); got != "ready" {
		t.Fatalf("restarted writer: %q", got)
	}
	if got := string(readFile(t, p)); got != "SSSSSSSSSSUUUUU" {
		t.Fatalf("after restart: %q", got)
	}
}

// TestCleanupStale kills a process serving a mount and checks that
// CleanupStale removes the mount it left behind.
func TestCleanupStale(t *testing.T) {
	testenv.Require(t, Available())
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	srv := startInteractive(t, "serve", filepath.Join(dir, "b"), mnt)
	if got := srv.line(t); got != "ready" {
		t.Fatalf("serve helper: %q", got)
	}
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Wait()
	if !mounted(t, mnt) {
		t.Fatal("the killed server's mount is already gone; nothing to clean")
	}
	removed, err := CleanupStale(srv.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if mounted(t, mnt) {
		t.Fatalf("stale mount still there; removed %v", removed)
	}
}

func mounted(t testing.TB, mnt string) bool {
	t.Helper()
	ok, err := mounts.Mounted(mnt)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// With the writeback model a file dirty for longer than the age is
// written back and survives a power loss; a file written just before the
// loss does not, and neither does a change made after the writeback.
func TestFS_WritebackModelKeepsWhatTheFlusherWroteBack(t *testing.T) {
	testenv.Require(t, Available())
	dir := t.TempDir()
	cfg := Config{Backing: filepath.Join(dir, "backing"), Mountpoint: filepath.Join(dir, "mnt"),
		WritebackAge: 300 * time.Millisecond, WritebackInterval: 50 * time.Millisecond}
	fsys, err := Mount(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	if got, want := cfg.Model(), "writeback-300ms"; got != want {
		t.Errorf("model %q, want %q", got, want)
	}
	old, young := filepath.Join(fsys.Mountpoint(), "old"), filepath.Join(fsys.Mountpoint(), "young")
	f := openRW(t, old, os.O_CREATE)
	mustWrite(t, f, []byte("old data|"), 0)
	deadline := time.Now().Add(10 * time.Second)
	for string(readFile(t, filepath.Join(fsys.Backing(), "old"))) != "old data|" {
		if time.Now().After(deadline) {
			t.Fatalf("the flusher never wrote the old file back; stats %+v", fsys.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := fsys.Stats(); st.Writebacks < 1 || st.Fsyncs != 0 {
		t.Errorf("stats %+v, want a writeback and no fsync", st)
	}
	mustWrite(t, f, []byte("appended"), 9)
	f.Close()
	g := openRW(t, young, os.O_CREATE)
	mustWrite(t, g, []byte("young"), 0)
	g.Close()
	l := lose(t, fsys)
	if l.Files != 2 {
		t.Errorf("loss %+v, want the two files' young changes", l)
	}
	if got := string(readFile(t, old)); got != "old data|" {
		t.Errorf("old file after the loss: %q, want what was written back", got)
	}
	if got := string(readFile(t, young)); got != "" {
		t.Errorf("young file after the loss: %q, want nothing", got)
	}
}

func TestConfig_ModelIsWorstCaseWithoutWriteback(t *testing.T) {
	if got := (Config{}).Model(); got != "worst-case" {
		t.Errorf("model %q", got)
	}
	if err := (Config{Backing: "a", Mountpoint: "b", WritebackAge: -1}).Validate(); err == nil {
		t.Error("a negative writeback age was accepted")
	}
}
