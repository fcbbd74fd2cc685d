package partition

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The crash loop runs the log in a child process (this test binary again),
// which appends, syncs, rolls and applies retention and reports on stdout
// every offset it has synced. The parent kills it with SIGKILL at a random
// point (often mid-append or mid-roll, sometimes mid-recovery), reopens the
// log, and checks that every synced batch is there byte for byte, that
// every batch is valid and where it belongs, and that the log takes new
// appends. The next child then recovers the same directory.

const (
	crashDirEnv = "RAFTQ_PARTITION_CRASH_DIR"
	// crashAtEnv tells the child to kill itself: "point:<name>:<k>" at the
	// k-th pass through a named crash point, or "torn:<k>" in the middle of
	// its k-th segment write, after writing a random part of it.
	crashAtEnv = "RAFTQ_PARTITION_CRASH_AT"
)

// crashPoints are the named points in the log's multi-step operations.
var crashPoints = []string{
	"append-prefix-written", "roll-indexes-written", "roll-segment-created",
	"sync-segment", "sync-dir", "checkpoint-tmp-written",
	"truncate-checkpointed", "truncate-segment-removed", "advance-segment-removed",
	"recover-segment-cut", "recover-segment-removed",
}

func crashConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 10
	c.MaxBatchBytes = 16 << 10
	c.IndexIntervalBytes = 1024
	c.RetentionBytes = 512 << 10
	c.RetentionAge = 0
	return c
}

// crashBatch is the batch the child appends at base: a function of base
// alone, so the parent can tell what must be there.
func crashBatch(tb testing.TB, base int64) ([]byte, int32) {
	rng := rand.New(rand.NewPCG(uint64(base), 77))
	n := 1 + rng.IntN(8)
	recs := make([]testRecord, n)
	for i := range recs {
		v := make([]byte, rng.IntN(1500))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		recs[i] = testRecord{ts: base*10 + int64(i), value: v}
	}
	return makeBatch(tb, batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1}), int32(base % 5)
}

func TestLog_CrashLoop(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		runCrashChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	durable := int64(0)
	for it := range crashIterations {
		at := ""
		switch rng.IntN(3) {
		case 0:
			at = fmt.Sprintf("point:%s:%d", crashPoints[rng.IntN(len(crashPoints))], 1+rng.IntN(5))
		case 1:
			at = fmt.Sprintf("torn:%d", 1+rng.IntN(100))
		}
		synced, err := runAndKill(t, dir, at, rng.IntN(40))
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		durable = max(durable, synced)
		// Half the time the next child recovers the crashed log itself, so
		// that crashes inside recovery happen too.
		if rng.IntN(2) == 0 || it == crashIterations-1 {
			verifyCrashedLog(t, dir, at, durable)
		}
	}
}

// runAndKill starts a child and kills it after it reports `after` syncs
// (after 0: as soon as it starts opening the log), unless it kills itself
// first as `at` says. It returns the highest synced offset the child
// reported.
func runAndKill(t *testing.T, dir, at string, after int) (int64, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLog_CrashLoop$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashAtEnv+"="+at)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	synced, seen := int64(0), 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if msg, ok := strings.CutPrefix(line, "crash-child error: "); ok {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, fmt.Errorf("child: %s\n%s", msg, stderr.String())
		}
		if v, ok := strings.CutPrefix(line, "synced "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			synced, seen = n, seen+1
		}
		if (after == 0 && line == "opening") || (after > 0 && seen >= after) {
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return synced, nil
}

func verifyCrashedLog(t *testing.T, dir, at string, durable int64) {
	t.Helper()
	cfg := crashConfig()
	var logBuf bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open after kill: %v", err)
	}
	defer l.Close()
	t.Logf("%s: synced %d, recovered [%d, %d) in %d segments; recovery: %s", at, durable, l.StartOffset(), l.EndOffset(), len(l.Segments()), strings.TrimSpace(logBuf.String()))

	if end := l.EndOffset(); end < durable {
		t.Fatalf("log ends at %d, but the child synced up to %d", end, durable)
	}
	for _, b := range readAll(t, l) {
		info, err := ValidateBatch(b, 1<<20)
		if err != nil {
			t.Fatalf("invalid batch after kill: %v", err)
		}
		want, epoch := crashBatch(t, info.BaseOffset)
		if !bytes.Equal(b, stamped(want, info.BaseOffset, epoch)) {
			t.Fatalf("batch at %d is not the one the child appended there", info.BaseOffset)
		}
	}
}

// runCrashChild appends until killed (or a generous bound), reporting each
// sync, sometimes truncating its unsynced tail and applying retention.
// Output lines: "opening", "opened S E", "synced N", or
// "crash-child error: ...".
func runCrashChild(t *testing.T, dir string) {
	fail := func(err error) {
		fmt.Printf("crash-child error: %v\n", err)
		os.Exit(1)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 2))
	cfg := crashConfig()
	if err := armCrash(&cfg, os.Getenv(crashAtEnv), rng); err != nil {
		fail(err)
	}
	fmt.Println("opening")
	l, err := Open(dir, cfg)
	if err != nil {
		fail(err)
	}
	fmt.Printf("opened %d %d\n", l.StartOffset(), l.EndOffset())
	synced := l.EndOffset()
	for range 20000 {
		if err := crashChildStep(t, l, rng, &synced); err != nil {
			fail(err)
		}
	}
	fail(fmt.Errorf("not killed"))
}

func crashChildStep(t *testing.T, l *Log, rng *rand.Rand, synced *int64) error {
	b, epoch := crashBatch(t, l.EndOffset())
	if _, _, err := l.Append(b, epoch); err != nil {
		return err
	}
	switch rng.IntN(20) {
	case 0, 1, 2, 3, 4, 5:
		if err := l.Sync(); err != nil {
			return err
		}
		*synced = l.EndOffset()
		if err := l.SetHighWatermark(*synced); err != nil {
			return err
		}
		fmt.Printf("synced %d\n", *synced)
	case 6:
		// Drop the unsynced tail, as a replica drops uncommitted entries.
		if _, err := l.Truncate(*synced); err != nil {
			return err
		}
	case 7:
		if _, err := l.ApplyRetention(); err != nil {
			return err
		}
	}
	return nil
}

// armCrash sets up the child's own death as crashAtEnv describes.
func armCrash(cfg *Config, at string, rng *rand.Rand) error {
	die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	parts := strings.Split(at, ":")
	switch parts[0] {
	case "":
		return nil
	case "point":
		k, _ := strconv.Atoi(parts[2])
		cfg.crashPoint = func(name string) {
			if name == parts[1] {
				if k--; k == 0 {
					die()
				}
			}
		}
	case "torn":
		k, _ := strconv.Atoi(parts[1])
		fsys := newFaultFS()
		fsys.write = func(name string, p []byte, off int64) (int, error) {
			if strings.HasSuffix(name, logSuffix) {
				if k--; k == 0 {
					return rng.IntN(len(p)), errTornWrite
				}
			}
			return len(p), nil
		}
		fsys.afterWrite = func(err error) {
			if err == errTornWrite {
				die()
			}
		}
		cfg.FS = fsys
	default:
		return fmt.Errorf("bad %s %q", crashAtEnv, at)
	}
	return nil
}

var errTornWrite = errors.New("torn write")
