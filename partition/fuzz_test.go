package partition

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// fuzzSeedBatches are valid batches of every codec, stamped and not.
func fuzzSeedBatches(tb testing.TB) [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	var out [][]byte
	for i := range 8 {
		b, _ := randomBatch(tb, rng, 5, 40, int64(i*1000))
		out = append(out, b, stamped(b, int64(i)<<33, int32(i)))
	}
	for codec := CodecGzip; codec <= CodecZstd; codec++ {
		out = append(out, makeBatch(tb, batchSpec{records: []testRecord{{ts: 1, value: []byte("v")}}, codec: codec, producerID: -1}))
	}
	return out
}

func FuzzValidateBatch(f *testing.F) {
	for _, b := range fuzzSeedBatches(f) {
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(bytes.Clone(b), b...))
		flipped := bytes.Clone(b)
		flipped[len(b)/2] ^= 0x10
		f.Add(flipped)
	}
	f.Add([]byte{})
	f.Add(make([]byte, batchHeaderSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ValidateBatch(data, 1<<20)
		if err != nil {
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("rejection %v is not a *BatchError", err)
			}
			if code := ErrorCode(err); code != 2 && code != 10 && code != 87 {
				t.Fatalf("rejection %v maps to Kafka code %d", err, code)
			}
			return
		}
		checkAcceptedBatch(t, data, info)
	})
}

// checkAcceptedBatch holds for every batch ValidateBatch accepts: the header
// parse agrees, the log's walker can step over it, and stamping the fields
// outside the CRC keeps it valid.
func checkAcceptedBatch(t *testing.T, data []byte, info BatchInfo) {
	if info.Size != len(data) {
		t.Fatalf("accepted %d bytes as a %d-byte batch", len(data), info.Size)
	}
	if hi, err := ParseBatchHeader(data); err != nil || hi != info {
		t.Fatalf("ParseBatchHeader = %+v, %v; ValidateBatch said %+v", hi, err, info)
	}
	h, err := parseHeader(data, 0)
	if err != nil || h.size != int64(len(data)) || h.last != info.BaseOffset+int64(info.LastOffsetDelta) {
		t.Fatalf("walker reads %+v, %v for an accepted batch %+v", h, err, info)
	}
	s := stamped(data, 12345, 6)
	if _, err := ValidateBatch(s, 1<<20); err != nil {
		t.Fatalf("stamped batch rejected: %v", err)
	}
}

// FuzzRecoverTail appends arbitrary bytes to a log's last segment, after
// cutting 0..n bytes off its last batch, and checks that Open keeps every
// batch before the damage, accepts only valid contiguous batches after it,
// and leaves a log that appends and reopens cleanly.
func FuzzRecoverTail(f *testing.F) {
	f.Add([]byte{}, uint16(0), false)
	f.Add([]byte{}, uint16(7), true)
	f.Add(bytes.Repeat([]byte{0}, 200), uint16(0), false)
	f.Add(bytes.Repeat([]byte{0xff}, 100), uint16(3), true)
	next := stamped(uniformBatch(f, 2, 10, 99), fuzzLogEnd, 1)
	f.Add(next, uint16(0), false)
	f.Add(next, uint16(0), true)
	f.Add(next[:40], uint16(0), true)
	f.Add(stamped(uniformBatch(f, 2, 10, 99), fuzzLogEnd+1, 1), uint16(0), true)
	f.Fuzz(func(t *testing.T, tail []byte, cut uint16, clean bool) {
		dir := t.TempDir()
		fsys := newFaultFS()
		fsys.noSync = true
		cfg := testConfig()
		cfg.FS = fsys
		want := buildFuzzLog(t, dir, cfg, clean)
		last := want[len(want)-1]
		n := int64(cut) % int64(len(last)+1)
		path := segFile(dir, 0, logSuffix)
		truncateBy(t, path, n)
		appendBytes(t, path, tail)
		if n > 0 {
			want = want[:len(want)-1]
		}
		l, err := Open(dir, cfg)
		if err != nil {
			t.Fatalf("Open after tail damage: %v", err)
		}
		got := readAll(t, l)
		if len(got) < len(want) || !equalBatches(got[:len(want)], want) {
			t.Fatalf("recovered %d batches; the %d before the damage are not all intact", len(got), len(want))
		}
		for _, b := range got[len(want):] {
			if _, err := ValidateBatch(b, 1<<20); err != nil {
				t.Fatalf("recovery kept an invalid batch: %v", err)
			}
		}
		checkReopens(t, l, dir, cfg, got)
	})
}

const fuzzLogEnd = 9 // offsets held by buildFuzzLog's batches

func buildFuzzLog(t *testing.T, dir string, cfg Config, clean bool) [][]byte {
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i, n := range []int{1, 3, 2, 2, 1} {
		b := uniformBatch(t, n, 30*i, int64(i))
		base, _ := mustAppend(t, l, b, 1)
		want = append(want, stamped(b, base, 1))
	}
	if clean {
		err = l.Close()
	} else {
		err = l.Sync()
		abandon(l)
	}
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func checkReopens(t *testing.T, l *Log, dir string, cfg Config, got [][]byte) {
	b := uniformBatch(t, 1, 5, 0)
	base, _ := mustAppend(t, l, b, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if again := readAll(t, l); !equalBatches(again, append(got, stamped(b, base, 2))) {
		t.Fatalf("after append and reopen: %d batches, want %d", len(again), len(got)+1)
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(encodeCheckpoint(checkpoint{start: 5, recovery: 100}))
	f.Add([]byte("raftq partition checkpoint v1\nstart 1\nrecovery 2\ncrc 00000000\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCheckpoint(data)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeCheckpoint(c), data) {
			t.Fatalf("accepted %q, which re-encodes differently", data)
		}
	})
}

func FuzzDecodeIndexes(f *testing.F) {
	f.Add(encodeIndex([]indexEntry{{1, 100}, {5, 900}}), encodeTimeIndex([]timeEntry{{10, 1}, {20, 5}}))
	f.Add([]byte{1, 2, 3}, []byte{})
	f.Fuzz(func(t *testing.T, ib, tb []byte) {
		if es, err := decodeIndex(ib); err == nil {
			if !bytes.Equal(encodeIndex(es), ib) {
				t.Fatal("index does not round-trip")
			}
			for i := 1; i < len(es); i++ {
				if es[i].rel <= es[i-1].rel || es[i].pos <= es[i-1].pos {
					t.Fatal("accepted an index that does not rise")
				}
			}
		}
		if es, err := decodeTimeIndex(tb); err == nil && !bytes.Equal(encodeTimeIndex(es), tb) {
			t.Fatal("time index does not round-trip")
		}
	})
}
