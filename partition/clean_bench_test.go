package partition

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// cleanBenchBytes is the size of the benchmark log: RAFTQ_CLEAN_BENCH_MB
// MiB, 64 by default (the figure is 1024).
func cleanBenchBytes() int64 {
	if v, err := strconv.Atoi(os.Getenv("RAFTQ_CLEAN_BENCH_MB")); err == nil && v > 0 {
		return int64(v) << 20
	}
	return 64 << 20
}

// BenchmarkClean cleans a log of 100-byte values in which 10% of the
// records are live (each key written 10 times), beside a plain
// sequential read and write of the same bytes in the same run. Each
// iteration builds the log afresh (untimed) and cleans it once.
func BenchmarkClean(b *testing.B) {
	size := cleanBenchBytes()
	var cleaned, copied time.Duration
	var bytesIn int64
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		cfg := DefaultConfig()
		cfg.SegmentBytes = 16 << 20
		l, err := Open(dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		fillKeyed(b, l, size, 10)
		if err := l.SetHighWatermark(l.EndOffset()); err != nil {
			b.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
		bytesIn = l.Size()
		b.StartTimer()
		start := time.Now()
		st, err := l.Clean(CleanConfig{UpTo: l.HighWatermark(), Now: time.Now()})
		cleaned += time.Since(start)
		b.StopTimer()
		if err != nil || !st.Cleaned {
			b.Fatalf("clean: %+v %v", st, err)
		}
		copied += copyBaseline(b, dir, filepath.Join(b.TempDir(), "copy"))
		_ = l.Close()
	}
	mb := float64(bytesIn) / (1 << 20) * float64(b.N)
	b.ReportMetric(mb/cleaned.Seconds(), "clean-MB/s")
	b.ReportMetric(mb/copied.Seconds(), "copy-MB/s")
}

// fillKeyed appends batches of 100 records of 100-byte values until the
// log holds size bytes; keys repeat every total/rewrites records.
func fillKeyed(b *testing.B, l *Log, size int64, rewrites int) {
	perBatch := 100
	approx := int(size / 130)
	keys := max(approx/rewrites, 1)
	val := make([]byte, 100)
	n := 0
	for l.Size() < size {
		recs := make([]testRecord, perBatch)
		for i := range recs {
			recs[i] = testRecord{ts: int64(n), key: []byte(fmt.Sprintf("key-%09d", n%keys)), value: val}
			n++
		}
		if _, _, err := l.Append(makeBatch(b, batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1}), 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
}

// copyBaseline reads every segment of dir and writes it to dst, fsyncing
// each file: the same bytes a cleaning reads and writes.
func copyBaseline(b *testing.B, dir, dst string) time.Duration {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		b.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	start := time.Now()
	for _, n := range names {
		in, err := os.Open(n)
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, filepath.Base(n)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			b.Fatal(err)
		}
		if err := out.Sync(); err != nil {
			b.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return time.Since(start)
}
