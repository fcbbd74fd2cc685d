package floor

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRun_EveryReplicaHoldsEveryBatch(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Rate: 5000, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond}
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := 300 * 6; r.Batches != want || r.Committed != want {
		t.Fatalf("batches %d, committed %d: want %d of each", r.Batches, r.Committed, want)
	}
	if r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.P999 || r.P999 > r.Max {
		t.Fatalf("latencies out of order: p50 %s p99 %s p99.9 %s max %s", r.P50, r.P99, r.P999, r.Max)
	}
	if r.Elapsed < 400*time.Millisecond || r.MaxLag < 0 {
		t.Fatalf("elapsed %s, lag %s: want at least the 400ms scheduled", r.Elapsed, r.MaxLag)
	}
	var records int
	for tk := range 400 {
		for p := range 6 {
			records += recordsAt(5000, tk, p, 6)
		}
	}
	for i, n := range r.Nodes {
		if n.Flushes == 0 || n.MeanFlush <= 0 || n.Bytes != int64(records*100) {
			t.Errorf("node %d: %d flushes, mean %s, %d bytes (want %d)", i, n.Flushes, n.MeanFlush, n.Bytes, records*100)
		}
		fi, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != int64(records*100) {
			t.Errorf("node %d holds %d bytes, want every batch: %d", i, fi.Size(), records*100)
		}
	}
}

func TestRun_PreallocatedFileKeepsItsSize(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Nodes: 1, Partitions: 1, Rate: 1000, Duration: 50 * time.Millisecond, Prealloc: 1 << 20}
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Committed != r.Batches || r.Batches != 50 {
		t.Fatalf("batches %d, committed %d: want 50 of each", r.Batches, r.Committed)
	}
	fi, err := os.Stat(filepath.Join(dir, "node-0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 1<<20 {
		t.Fatalf("file is %d bytes, want the 1 MiB fallocated", fi.Size())
	}
}

func TestRun_RefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Nodes: 2, Rate: 1, Duration: time.Second}, "odd"},
		{Config{Rate: 0, Duration: time.Second}, "rate"},
		{Config{Rate: math.NaN(), Duration: time.Second}, "rate"},
		{Config{Rate: math.Inf(1), Duration: time.Second}, "rate"},
		{Config{Rate: 1}, "duration"},
		{Config{Rate: 1, Duration: time.Microsecond}, "duration"},
		{Config{Rate: 1, Duration: time.Hour, Warmup: time.Minute}, "at most"},
		{Config{Rate: 1, Duration: time.Second, Warmup: -time.Second}, "warm-up -1s"},
		{Config{Rate: 1, Duration: time.Second, Partitions: -1}, "partitions"},
		{Config{Rate: 1, Duration: time.Second, Prealloc: -5}, "preallocation"},
		{Config{Rate: 1e6, Duration: time.Second, RecordBytes: 1 << 20}, "batches of up to"},
	} {
		c.cfg.Dir = t.TempDir()
		_, err := Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error about %s", c.cfg, err, c.want)
		}
	}
}

func TestRun_MissingDirIsAnError(t *testing.T) {
	_, err := Run(context.Background(), Config{Dir: filepath.Join(t.TempDir(), "absent"), Rate: 1000, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("got %v, want an error naming the directory", err)
	}
}

func TestRecordsAt_SharesTheRateOverTicksAndPartitions(t *testing.T) {
	for _, rate := range []float64{150000, 20000, 6000, 1234.5} {
		total := 0
		for tk := range 1000 {
			for p := range 6 {
				n := recordsAt(rate, tk, p, 6)
				if n < 1 {
					t.Fatalf("rate %g: tick %d partition %d gets %d records", rate, tk, p, n)
				}
				total += n
			}
		}
		if want := max(int(rate), 6000); total != want {
			t.Errorf("rate %g: %d records in a second, want %d", rate, total, want)
		}
	}
}

func TestBatch_CommitsOnTheQuorumthAck(t *testing.T) {
	var slot atomic.Int64
	settled := 0
	b := &batch{due: time.Now().Add(-time.Millisecond), quorum: 2, slot: &slot, settled: func() { settled++ }}
	b.ack()
	if slot.Load() != 0 {
		t.Fatal("committed on one acknowledgement of three, want two")
	}
	b.ack()
	first := slot.Load()
	if first < int64(time.Millisecond) {
		t.Fatalf("latency %s after the second acknowledgement, want at least 1ms", time.Duration(first))
	}
	b.ack()
	if slot.Load() != first || settled != 3 {
		t.Fatalf("the third acknowledgement moved the latency (%d, was %d) or was not settled (%d)", slot.Load(), first, settled)
	}
}

func TestFollow_RefusesAnOversizedBatch(t *testing.T) {
	n, err := openNode(t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	leader, follower := net.Pipe()
	defer leader.Close()
	defer follower.Close()
	stop := make(chan struct{})
	defer close(stop)
	errc := make(chan error, 1)
	go follow(follower, n, stop, func(err error) { errc <- err })
	var h [frameHeader]byte
	binary.LittleEndian.PutUint64(h[:], 7)
	binary.LittleEndian.PutUint32(h[8:], maxFrame+1)
	if _, err := leader.Write(h[:]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !strings.Contains(err.Error(), "batch 7") {
			t.Fatalf("got %v, want the oversized batch refused", err)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a wait for the result
		t.Fatal("the follower neither refused nor read on")
	}
}

// FuzzReadBatches feeds arbitrary bytes to a follower's batch reader. It
// must not panic, must end with an error that names what went wrong, and
// must queue exactly the whole batches that preceded it.
func FuzzReadBatches(f *testing.F) {
	frame := func(id uint64, body string) []byte {
		b := binary.LittleEndian.AppendUint64(nil, id)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
		return append(b, body...)
	}
	f.Add(append(frame(1, "abc"), frame(2, "")...))
	f.Add(frame(3, "truncated")[:15])
	f.Add(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint64(nil, 4), maxFrame+1))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := &node{kick: make(chan struct{}, 1)}
		var got error
		readBatches(bytes.NewReader(data), n, make(chan uint64, 1), nil, func(err error) { got = err })
		if got == nil || !strings.Contains(got.Error(), "batch") {
			t.Fatalf("reader ended with %v, want an error about a batch", got)
		}
		want, off := 0, 0
		for len(data)-off >= frameHeader {
			size := int(binary.LittleEndian.Uint32(data[off+8:]))
			if size > maxFrame || len(data)-off-frameHeader < size {
				break
			}
			off += frameHeader + size
			want++
		}
		if len(n.queue) != want {
			t.Fatalf("queued %d batches, want the %d whole ones", len(n.queue), want)
		}
	})
}
