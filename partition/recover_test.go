package partition

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// abandon drops a log as a killed process would: no sync, no index or
// checkpoint writes, files just closed.
func abandon(l *Log) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.hw.shut()
	l.end.shut()
	l.lso.shut()
	l.releaseAll()
}

// fillLog appends n batches and returns them as stored.
func fillLog(t testing.TB, l *Log, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		b := uniformBatch(t, 1+i%3, 100+i%50, int64(1000+i))
		base, _ := mustAppend(t, l, b, int32(i%4))
		out = append(out, stamped(b, base, int32(i%4)))
	}
	return out
}

// readAll reads the whole log, segment by segment.
func readAll(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		r, err := l.readSpan(off, 1<<30, l.EndOffset())
		if err != nil {
			t.Fatalf("readSpan(%d): %v", off, err)
		}
		b, err := r.appendTo(nil)
		r.release()
		if err != nil {
			t.Fatal(err)
		}
		if r.next <= off {
			t.Fatalf("read at %d made no progress", off)
		}
		out = append(out, splitBatches(t, b)...)
		off = r.next
	}
	return out
}

func segFile(dir string, base int64, suffix string) string {
	return segmentPath(dir, base) + suffix
}

func TestOpen_CutsTornTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, lastBatch int)
	}{
		{"half a batch", func(t *testing.T, path string, n int) { truncateBy(t, path, int64(n/2)) }},
		{"half a header", func(t *testing.T, path string, n int) { truncateBy(t, path, int64(n-30)) }},
		{"garbage after", func(t *testing.T, path string, n int) { appendBytes(t, path, bytes.Repeat([]byte{0xab}, 100)) }},
		{"zeros after", func(t *testing.T, path string, n int) { appendBytes(t, path, make([]byte, 4096)) }},
		{"flipped bit in last batch", func(t *testing.T, path string, n int) { flipByte(t, path, -10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, testConfig())
			if err != nil {
				t.Fatal(err)
			}
			want := fillLog(t, l, 12)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			abandon(l)
			tc.damage(t, segFile(dir, 0, logSuffix), len(want[len(want)-1]))
			l = openLog(t, dir, testConfig())
			got := readAll(t, l)
			if tc.name == "garbage after" || tc.name == "zeros after" {
				if !equalBatches(got, want) {
					t.Fatalf("recovered %d batches, want all %d", len(got), len(want))
				}
			} else if !equalBatches(got, want[:len(want)-1]) {
				t.Fatalf("recovered %d batches, want the first %d", len(got), len(want)-1)
			}
			st, _ := os.Stat(segFile(dir, 0, logSuffix))
			if st.Size() != l.Size() {
				t.Fatalf("file is %d bytes, log %d: tail not cut", st.Size(), l.Size())
			}
			mustAppend(t, l, uniformBatch(t, 1, 1, 0), 0)
		})
	}
}

func TestOpen_RebuildsBadIndexes(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(t *testing.T, dir string)
	}{
		{"index garbage", func(t *testing.T, dir string) { writeBytes(t, segFile(dir, 0, indexSuffix), []byte("not an index!")) }},
		{"index points elsewhere", func(t *testing.T, dir string) {
			writeBytes(t, segFile(dir, 0, indexSuffix), encodeIndex([]indexEntry{{rel: 3, pos: 700}}))
		}},
		{"index missing", func(t *testing.T, dir string) { os.Remove(segFile(dir, 0, indexSuffix)) }},
		{"time index falls", func(t *testing.T, dir string) {
			writeBytes(t, segFile(dir, 0, timeIndexSuffix), encodeTimeIndex([]timeEntry{{ts: 5, rel: 1}, {ts: 4, rel: 2}}))
		}},
		{"checkpoint garbage", func(t *testing.T, dir string) { writeBytes(t, filepath.Join(dir, checkpointName), []byte("x")) }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.SegmentBytes = 8192
			l, err := Open(dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := fillLog(t, l, 60)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			damage.do(t, dir)
			l = openLog(t, dir, cfg)
			if got := readAll(t, l); !equalBatches(got, want) {
				t.Fatalf("recovered %d batches, want %d", len(got), len(want))
			}
			for off := int64(0); off < l.EndOffset(); off += 7 {
				if _, err := l.Read(off, 1, l.EndOffset()); err != nil {
					t.Fatalf("Read(%d): %v", off, err)
				}
			}
			ib, _ := os.ReadFile(segFile(dir, 0, indexSuffix))
			if _, err := decodeIndex(ib); err != nil || len(ib) == 0 {
				t.Fatalf("index not rewritten: %d bytes, %v", len(ib), err)
			}
		})
	}
}

func TestOpen_RemovesSegmentsAfterAGapOrTear(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := fillLog(t, l, 40)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	abandon(l)
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	// Tear the second segment in its middle: it and every later one end there.
	tornAt := segs[1]
	truncateBy(t, tornAt.Path, tornAt.Size/2)
	writeBytes(t, filepath.Join(dir, "00000000000000999999.index"), nil) // orphan
	writeBytes(t, filepath.Join(dir, checkpointName+".tmp"), []byte("x"))
	l = openLog(t, dir, cfg)
	got := readAll(t, l)
	n := 0
	for n < len(want) && n < len(got) && bytes.Equal(got[n], want[n]) {
		n++
	}
	if n != len(got) {
		t.Fatalf("recovered batch %d differs from the appended one", n)
	}
	if l.EndOffset() >= tornAt.Next || l.EndOffset() < tornAt.Base {
		t.Fatalf("end %d, want inside the torn segment [%d, %d)", l.EndOffset(), tornAt.Base, tornAt.Next)
	}
	if got := len(l.Segments()); got != 2 {
		t.Fatalf("%d segments after recovery, want 2", got)
	}
	for _, name := range []string{"00000000000000999999.index", checkpointName + ".tmp", filepath.Base(segs[2].Path)} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived recovery", name)
		}
	}
}

func TestOpen_EmptyDirAndMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	l := openLog(t, dir, testConfig())
	if l.StartOffset() != 0 || l.EndOffset() != 0 {
		t.Fatalf("new log at [%d, %d)", l.StartOffset(), l.EndOffset())
	}
	if _, err := os.Stat(segFile(dir, 0, logSuffix)); err != nil {
		t.Fatal(err)
	}
}

func truncateBy(t *testing.T, path string, n int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-n); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func writeBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// flipByte flips the byte at off (from the end when negative).
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x40
	writeBytes(t, path, b)
}

func TestOpen_KeepsAValidUnsyncedTail(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := fillLog(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A batch that reached the file but not the checkpoint, as after a
	// crash between a write and the next sync.
	extra := stamped(uniformBatch(t, 2, 10, 0), 6, 1) // fillLog's 3 batches hold offsets 0..5
	appendBytes(t, segFile(dir, 0, logSuffix), extra)
	l = openLog(t, dir, testConfig())
	if got := readAll(t, l); !equalBatches(got, append(want, extra)) {
		t.Fatalf("recovered %d batches, want the %d written", len(got), len(want)+1)
	}
}
