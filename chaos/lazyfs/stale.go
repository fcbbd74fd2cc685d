package lazyfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/raftq/raftq/internal/mounts"
)

// ErrUnavailable means FUSE cannot be used on this machine.
var ErrUnavailable = errors.New("lazyfs: FUSE unavailable")

// Available reports whether this process can serve a FUSE mount: it needs
// /dev/fuse and root (lazyfs mounts with mount(2) directly).
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("%w: open /dev/fuse: %w (install fuse3: apt-get install fuse3; in a container, pass --device /dev/fuse)", ErrUnavailable, err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: mounting needs root", ErrUnavailable)
	}
	return nil
}

// StaleMount is one lazyfs mount found in the mount table.
type StaleMount struct {
	Mountpoint string
	PID        int    // the process that served it
	Dev        string // "major:minor"; the minor names the FUSE connection
}

// CleanupStale removes every lazyfs mount whose serving process is gone
// (left by a crashed run): it aborts the FUSE connection, which fails any
// request still waiting on the dead server (a process stuck in
// uninterruptible sleep on it can then exit), and detaches the mount.
// With owner > 0 it considers only mounts that process served. It
// returns what it removed.
func CleanupStale(owner int) ([]StaleMount, error) {
	mounts, err := lazyMounts()
	if err != nil {
		return nil, err
	}
	var removed []StaleMount
	var errs []error
	for _, m := range mounts {
		if processAlive(m.PID) || (owner > 0 && m.PID != owner) {
			continue
		}
		abortConnection(m.Dev)
		if err := syscall.Unmount(m.Mountpoint, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount stale %s: %w", m.Mountpoint, err))
			continue
		}
		removed = append(removed, m)
	}
	return removed, errors.Join(errs...)
}

// lazyMounts lists lazyfs mounts of this mount namespace.
func lazyMounts() ([]StaleMount, error) {
	table, err := mounts.Table()
	if err != nil {
		return nil, err
	}
	var out []StaleMount
	for _, m := range table {
		if sm, ok := staleMount(m); ok {
			out = append(out, sm)
		}
	}
	return out, nil
}

// staleMount picks a lazyfs mount out of the mount table, by the source
// name its serving process gave it (FsNamePrefix and its pid).
func staleMount(m mounts.Mount) (StaleMount, bool) {
	if !strings.HasPrefix(m.Source, FsNamePrefix) {
		return StaleMount{}, false
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(m.Source, FsNamePrefix))
	if err != nil || pid <= 0 {
		return StaleMount{}, false
	}
	return StaleMount{Mountpoint: m.Point, PID: pid, Dev: m.Dev}, true
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// abortConnection aborts FUSE connection dev ("0:41" is connection 41)
// through fusectl, mounting fusectl first if needed. Best effort: a
// connection whose server died is usually gone already.
func abortConnection(dev string) {
	_, minor, ok := strings.Cut(dev, ":")
	if !ok {
		return
	}
	const ctl = "/sys/fs/fuse/connections"
	abort := ctl + "/" + minor + "/abort"
	if _, err := os.Stat(abort); err != nil {
		_ = syscall.Mount("fusectl", ctl, "fusectl", 0, "")
	}
	_ = os.WriteFile(abort, []byte("1"), 0)
}
