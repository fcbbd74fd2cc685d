package partition

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is one record of a generated batch.
type testRecord struct {
	ts         int64
	key, value []byte
	headers    []kmsg.Header
}

// batchSpec describes a batch to generate with franz-go's kmsg types.
type batchSpec struct {
	records       []testRecord
	codec         Codec
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	attributes    int16 // extra attribute bits (transactional, control)
}

// encodeRecords returns the v2 wire form of the records, offset deltas 0..n-1.
func encodeRecords(recs []testRecord) []byte {
	var out []byte
	first := recs[0].ts
	for i, r := range recs {
		rec := kmsg.Record{
			TimestampDelta64: r.ts - first,
			OffsetDelta:      int32(i),
			Key:              r.key,
			Value:            r.value,
			Headers:          r.headers,
		}
		body := rec.AppendTo(nil)[1:] // encoded with Length 0: a one-byte varint
		rec.Length = int32(len(body))
		out = rec.AppendTo(out)
	}
	return out
}

// makeBatch builds a v2 RecordBatch with a correct CRC-32C, as a producer
// sends it (base offset 0, leader epoch -1).
func makeBatch(tb testing.TB, spec batchSpec) []byte {
	tb.Helper()
	if len(spec.records) == 0 {
		tb.Fatal("makeBatch: no records")
	}
	recs := encodeRecords(spec.records)
	if spec.codec != CodecNone {
		recs = compress(tb, recs, spec.codec)
	}
	maxTS := spec.records[0].ts
	for _, r := range spec.records {
		maxTS = max(maxTS, r.ts)
	}
	n := int32(len(spec.records))
	rb := kmsg.RecordBatch{
		Length:               int32(batchHeaderSize - framePrefix + len(recs)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(spec.codec) | spec.attributes,
		LastOffsetDelta:      n - 1,
		FirstTimestamp:       spec.records[0].ts,
		MaxTimestamp:         maxTS,
		ProducerID:           spec.producerID,
		ProducerEpoch:        spec.producerEpoch,
		FirstSequence:        spec.baseSequence,
		NumRecords:           n,
		Records:              recs,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

func compress(tb testing.TB, src []byte, codec Codec) []byte {
	tb.Helper()
	out, err := compressRecords(src, codec)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Clone(out)
}

// uniformBatch is n records of valueSize bytes each, timestamps from ts.
func uniformBatch(tb testing.TB, n, valueSize int, ts int64) []byte {
	tb.Helper()
	recs := make([]testRecord, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(i + j)
		}
		recs[i] = testRecord{ts: ts + int64(i), value: v}
	}
	return makeBatch(tb, batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1})
}

// batchOfSize returns a batch of records with valueSize-byte values, as
// many as fit in about total bytes.
func batchOfSize(tb testing.TB, total, valueSize int) []byte {
	tb.Helper()
	one := len(uniformBatch(tb, 2, valueSize, 0)) - len(uniformBatch(tb, 1, valueSize, 0))
	n := max(1, (total-batchHeaderSize)/one)
	return uniformBatch(tb, n, valueSize, 1_700_000_000_000)
}

// randomBatch draws a batch: 1..maxRecords records, values up to maxValue
// bytes, timestamps jittering around ts, sometimes compressed. It returns
// the batch and its record timestamps.
func randomBatch(tb testing.TB, rng *rand.Rand, maxRecords, maxValue int, ts int64) ([]byte, []int64) {
	tb.Helper()
	n := 1 + rng.IntN(maxRecords)
	recs := make([]testRecord, n)
	times := make([]int64, n)
	for i := range recs {
		v := make([]byte, rng.IntN(maxValue+1))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		times[i] = ts + int64(rng.IntN(40)) - 10
		recs[i] = testRecord{ts: times[i], value: v}
		if rng.IntN(4) == 0 {
			recs[i].key = []byte{byte(i), byte(n)}
		}
		if rng.IntN(8) == 0 {
			recs[i].headers = []kmsg.Header{{Key: "h", Value: []byte{byte(i)}}}
		}
	}
	spec := batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1}
	if rng.IntN(5) == 0 {
		spec.codec = Codec(1 + rng.IntN(4))
	}
	return makeBatch(tb, spec), times
}

// stamped returns a copy of batch as the log stores it.
func stamped(batch []byte, base int64, epoch int32) []byte {
	b := bytes.Clone(batch)
	stampHeader(b, base, epoch)
	return b
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }
