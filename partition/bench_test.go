package partition

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Run with:
//
//	go test ./partition -run '^$' -bench . -benchtime 2s -count 3
//
// BenchmarkAppend/…/sync=true is to be compared with
// BenchmarkBaseline/…/sync=true from the same run: plain sequential
// write+fdatasync of the same sizes to a file in the same kind of
// directory on the same disk.

var benchSizes = []struct {
	name string
	size int
}{{"16KiB", 16 << 10}, {"1MiB", 1 << 20}}

var benchRecords = []struct {
	name string
	size int
}{{"100B", 100}, {"1KiB", 1024}}

// benchLogBytes bounds the disk a benchmark uses: past it the log start
// jumps to the end, deleting the sealed segments.
const benchLogBytes = 512 << 20

func benchConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 256 << 20
	c.MaxBatchBytes = 2 << 20
	return c
}

func BenchmarkAppend(b *testing.B) {
	for _, rec := range benchRecords {
		for _, size := range benchSizes {
			for _, sync := range []bool{false, true} {
				name := fmt.Sprintf("rec=%s/batch=%s/sync=%v", rec.name, size.name, sync)
				b.Run(name, func(b *testing.B) {
					benchAppend(b, batchOfSize(b, size.size, rec.size), sync, (*Log).Append)
				})
			}
		}
	}
}

// BenchmarkAppendValidated is the apply path: batches validated upstream.
func BenchmarkAppendValidated(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("rec=100B/batch="+size.name+"/sync=false", func(b *testing.B) {
			benchAppend(b, batchOfSize(b, size.size, 100), false, (*Log).AppendValidated)
		})
	}
}

func benchAppend(b *testing.B, batch []byte, sync bool, appendFn func(*Log, []byte, int32) (int64, int64, error)) {
	l, err := Open(b.TempDir(), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := appendFn(l, batch, 1); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		if l.Size() > benchLogBytes {
			if err := l.AdvanceStart(l.EndOffset()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkBaseline(b *testing.B) {
	for _, size := range benchSizes {
		for _, sync := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%s/sync=%v", size.name, sync), func(b *testing.B) {
				benchBaseline(b, size.size, sync)
			})
		}
	}
}

// benchBaseline writes size-byte buffers sequentially to a file, with an
// fdatasync after each when sync is set, starting a new file every
// SegmentBytes as the log does.
func benchBaseline(b *testing.B, size int, sync bool) {
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	bf := newBaselineFile(b, b.TempDir())
	defer bf.close()
	bf.sync = sync
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bf.write(buf)
	}
}

// BenchmarkRead reads from a warm page cache: maxBytes-sized reads at random
// offsets of a 64 MiB log of 16 KiB batches.
func BenchmarkRead(b *testing.B) {
	for _, rec := range benchRecords {
		for _, maxBytes := range []int{64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("rec=%s/max=%dKiB", rec.name, maxBytes>>10), func(b *testing.B) {
				benchRead(b, batchOfSize(b, 16<<10, rec.size), maxBytes)
			})
		}
	}
}

