package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Available reports whether namespaces and iptables partitions can be
// made here: root, `ip` (iproute2) and `iptables`. The error says what to
// install.
func Available() error {
	var missing []string
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "iproute2")
	}
	_, errNft := exec.LookPath("iptables")
	_, errLegacy := exec.LookPath("iptables-legacy")
	if errNft != nil && errLegacy != nil {
		missing = append(missing, "iptables")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s (install with: apt-get install %s)",
			ErrUnavailable, strings.Join(missing, " and "), strings.Join(missing, " "))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: network namespaces and iptables need root", ErrUnavailable)
	}
	return nil
}

// CleanupStale deletes namespaces named by this package whose creating
// process is gone (left by a crashed run), after killing any process
// still inside. With owner > 0 it considers only namespaces that process
// created. It returns the names it removed.
func CleanupStale(ctx context.Context, owner int) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("netns: list: %w", err)
	}
	var removed []string
	var errs []error
	for _, name := range parseList(string(out)) {
		pid, ok := ownerPID(name)
		if !ok || alive(pid) || (owner > 0 && pid != owner) {
			continue
		}
		if err := remove(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// parseList takes the names out of `ip netns list` ("name (id: 3)").
func parseList(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// ownerPID parses "raftq-<pid>-<random>".
func ownerPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	return pid, err == nil && pid > 0
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
