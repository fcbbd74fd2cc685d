package partition

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// batchPositions returns the file position of every batch in a segment.
func batchPositions(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for pos := int64(0); pos+12 <= int64(len(b)); {
		out = append(out, pos)
		pos += 12 + int64(binary.BigEndian.Uint32(b[pos+8:]))
	}
	return out
}

// closedLog writes 60 batches into 8 KiB segments and closes the log, so
// that the checkpoint's recovery point is its end and every segment would
// be trusted on the next open.
func closedLog(t *testing.T) (dir string, cfg Config, want [][]byte, segs []SegmentInfo) {
	t.Helper()
	dir, cfg = t.TempDir(), testConfig()
	cfg.SegmentBytes = 8192
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want = fillLog(t, l, 90)
	segs = l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	return dir, cfg, want, segs
}

// TestOpen_DamageInTrustedSegments damages segments below the recovery
// point, which recovery used to trust after a look at their index and
// tail: a flipped bit inside a batch of a sealed segment, of the active
// one, a truncated sealed segment. Recovery must cut the log at the
// damaged batch, remove every later segment, and serve nothing damaged.
func TestOpen_DamageInTrustedSegments(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  int // index in Segments
		// damage hits the segment's file, given its batch positions; it
		// returns the number of the segment's batches that stay whole.
		damage func(t *testing.T, path string, pos []int64) int
	}{
		{"bit in a sealed segment's middle batch", 1, func(t *testing.T, path string, pos []int64) int {
			flipByte(t, path, pos[2]+80) // a record value: inside the CRC
			return 2
		}},
		{"bit in the first sealed segment's first batch", 0, func(t *testing.T, path string, pos []int64) int {
			flipByte(t, path, pos[0]+70)
			return 0
		}},
		{"bit in the active segment's first batch", -1, func(t *testing.T, path string, pos []int64) int {
			flipByte(t, path, pos[0]+90)
			return 0
		}},
		{"sealed segment truncated mid-batch", 2, func(t *testing.T, path string, pos []int64) int {
			if err := os.Truncate(path, pos[3]+20); err != nil {
				t.Fatal(err)
			}
			return 3
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg, want, segs := closedLog(t)
			i := tc.seg
			if i < 0 {
				i = len(segs) - 1
			}
			kept := tc.damage(t, segs[i].Path, batchPositions(t, segs[i].Path))
			// The batches of the segments before it, then kept of its own.
			n := 0
			for _, b := range want {
				if int64(binary.BigEndian.Uint64(b)) < segs[i].Base {
					n++
				}
			}
			n += kept
			l := openLog(t, dir, cfg)
			got := readAll(t, l)
			if !equalBatches(got, want[:n]) {
				t.Fatalf("recovered %d batches, want the first %d", len(got), n)
			}
			for _, b := range got {
				if _, err := ValidateStoredBatch(b); err != nil {
					t.Fatalf("a damaged batch is served: %v", err)
				}
			}
			wantEnd := segs[i].Base
			if n > 0 {
				last := want[n-1]
				wantEnd = int64(binary.BigEndian.Uint64(last)) + int64(binary.BigEndian.Uint32(last[23:27])) + 1
			}
			if l.EndOffset() != wantEnd {
				t.Fatalf("end %d, want %d", l.EndOffset(), wantEnd)
			}
			for _, s := range segs[i+1:] {
				if _, err := os.Stat(s.Path); !os.IsNotExist(err) {
					t.Errorf("segment %d after the damage survived: %v", s.Base, err)
				}
			}
			if b, err := l.Read(wantEnd, 1<<20, wantEnd+1000); err == nil && len(b) > 0 {
				t.Errorf("Read(%d) at the cut returned %d bytes", wantEnd, len(b))
			}
			// The cut is durable: a second open finds the same log.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, cfg)
			if got := readAll(t, l); !equalBatches(got, want[:n]) {
				t.Fatalf("second open: %d batches, want %d", len(got), n)
			}
		})
	}
}

// TestOpen_DamagedIndexOfATrustedSegment flips a bit in an index entry
// that still rises, so that the old trusted check let it through and a
// read landed mid-batch: recovery rebuilds it and every read is right.
func TestOpen_DamagedIndexOfATrustedSegment(t *testing.T) {
	dir, cfg, want, segs := closedLog(t)
	ipath := segFile(dir, segs[1].Base, indexSuffix)
	ib, err := os.ReadFile(ipath)
	if err != nil || len(ib) < 16 {
		t.Fatalf("index of %d bytes: %v", len(ib), err)
	}
	good := append([]byte(nil), ib...)
	ib[7] ^= 0x04 // the first entry's position moves by 4 bytes
	writeBytes(t, ipath, ib)
	l := openLog(t, dir, cfg)
	if got := readAll(t, l); !equalBatches(got, want) {
		t.Fatalf("recovered %d batches, want %d", len(got), len(want))
	}
	for off := segs[1].Base; off < segs[1].Next; off++ {
		b := mustRead(t, l, off, 1, l.EndOffset())
		if base := int64(binary.BigEndian.Uint64(b)); base > off {
			t.Fatalf("Read(%d) starts at batch %d", off, base)
		}
		if _, err := ValidateStoredBatch(b[:12+binary.BigEndian.Uint32(b[8:])]); err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
	}
	if got, _ := os.ReadFile(ipath); string(got) != string(good) {
		t.Errorf("index file not rewritten as it was")
	}
}

