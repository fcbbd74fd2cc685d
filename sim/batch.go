package sim

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offsets inside a Kafka v2 RecordBatch header.
const (
	batchFrame      = 12 // baseOffset int64 + batchLength int32
	batchHeaderSize = 61
	batchOffCRC     = 17
	batchOffAttrs   = 21 // the CRC-32C covers everything from here on
	batchOffPID     = 43
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// makeBatch builds an uncompressed v2 RecordBatch as a producer sends it
// (base offset 0, leader epoch -1), one record per value. pid < 0 makes it
// non-idempotent.
func makeBatch(pid int64, seq int32, ts int64, values []string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // encoded with Length 0: a one-byte varint
		recs = r.AppendTo(recs)
	}
	n := int32(len(values))
	rb := kmsg.RecordBatch{
		Length: int32(batchHeaderSize - batchFrame + len(recs)), PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: n - 1, FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: 0, FirstSequence: seq, NumRecords: n, Records: recs,
	}
	if pid < 0 {
		rb.ProducerEpoch, rb.FirstSequence = -1, -1
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttrs:], castagnoli))
	return b
}

// payload is the part of a batch the broker never rewrites: everything
// the CRC covers, and the CRC. Retries of one batch share it.
func payload(b []byte) string { return string(b[batchOffCRC:]) }

// batchAt is one batch of a log as read back.
type batchAt struct {
	base  int64
	bytes string
}

// splitBatches cuts a Log.Read result into whole batches.
func splitBatches(b []byte) ([]batchAt, int64, error) {
	var out []batchAt
	next := int64(-1)
	for len(b) > 0 {
		if len(b) < batchHeaderSize {
			return nil, 0, fmt.Errorf("sim: %d bytes left, less than a batch header", len(b))
		}
		n := batchFrame + int(int32(binary.BigEndian.Uint32(b[8:12])))
		if n < batchHeaderSize || n > len(b) {
			return nil, 0, fmt.Errorf("sim: batch of %d bytes in %d", n, len(b))
		}
		base := int64(binary.BigEndian.Uint64(b))
		last := base + int64(int32(binary.BigEndian.Uint32(b[23:27])))
		out = append(out, batchAt{base: base, bytes: string(b[:n])})
		next, b = last+1, b[n:]
	}
	return out, next, nil
}

// dropProducer rewrites an idempotent batch as a plain one (the planted
// DropProducerID bug), fixing its CRC.
func dropProducer(b []byte) []byte {
	out := append([]byte(nil), b...)
	binary.BigEndian.PutUint64(out[batchOffPID:], ^uint64(0))    // producer id -1
	binary.BigEndian.PutUint16(out[batchOffPID+8:], ^uint16(0))  // producer epoch -1
	binary.BigEndian.PutUint32(out[batchOffPID+10:], ^uint32(0)) // base sequence -1
	binary.BigEndian.PutUint32(out[batchOffCRC:], crc32.Checksum(out[batchOffAttrs:], castagnoli))
	return out
}
