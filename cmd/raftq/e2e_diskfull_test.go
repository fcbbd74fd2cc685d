package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/mounts"
)

// TestE2E_DiskFull puts node data dirs on tmpfs mounts too small for the
// load a franz-go idempotent acks=all producer sends. A node whose disk
// fills must stop with a clear error instead of carrying on after a
// failed write. Given room and restarted, it catches up: every
// acknowledged record is read back exactly once and in order, and its
// segments hold the same bytes as the others'.
//
//   - one-node: node 3 fills; the other two go on committing meanwhile.
//   - every-node: all three fill; once two have stopped nothing commits,
//     and the producer's records wait until the nodes are back.
func TestE2E_DiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs as root)")
	}
	sweepLeakedTmpfs(t)
	t.Run("one-node", func(t *testing.T) { runDiskFull(t, []int{3}) })
	t.Run("every-node", func(t *testing.T) { runDiskFull(t, []int{1, 2, 3}) })
}

func runDiskFull(t *testing.T, small []int) {
	dirs := map[int]string{}
	c := e2eClusterWith(t, 3, func(c *chaos.Cluster) {
		for _, id := range small {
			n, err := c.Node(id)
			if err != nil {
				t.Fatal(err)
			}
			dirs[id] = n.DataDir
			mountTmpfs(t, n.DataDir, 20<<20)
		}
	})
	const topic = "diskfull"
	const parts = 3
	createTopic(t, c, topic, parts, 3, nil)
	ld := startLoad(t, c, topic, failoverLoad{parts: parts, maxRecords: 60000, loadTimeout: 90 * time.Second, valueBytes: 1024})

	// Until a quorum is gone, or the one small node has stopped.
	want := min(len(small), 2)
	waitFor(t, 90*time.Second, fmt.Sprintf("%d node(s) to stop on a full disk", want), func(context.Context) bool {
		return len(stopped(c)) >= want
	})
	down := stopped(c)
	for _, id := range down {
		checkDiskFullLogged(t, c, id)
	}
	if len(down) < 2 {
		for p := range int32(parts) {
			ld.awaitAcked(t, p, ld.ackedOn(p)+300) // the others commit on
		}
	}

	// Every node whose disk filled is restarted once there is room, also
	// one still running: etcd's failed preallocation of its next segment
	// is sticky, so it would stop at its next cut anyway. From here on no
	// node may exit on its own.
	for _, dir := range dirs {
		remountTmpfs(t, dir, 512<<20)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	restarted := map[int]bool{} // pids with room on their disk
	for id := range dirs {
		if c.Running(id) {
			if err := c.Kill(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Start(ctx, id); err != nil {
			t.Fatalf("restart node %d with room on its disk: %v", id, err)
		}
		restarted[c.PID(id)] = true
	}
	for p := range int32(parts) {
		ld.awaitAcked(t, p, ld.ackedOn(p)+300)
	}
	sent, acked, failed := ld.stop(t)
	t.Logf("sent %d, acknowledged %d, failed %d", countAll(sent), len(acked), failed)
	if failed > 0 {
		t.Errorf("%d records failed: they should have waited for room", failed)
	}
	for p := range int32(parts) {
		got, _ := readPartition(t, c, topic, p)
		checkLog(t, fmt.Sprintf("%s-%d", topic, p), got, sent[p], acked)
	}
	for p := range int32(parts) {
		n := waitReplicasEqual(t, c, topic, p, c.NodeIDs())
		t.Logf("%s-%d: %d log bytes identical on nodes %v", topic, p, n, c.NodeIDs())
	}
	for _, e := range c.Crashes() {
		_, small := dirs[e.Node]
		if !small || restarted[e.PID] || e.Err != "exit status 1" {
			t.Errorf("node %d (pid %d) exited on its own (%s) with room on its disk, or not as a stop", e.Node, e.PID, e.Err)
		}
	}
}

// stopped returns the nodes not running.
func stopped(c *chaos.Cluster) []int {
	var ids []int
	for _, id := range c.NodeIDs() {
		if !c.Running(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// checkDiskFullLogged checks that node id's last run ended with the
// line that stops a node, naming the full disk, and logs that line.
func checkDiskFullLogged(t *testing.T, c *chaos.Cluster, id int) {
	t.Helper()
	n, _ := c.Node(id)
	logged, _ := os.ReadFile(n.LogPath)
	if i := bytes.LastIndex(logged, []byte("=== chaos: starting node")); i >= 0 {
		logged = logged[i:]
	}
	for _, line := range bytes.Split(logged, []byte("\n")) {
		if bytes.Contains(line, []byte("exiting")) && bytes.Contains(line, []byte("no space left on device")) {
			t.Logf("node %d: %s", id, line)
			return
		}
	}
	t.Fatalf("node %d stopped without saying that its disk is full:\n%s", id, tail(logged, 3000))
}

// mountTmpfs mounts a tmpfs of size bytes on dir until the test's nodes
// have stopped (call it from an e2eClusterWith prepare).
func mountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	err := syscall.Mount(tmpfsSource(os.Getpid()), dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size))
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("mount a tmpfs: %v (root without CAP_SYS_ADMIN)", err)
	}
	if err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// tmpfsSource names the mounts of test process pid, so that a later run
// can find them if that process was killed before its cleanup (the mounts
// are made in the host's mount namespace, and would outlive it, holding
// their memory).
func tmpfsSource(pid int) string { return fmt.Sprintf("raftq-test-tmpfs-%d", pid) }

// sweepLeakedTmpfs unmounts the tmpfs mounts that tmpfsSource names for a
// process no longer running.
func sweepLeakedTmpfs(t *testing.T) {
	t.Helper()
	table, err := mounts.Table()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range table {
		pidStr, ok := strings.CutPrefix(m.Source, "raftq-test-tmpfs-")
		pid, err := strconv.Atoi(pidStr)
		if m.FSType != "tmpfs" || !ok || err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if err := syscall.Unmount(m.Point, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s, left by test process %d: %v", m.Point, pid, err)
			continue
		}
		t.Logf("unmounted %s, left mounted by test process %d", m.Point, pid)
	}
}

// remountTmpfs resizes the tmpfs on dir, keeping its files.
func remountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("resize the tmpfs on %s: %v", dir, err)
	}
}

// A tmpfs left mounted by a killed test process is unmounted by the next
// run; one whose process still runs (this one) is left alone.
func TestSweepLeakedTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs as root)")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	leaked, live := t.TempDir(), t.TempDir()
	if err := syscall.Mount(tmpfsSource(gone.Process.Pid), leaked, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(leaked, syscall.MNT_DETACH) })
	mountTmpfs(t, live, 1<<20)
	sweepLeakedTmpfs(t)
	if isMountPoint(t, leaked) || !isMountPoint(t, live) {
		t.Errorf("after the sweep: the dead process's tmpfs mounted %v, the live one's %v; want false and true",
			isMountPoint(t, leaked), isMountPoint(t, live))
	}
}

func isMountPoint(t *testing.T, dir string) bool {
	ok, err := mounts.Mounted(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