func benchRead(b *testing.B, batch []byte, maxBytes int) {
	l, err := Open(b.TempDir(), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for l.Size() < 64<<20 {
		if _, _, err := l.AppendValidated(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	rng := rand.New(rand.NewPCG(1, 1))
	var n int64
	var buf []byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := l.readSpan(rng.Int64N(end), maxBytes, end)
		if err != nil {
			b.Fatal(err)
		}
		buf, err = r.appendTo(buf[:0])
		r.release()
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(buf))
	}
	b.SetBytes(n / int64(max(b.N, 1)))
}

func BenchmarkValidateBatch(b *testing.B) {
	for _, rec := range benchRecords {
		for _, size := range benchSizes {
			batch := batchOfSize(b, size.size, rec.size)
			b.Run(fmt.Sprintf("rec=%s/batch=%s", rec.name, size.name), func(b *testing.B) {
				b.SetBytes(int64(len(batch)))
				for i := 0; i < b.N; i++ {
					if _, err := ValidateBatch(batch, len(batch)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSyncedAppendVsBaseline interleaves, batch by batch, Append+Sync
// on a log and write+fdatasync of the same bytes on a plain file in the
// same directory, so both see the same disk and the same background load.
// It reports each side's throughput and their ratio (log/baseline; the
// target for 1 MiB batches is at least 0.7).
func BenchmarkSyncedAppendVsBaseline(b *testing.B) {
	for _, rec := range benchRecords {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("rec=%s/batch=%s", rec.name, size.name), func(b *testing.B) {
				benchPaired(b, batchOfSize(b, size.size, rec.size))
			})
		}
	}
}

func benchPaired(b *testing.B, batch []byte) {
	dir := b.TempDir()
	l, err := Open(filepath.Join(dir, "log"), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	base := newBaselineFile(b, dir)
	defer base.close()
	var logTime, baseTime time.Duration
	b.SetBytes(int64(2 * len(batch)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate which goes first, so neither always follows the
		// other's fsync.
		if i%2 == 0 {
			logTime += timed(func() { appendSync(b, l, batch) })
			baseTime += timed(func() { base.write(batch) })
		} else {
			baseTime += timed(func() { base.write(batch) })
			logTime += timed(func() { appendSync(b, l, batch) })
		}
		if l.Size() > benchLogBytes {
			if err := l.AdvanceStart(l.EndOffset()); err != nil {
				b.Fatal(err)
			}
		}
	}
	mb := float64(len(batch)) * float64(b.N) / 1e6
	b.ReportMetric(mb/logTime.Seconds(), "log-MB/s")
	b.ReportMetric(mb/baseTime.Seconds(), "baseline-MB/s")
	b.ReportMetric(baseTime.Seconds()/logTime.Seconds(), "log/baseline")
}

func timed(f func()) time.Duration {
	t := time.Now()
	f()
	return time.Since(t)
}

func appendSync(b *testing.B, l *Log, batch []byte) {
	if _, _, err := l.Append(batch, 1); err != nil {
		b.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
}

// baselineFile is the baseline's sequential file, replaced every
// SegmentBytes as the log's segments are.
type baselineFile struct {
	b       *testing.B
	dir     string
	f       *os.File
	written int64
	n       int
	sync    bool
}

func newBaselineFile(b *testing.B, dir string) *baselineFile {
	bf := &baselineFile{b: b, dir: dir, sync: true}
	bf.rotate()
	return bf
}

func (bf *baselineFile) rotate() {
	bf.close()
	f, err := os.Create(filepath.Join(bf.dir, fmt.Sprintf("baseline-%d", bf.n)))
	if err != nil {
		bf.b.Fatal(err)
	}
	bf.f, bf.written = f, 0
	bf.n++
}

func (bf *baselineFile) close() {
	if bf.f != nil {
		bf.f.Close()
		os.Remove(bf.f.Name())
	}
}

func (bf *baselineFile) write(p []byte) {
	if bf.written+int64(len(p)) > benchConfig().SegmentBytes {
		bf.rotate()
	}
	if _, err := bf.f.Write(p); err != nil {
		bf.b.Fatal(err)
	}
	if bf.sync {
		if err := fdatasync(bf.f); err != nil {
			bf.b.Fatal(err)
		}
	}
	bf.written += int64(len(p))
}

// BenchmarkApplyTail measures what one unsynced append costs the apply
// path when the log grows at a steady 40 MB/s in 16 KiB batches (about a
// node's share at 150k records/s, with headroom), with writeback hints
// every WritebackBytes and without them. It reports latency percentiles,
// not throughput: the question is how often an append stalls.
//
//	go test ./partition -run '^$' -bench BenchmarkApplyTail -benchtime 4000x
func BenchmarkApplyTail(b *testing.B) {
	for _, wb := range []int64{0, 1 << 20} {
		b.Run(fmt.Sprintf("writeback=%d", wb), func(b *testing.B) {
			c := benchConfig()
			c.WritebackBytes = wb
			l, err := Open(filepath.Join(b.TempDir(), "log"), c)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := batchOfSize(b, 16<<10, 100)
			const every = 400 * time.Microsecond
			lat := make([]time.Duration, 0, b.N)
			next := time.Now()
			b.ResetTimer()
			for range b.N {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(every)
				start := time.Now()
				if _, _, err := l.AppendValidated(batch, 0); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p999-µs")
	b.ReportMetric(at(1), "max-µs")
}