// TestOpen_DamagedCheckpointIsNotTruth flips a bit in
// partition.checkpoint: its CRC fails, recovery ignores it and reads
// every segment, keeping the whole log.
func TestOpen_DamagedCheckpointIsNotTruth(t *testing.T) {
	dir, cfg, want, _ := closedLog(t)
	flipByte(t, filepath.Join(dir, checkpointName), 2)
	l := openLog(t, dir, cfg)
	if got := readAll(t, l); !equalBatches(got, want) {
		t.Fatalf("recovered %d batches, want %d", len(got), len(want))
	}
	cp, ok, err := readCheckpoint(OSFS(), dir)
	if err != nil || !ok || cp.recovery != l.EndOffset() {
		t.Errorf("checkpoint after recovery: %+v %v %v, want it rewritten at the end %d", cp, ok, err, l.EndOffset())
	}
}

// TestOpen_UnsafeSkipCRCChecksServesTheDamage shows what the check is
// for: trusting the files, recovery keeps a sealed segment whose batch
// fails its CRC, and Read serves it.
func TestOpen_UnsafeSkipCRCChecksServesTheDamage(t *testing.T) {
	dir, cfg, want, segs := closedLog(t)
	flipByte(t, segs[1].Path, batchPositions(t, segs[1].Path)[2]+80)
	cfg.UnsafeSkipCRCChecks = true
	l := openLog(t, dir, cfg)
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("recovered %d batches, want all %d kept", len(got), len(want))
	}
	bad := 0
	for _, b := range got {
		if _, err := ValidateStoredBatch(b); err != nil {
			bad++
		}
	}
	if bad != 1 {
		t.Errorf("%d damaged batches served, want 1", bad)
	}
}

// TestOpen_RecoveryLostData checks what recovery reports about the data it
// cut: a torn tail, all a crash can leave, is no loss; a cut below the
// recovery point, a cut sealed segment and a damaged batch with a valid
// one after it are, whether or not the log was closed.
func TestOpen_RecoveryLostData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		closed bool // closed cleanly (recovery point at the end) before the damage
		seg    int  // index in Segments, -1 the active one
		damage func(t *testing.T, path string, pos []int64)
		lost   bool
	}{
		{"nothing damaged, after a crash", false, -1, func(*testing.T, string, []int64) {}, false},
		{"nothing damaged, after a close", true, -1, func(*testing.T, string, []int64) {}, false},
		{"torn tail of the active segment", false, -1, func(t *testing.T, path string, pos []int64) {
			truncateFile(t, path, pos[len(pos)-1]+30)
		}, false},
		{"last batch of the active segment flipped (as good as torn)", false, -1, func(t *testing.T, path string, pos []int64) {
			flipByte(t, path, pos[len(pos)-1]+70)
		}, false},
		{"middle batch of the active segment flipped", false, -1, func(t *testing.T, path string, pos []int64) {
			flipByte(t, path, pos[1]+70)
		}, true},
		{"sealed segment flipped", false, 1, func(t *testing.T, path string, pos []int64) {
			flipByte(t, path, pos[len(pos)-1]+70)
		}, true},
		{"active segment cut after a close", true, -1, func(t *testing.T, path string, pos []int64) {
			truncateFile(t, path, pos[len(pos)-1]+30)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg := t.TempDir(), testConfig()
			cfg.SegmentBytes = 8192
			l, err := Open(dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			fillLog(t, l, 90)
			segs := l.Segments()
			if tc.closed {
				err = l.Close()
			} else {
				err = l.Sync() // and crash: the log is never closed
				t.Cleanup(func() { _ = l.Close() })
			}
			if err != nil {
				t.Fatal(err)
			}
			i := tc.seg
			if i < 0 {
				i = len(segs) - 1
			}
			tc.damage(t, segs[i].Path, batchPositions(t, segs[i].Path))
			r := openLog(t, dir, cfg)
			defer r.Close()
			if got := r.RecoveryLostData(); got != tc.lost {
				t.Fatalf("RecoveryLostData = %v, want %v (end %d)", got, tc.lost, r.EndOffset())
			}
		})
	}
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}
