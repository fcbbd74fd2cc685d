package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

// TestE2E_DiskFullNodeStopsAndCatchesUp gives node 3 of a 3-node cluster
// a data dir on a tmpfs too small for the load it gets. When the disk
// fills, node 3 must stop with a clear error instead of carrying on after
// a failed write, and the other two must go on committing. Given room and
// restarted, node 3 catches up: every acknowledged record is read back
// exactly once and in order, and node 3's segments hold the same bytes as
// the others'.
func TestE2E_DiskFullNodeStopsAndCatchesUp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs as root)")
	}
	var full string
	c := e2eClusterWith(t, 3, func(c *chaos.Cluster) {
		n, err := c.Node(3)
		if err != nil {
			t.Fatal(err)
		}
		full = n.DataDir
		mountTmpfs(t, full, 20<<20)
	})
	const topic = "diskfull"
	const parts = 3
	createTopic(t, c, topic, parts, 3, nil)
	ld := startLoad(t, c, topic, failoverLoad{parts: parts, maxRecords: 60000, loadTimeout: 90 * time.Second, valueBytes: 1024})

	waitFor(t, 90*time.Second, "node 3 to stop on its full disk", func(context.Context) bool { return !c.Running(3) })
	n3, _ := c.Node(3)
	logged, _ := os.ReadFile(n3.LogPath)
	i := bytes.Index(logged, []byte("no space left on device"))
	if i < 0 || !bytes.Contains(logged, []byte("exiting")) {
		t.Fatalf("node 3 stopped without saying that its disk is full:\n%s", tail(logged, 3000))
	}
	start := bytes.LastIndexByte(logged[:i], '\n') + 1
	end := i + bytes.IndexByte(logged[i:], '\n')
	t.Logf("node 3: %s", logged[start:max(end, i)])
	for p := range int32(parts) {
		ld.awaitAcked(t, p, ld.ackedOn(p)+300) // the other two commit on
	}

	remountTmpfs(t, full, 512<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx, 3); err != nil {
		t.Fatalf("restart node 3 with room on its disk: %v", err)
	}
	for p := range int32(parts) {
		ld.awaitAcked(t, p, ld.ackedOn(p)+300)
	}
	sent, acked, failed := ld.stop(t)
	t.Logf("sent %d, acknowledged %d, failed %d", countAll(sent), len(acked), failed)
	if failed > 0 {
		t.Errorf("%d records failed: the two nodes with room should have taken them", failed)
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
		if e.Node != 3 {
			t.Errorf("node %d (pid %d) exited on its own: %s", e.Node, e.PID, e.Err)
		}
	}
}

// mountTmpfs mounts a tmpfs of size bytes on dir until the test's nodes
// have stopped (call it from an e2eClusterWith prepare).
func mountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// remountTmpfs resizes the tmpfs on dir, keeping its files.
func remountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("resize the tmpfs on %s: %v", dir, err)
	}
}
