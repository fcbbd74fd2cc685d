package raftgroup

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// recordEnds returns the offset after each record of one WAL segment.
func recordEnds(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	var out []int64
	for {
		rec := &walpb.Record{}
		if err := dec.Decode(rec); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if rec.GetType() == wal.CrcType {
			dec.UpdateCRC(rec.GetCrc())
		}
		out = append(out, dec.LastOffset())
	}
}

// filledLog writes records of groups 1 and 2 in 64 KiB segments until
// there are three, eight more into the last, and closes the log.
func filledLog(t *testing.T) (dir string, names []string) {
	t.Helper()
	useWALSegmentSize(t, 64<<10)
	dir = filepath.Join(t.TempDir(), "wal")
	l := openTestLog(t, dir)
	big := make([]byte, 3000)
	for i := range big {
		if i < 1000 || i >= 2100 { // zeros in between: etcd takes a damaged record holding a zero sector for torn
			big[i] = byte(i%200 + 1)
		}
	}
	more := 8 // records in the last segment
	next := map[uint64]uint64{1: 1, 2: 1}
	for i := uint64(1); more > 0; i++ {
		g := 1 + i%2
		e := &raftpb.Entry{Term: new(uint64(1)), Index: new(next[g]), Data: big}
		mustSave(t, l, g, hardState(1, 1, next[g]-1), []*raftpb.Entry{e})
		next[g]++
		if names, _ = sortedNames(dir, ".wal"); len(names) >= 3 {
			more--
		}
	}
	l.close()
	return dir, names
}

// TestNodeLog_DamageIsRefused damages the node WAL in the ways a torn
// write cannot: a flipped bit in a record, a segment cut at a record
// boundary or inside a record, the last one too (etcd never leaves a
// segment shorter than its preallocated size: a crash does not shorten
// it, a truncation does). Each must refuse to open with a WALDamageError naming the
// segment and the way out, rather than replay what is left.
func TestNodeLog_DamageIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		seg    int // which segment
		damage func(t *testing.T, path string)
	}{
		{"bit in a middle record", 1, func(t *testing.T, path string) {
			ends := recordEnds(t, path)
			flipAt(t, path, ends[len(ends)/2]+100)
		}},
		{"first segment cut at a record boundary", 0, func(t *testing.T, path string) {
			ends := recordEnds(t, path)
			truncate(t, path, ends[len(ends)-3])
		}},
		{"middle segment cut inside a record", 1, func(t *testing.T, path string) {
			ends := recordEnds(t, path)
			truncate(t, path, ends[len(ends)-2]+50)
		}},
		{"last segment cut at a record boundary", 2, func(t *testing.T, path string) {
			ends := recordEnds(t, path)
			truncate(t, path, ends[len(ends)-1])
		}},
		{"last segment cut inside a record", 2, func(t *testing.T, path string) {
			ends := recordEnds(t, path)
			truncate(t, path, ends[len(ends)-1]-40)
		}},
		{"bit in a last-segment record with records after it", 2, func(t *testing.T, path string) {
			ends := recordEnds(t, path)
			flipAt(t, path, ends[len(ends)-4]+60) // records follow it: no torn write
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, names := filledLog(t)
			tc.damage(t, filepath.Join(dir, names[tc.seg]))
			l, err := openNodeLog(dir, walMetadata(1, HostGroupID), FsyncAlways, zap.NewNop(), nil, nil)
			if err == nil {
				l.close()
				t.Fatal("a damaged WAL opened")
			}
			var de *WALDamageError
			if !errors.As(err, &de) || de.File != names[tc.seg] {
				t.Fatalf("open = %v, want a WALDamageError naming %s", err, names[tc.seg])
			}
			if !strings.Contains(err.Error(), "raftq cluster remove N") {
				t.Errorf("error %q does not say how to repair", err)
			}
		})
	}
}

// TestNodeLog_TornTailRepairsAndStaysOpenable: wal.Repair cuts a torn
// last record, and the segment grows back to its preallocated size, so
// that the next open does not take the repair for a truncation; a raised
// segment size is no truncation either.
func TestNodeLog_TornTailRepairsAndStaysOpenable(t *testing.T) {
	dir, names := filledLog(t)
	last := filepath.Join(dir, names[len(names)-1])
	ends := recordEnds(t, last)
	f, err := os.OpenFile(last, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A torn write: the last record's second half never reached the disk.
	from := ends[len(ends)-2] + (ends[len(ends)-1]-ends[len(ends)-2])/2
	if _, err := f.WriteAt(make([]byte, ends[len(ends)-1]-from), from); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for range 2 {
		l, err := openNodeLog(dir, walMetadata(1, HostGroupID), FsyncAlways, zap.NewNop(), nil, nil)
		if err != nil {
			t.Fatalf("open after a torn write: %v", err)
		}
		l.close()
		if st, err := os.Stat(last); err != nil || st.Size() < wal.SegmentSizeBytes {
			t.Fatalf("last segment after the repair: %v, %v", st.Size(), err)
		}
	}
	SetWALSegmentSize(1 << 20)
	l, err := openNodeLog(dir, walMetadata(1, HostGroupID), FsyncAlways, zap.NewNop(), nil, nil)
	if err != nil {
		t.Fatalf("open with a raised segment size: %v", err)
	}
	l.close()
}

func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}
