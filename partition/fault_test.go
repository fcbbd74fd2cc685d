package partition

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// diskBudget makes .log writes fail with ENOSPC once budget bytes have been
// written, landing only the part of the failing write that still fits, as
// a full disk does.
func diskBudget(budget int64) func(string, []byte, int64) (int, error) {
	var used atomic.Int64
	return func(name string, p []byte, off int64) (int, error) {
		if !strings.HasSuffix(name, logSuffix) {
			return len(p), nil
		}
		left := budget - used.Load()
		if int64(len(p)) <= left {
			used.Add(int64(len(p)))
			return len(p), nil
		}
		used.Add(max(left, 0))
		return int(max(left, 0)), &pathErr{op: "write", name: name, err: syscall.ENOSPC}
	}
}

type pathErr struct {
	op, name string
	err      error
}

func (e *pathErr) Error() string { return e.op + " " + e.name + ": " + e.err.Error() }
func (e *pathErr) Unwrap() error { return e.err }

func TestLog_DiskFullIsStickyAndLeavesTheLogReadable(t *testing.T) {
	dir := t.TempDir()
	fsys := newFaultFS()
	cfg := testConfig()
	cfg.FS = fsys
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fsys.setWrite(diskBudget(5000))
	var acked [][]byte
	var appendErr error
	for i := 0; appendErr == nil; i++ {
		b := uniformBatch(t, 2, 200, int64(i))
		var base int64
		base, _, appendErr = l.Append(b, 1)
		if appendErr == nil {
			acked = append(acked, stamped(b, base, 1))
		}
	}
	if !errors.Is(appendErr, syscall.ENOSPC) || !errors.Is(appendErr, ErrFailed) {
		t.Fatalf("append on a full disk = %v, want ENOSPC wrapped in ErrFailed", appendErr)
	}
	if got := ErrorCode(appendErr); got != kerr.KafkaStorageError.Code {
		t.Errorf("ErrorCode = %d, want KAFKA_STORAGE_ERROR", got)
	}
	fsys.setWrite(nil) // space comes back; the log must still refuse
	if _, _, err := l.Append(uniformBatch(t, 1, 1, 0), 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failure = %v, want ErrFailed", err)
	}
	for _, op := range []func() error{l.Sync, l.Roll, func() error { _, err := l.Truncate(0); return err }, func() error { return l.AdvanceStart(1) }} {
		if err := op(); !errors.Is(err, ErrFailed) {
			t.Fatalf("change after the failure = %v, want ErrFailed", err)
		}
	}
	if got := readAll(t, l); !equalBatches(got, acked) {
		t.Fatalf("failed log reads %d batches, want the %d acknowledged", len(got), len(acked))
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close of a failed log: %v", err)
	}
	l = openLog(t, dir, testConfig())
	if got := readAll(t, l); !equalBatches(got, acked) {
		t.Fatalf("reopened log holds %d batches, want the %d acknowledged", len(got), len(acked))
	}
	mustAppend(t, l, uniformBatch(t, 1, 1, 0), 0)
}

// A failed fsync is sticky for Sync and for SyncData alike. SyncData marks
// files clean before it fsyncs them, so without that a later call would
// find nothing dirty and report the lost bytes durable.
func TestLog_FailedSyncIsSticky(t *testing.T) {
	for name, sync := range map[string]func(*Log) error{"Sync": (*Log).Sync, "SyncData": (*Log).SyncData} {
		t.Run(name, func(t *testing.T) {
			fsys := newFaultFS()
			cfg := testConfig()
			cfg.FS = fsys
			l := openLog(t, t.TempDir(), cfg)
			mustAppend(t, l, uniformBatch(t, 1, 10, 0), 0)
			fsys.setSync(func(string) error { return syscall.EIO })
			if err := sync(l); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrFailed) {
				t.Fatalf("%s = %v, want EIO wrapped in ErrFailed", name, err)
			}
			fsys.setSync(nil)
			if err := sync(l); !errors.Is(err, ErrFailed) {
				t.Fatalf("second %s = %v: a failed fsync must not be retried into success", name, err)
			}
			if _, _, err := l.Append(uniformBatch(t, 1, 10, 0), 0); !errors.Is(err, ErrFailed) {
				t.Fatalf("Append after failed %s = %v", name, err)
			}
			if _, err := l.Read(0, 100, 1); err != nil {
				t.Fatalf("Read after failed %s: %v", name, err)
			}
		})
	}
}

func TestLog_FailedRollIsSticky(t *testing.T) {
	fsys := newFaultFS()
	cfg := testConfig()
	cfg.FS = fsys
	l := openLog(t, t.TempDir(), cfg)
	mustAppend(t, l, uniformBatch(t, 1, 10, 0), 0)
	fsys.setWrite(func(name string, p []byte, off int64) (int, error) {
		if strings.HasSuffix(name, indexSuffix) {
			return 0, syscall.ENOSPC
		}
		return len(p), nil
	})
	if err := l.Roll(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Roll = %v, want ENOSPC", err)
	}
	if _, _, err := l.Append(uniformBatch(t, 1, 10, 0), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after failed roll = %v", err)
	}
}
