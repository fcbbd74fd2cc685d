package raftgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// The node WAL crash loop runs a shared WAL in a child process (this test
// binary again): several goroutines, one per group, save entries of
// random sizes, snapshot now and then, and report every save that
// returned (durable). The parent kills the child with SIGKILL after a
// random number of reports, often in the middle of a batch of several
// groups' records or of a checkpoint, reopens the WAL and checks each
// group: every reported entry is there with its own bytes, entries run on
// from the snapshot without a gap, and the commit index is within them.
// The next child carries on from what the replay gave back.

const nodeCrashDirEnv = "RAFTQ_NODEWAL_CRASH_DIR"

const (
	crashGroups     = 6
	crashIterations = 12
)

func crashEntryData(group, index uint64) []byte {
	rng := rand.New(rand.NewPCG(group, index))
	b := make([]byte, 16+rng.IntN(6<<10))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return fmt.Appendf(b[:0], "%d/%d/", group, index)[:len(b)]
}

func TestNodeLog_CrashLoop(t *testing.T) {
	if dir := os.Getenv(nodeCrashDirEnv); dir != "" {
		runNodeCrashChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := filepath.Join(t.TempDir(), "wal")
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 2))
	durable := map[uint64]uint64{}
	for it := range crashIterations {
		reported, err := runNodeCrashChild1(dir, 1+rng.IntN(300))
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		for g, i := range reported {
			durable[g] = max(durable[g], i)
		}
		verifyNodeCrash(t, dir, durable)
	}
}

// runNodeCrashChild1 starts a child, kills it after `after` reports and
// returns the highest durable index it reported per group.
func runNodeCrashChild1(dir string, after int) (map[uint64]uint64, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestNodeLog_CrashLoop$", "-test.count=1")
	cmd.Env = append(os.Environ(), nodeCrashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	reported := map[uint64]uint64{}
	seen := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() && seen < after {
		line := sc.Text()
		if msg, ok := strings.CutPrefix(line, "crash-child error: "); ok {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("child: %s\n%s", msg, stderr.String())
		}
		var g, i uint64
		if _, err := fmt.Sscanf(line, "saved %d %d", &g, &i); err == nil {
			reported[g] = max(reported[g], i)
			seen++
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return reported, nil
}

// verifyNodeCrash reopens the crashed WAL and checks every group.
func verifyNodeCrash(t *testing.T, dir string, durable map[uint64]uint64) {
	t.Helper()
	l := openTestLog(t, dir)
	defer l.close()
	for g := uint64(1); g <= crashGroups; g++ {
		hs, snap, es, err := l.claim(g)
		if err != nil {
			t.Fatal(err)
		}
		next := snap.GetIndex() + 1
		for _, e := range es {
			if e.GetIndex() != next {
				t.Fatalf("group %d: entry %d after %d: a gap or a repeat", g, e.GetIndex(), next-1)
			}
			if !bytes.Equal(e.GetData(), crashEntryData(g, e.GetIndex())) {
				t.Fatalf("group %d: entry %d holds other bytes", g, e.GetIndex())
			}
			next++
		}
		last := next - 1
		if last < durable[g] {
			t.Fatalf("group %d: replay ends at %d, but %d was reported durable", g, last, durable[g])
		}
		if c := hs.GetCommit(); c > last || c < snap.GetIndex() {
			t.Fatalf("group %d: commit %d outside [snapshot %d, last %d]", g, c, snap.GetIndex(), last)
		}
	}
}

// runNodeCrashChild is the child: it carries on every group from what the
// WAL replays and saves until it is killed.
func runNodeCrashChild(t *testing.T, dir string) {
	SetWALSegmentSize(64 << 10)
	fail := func(err error) {
		fmt.Printf("crash-child error: %v\n", err)
		os.Exit(1)
	}
	l, err := openNodeLog(dir, walMetadata(1, HostGroupID), FsyncAlways, zap.NewNop(), nil, nil)
	if err != nil {
		fail(err)
	}
	var mu sync.Mutex // one line at a time on stdout
	var wg sync.WaitGroup
	for g := uint64(1); g <= crashGroups; g++ {
		_, snap, es, err := l.claim(g)
		if err != nil {
			fail(err)
		}
		last := snap.GetIndex()
		if len(es) > 0 {
			last = es[len(es)-1].GetIndex()
		}
		wg.Go(func() { crashSaver(l, g, last, &mu, fail) })
	}
	wg.Wait()
}

func crashSaver(l *nodeLog, g, last uint64, mu *sync.Mutex, fail func(error)) {
	for i := last + 1; ; i++ {
		e := ents(1, i, i)[0]
		e.Data = crashEntryData(g, i)
		if err := l.save(g, hardState(1, 1, i-1), []*raftpb.Entry{e}, true); err != nil {
			fail(err)
		}
		if i%40 == 0 {
			if err := l.saveSnapshot(g, walSnap(i-10, 1), false); err != nil {
				fail(err)
			}
			l.release(g, i-10)
		}
		mu.Lock()
		fmt.Printf("saved %d %d\n", g, i)
		mu.Unlock()
	}
}
