package lazyfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary run a helper instead of the tests. A
// process must never mmap files of a FUSE mount it serves itself (a page
// fault holds its mm lock while it waits for its own server, which may
// need that lock), so mmap users and badger run as child processes.
const helperEnv = "LAZYFS_TEST_HELPER"

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		if err := runHelper(name, os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "helper %s: %v\n", name, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runHelper(name string, args []string) error {
	switch name {
	case "serve":
		return helperServe(args[0], args[1])
	case "mmap":
		return helperMmap(args[0])
	case "badger-write", "badger-read":
		return helperBadger(name, args[0])
	case "writer":
		return helperWriter(args[0])
	}
	return fmt.Errorf("unknown helper")
}

// helperCmd builds a command running helper name with args.
func helperCmd(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// runHelperOK runs a helper to completion and fails t if it fails.
func runHelperOK(t testing.TB, name string, args ...string) {
	t.Helper()
	if err := helperCmd(t, name, args...).Run(); err != nil {
		t.Fatalf("helper %s %v: %v", name, args, err)
	}
}

// interactive is a helper driven line by line over its stdin and stdout.
type interactive struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startInteractive(t testing.TB, name string, args ...string) *interactive {
	t.Helper()
	cmd := helperCmd(t, name, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &interactive{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

// line reads the helper's next output line.
func (h *interactive) line(t testing.TB) string {
	t.Helper()
	s, err := h.out.ReadString('\n')
	if err != nil {
		t.Fatalf("read from helper: %v", err)
	}
	return strings.TrimSuffix(s, "\n")
}

func (h *interactive) ask(t testing.TB, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(h.in, cmd); err != nil {
		t.Fatalf("write to helper: %v", err)
	}
	return h.line(t)
}

// helperServe mounts a lazyfs and serves it until killed.
func helperServe(backing, mnt string) error {
	fsys, err := Mount(Config{Backing: backing, Mountpoint: mnt})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	return fsys.Unmount()
}

// helperMmap maps a file read-only and shared, and answers "peek N" with
// the first N mapped bytes.
func helperMmap(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "peek "))
		if err != nil {
			return err
		}
		fmt.Printf("%s\n", m[:n])
	}
	return nil
}

func helperBadger(mode, dir string) error {
	opts := badger.DefaultOptions(dir).WithLogger(nil).
		WithMemTableSize(4 << 20).WithValueLogFileSize(4 << 20).WithValueThreshold(1 << 10)
	db, err := badger.Open(opts)
	if err != nil {
		return err
	}
	defer db.Close()
	if mode == "badger-write" {
		return db.Update(func(txn *badger.Txn) error {
			for i := 0; i < 200; i++ {
				if err := txn.Set([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("v%d", i))); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return db.View(func(txn *badger.Txn) error {
		for i := 0; i < 200; i++ {
			item, err := txn.Get([]byte(fmt.Sprintf("k%03d", i)))
			if err != nil {
				return fmt.Errorf("get k%03d: %w", i, err)
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("v%d", i); !bytes.Equal(v, []byte(want)) {
				return fmt.Errorf("k%03d = %q, want %q", i, v, want)
			}
		}
		return nil
	})
}

// helperWriter appends "S" records with an fsync after each, then "U"
// records with none, says "ready" and waits to be killed.
func helperWriter(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	for i := 0; i < 5; i++ {
		if _, err := f.WriteString("S"); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	for i := 0; i < 5; i++ {
		if _, err := f.WriteString("U"); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	select {}
}
