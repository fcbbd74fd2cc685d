package partition

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka v2 RecordBatch header layout (all big-endian). Only baseOffset and
// partitionLeaderEpoch lie outside the CRC, which covers attributes onwards.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offMaxTimestamp    = 35
	offNumRecords      = 57

	framePrefix     = 12 // baseOffset + batchLength: the bytes batchLength does not count
	batchHeaderSize = 61 // BatchHeaderSize, unexported for arithmetic
	minRecordBytes  = 6  // attributes, timestampDelta, offsetDelta, key, value, header count
)

// BatchHeaderSize is the size of a v2 RecordBatch header: the smallest
// possible batch.
const BatchHeaderSize = batchHeaderSize

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec is the compression codec in a batch's attributes.
type Codec int8

// The codecs Kafka defines.
const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLz4
	CodecZstd
)

// Attribute bits of a v2 batch.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// AttrLogAppendTime is the attribute bit of a batch whose MaxTimestamp the
// broker set (StampLogAppendTime).
const AttrLogAppendTime = attrLogAppendTime

// BatchInfo holds the header facts of one validated batch: what the broker
// needs for producer dedup and what the log needs for its indexes. The
// offsets and leader epoch are the ones in the bytes, before Append rewrites
// them.
type BatchInfo struct {
	Size            int // bytes of the whole batch, header included
	BaseOffset      int64
	LeaderEpoch     int32
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// Compression returns the batch's codec.
func (i BatchInfo) Compression() Codec { return Codec(i.Attributes & attrCodecMask) }

// Transactional reports the transactional attribute bit.
func (i BatchInfo) Transactional() bool { return i.Attributes&attrTransactional != 0 }

// Control reports the control-batch attribute bit (transaction markers).
// Clients may not produce control batches; the broker rejects them.
func (i BatchInfo) Control() bool { return i.Attributes&attrControl != 0 }

// LogAppendTime reports whether MaxTimestamp is the broker's append time
// rather than the producers' create times.
func (i BatchInfo) LogAppendTime() bool { return i.Attributes&attrLogAppendTime != 0 }

// Idempotent reports whether the batch carries a producer id.
func (i BatchInfo) Idempotent() bool { return i.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record, wrapping
// at MaxInt32 as Kafka's does.
func (i BatchInfo) LastSequence() int32 {
	s := int64(i.BaseSequence) + int64(i.LastOffsetDelta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

// ParseBatchHeader checks that b is exactly one v2 batch by its framing and
// header (length, magic, record count against lastOffsetDelta) and returns
// its facts. It reads no record and does not check the CRC: it costs the
// same for any size, for batches that ValidateBatch passed earlier. It
// takes the shapes a stored batch may have once a compacted topic was
// cleaned (clean.go): fewer records than lastOffsetDelta + 1, or none.
// Produced batches must pass ValidateBatch, which refuses those.
func ParseBatchHeader(b []byte) (BatchInfo, error) {
	// The magic byte sits at the same place in the legacy v0/v1 message
	// sets, which are shorter than a v2 header: check it first, so that
	// an old client learns its format is refused (Kafka answers
	// INVALID_RECORD too), not that its bytes are corrupt.
	if len(b) > offMagic && b[offMagic] != 2 {
		return BatchInfo{}, invalid("magic %d: only v2 record batches are accepted", int8(b[offMagic]))
	}
	if len(b) < batchHeaderSize {
		return BatchInfo{}, corrupt("%d bytes, shorter than the %d-byte batch header", len(b), batchHeaderSize)
	}
	length := int64(int32(binary.BigEndian.Uint32(b[offLength:])))
	if length < batchHeaderSize-framePrefix {
		return BatchInfo{}, corrupt("batch length %d below the header size", length)
	}
	size := framePrefix + length
	if size > int64(len(b)) {
		return BatchInfo{}, corrupt("batch length %d runs past the %d bytes given", length, len(b))
	}
	if size < int64(len(b)) {
		return BatchInfo{}, invalid("%d bytes follow the batch: exactly one batch is allowed", int64(len(b))-size)
	}
	var rb kmsg.RecordBatch
	if err := rb.UnsafeReadFrom(b); err != nil {
		return BatchInfo{}, corrupt("header: %v", err)
	}
	return headerInfo(&rb, int(size))
}

func headerInfo(rb *kmsg.RecordBatch, size int) (BatchInfo, error) {
	if rb.Magic != 2 {
		return BatchInfo{}, invalid("magic %d: only v2 record batches are accepted", rb.Magic)
	}
	if rb.NumRecords < 0 || rb.LastOffsetDelta < 0 || int64(rb.NumRecords) > int64(rb.LastOffsetDelta)+1 {
		return BatchInfo{}, invalid("lastOffsetDelta %d with %d records", rb.LastOffsetDelta, rb.NumRecords)
	}
	return BatchInfo{
		Size:            size,
		BaseOffset:      rb.FirstOffset,
		LeaderEpoch:     rb.PartitionLeaderEpoch,
		Attributes:      rb.Attributes,
		LastOffsetDelta: rb.LastOffsetDelta,
		FirstTimestamp:  rb.FirstTimestamp,
		MaxTimestamp:    rb.MaxTimestamp,
		ProducerID:      rb.ProducerID,
		ProducerEpoch:   rb.ProducerEpoch,
		BaseSequence:    rb.FirstSequence,
		NumRecords:      rb.NumRecords,
	}, nil
}

// ValidateBatch fully checks that b is one v2 batch of at most maxBytes:
// the header as ParseBatchHeader does, the CRC-32C, and for uncompressed
// batches every record (its length, offset delta, key, value and headers
// well formed, and filling the record exactly, as Kafka's broker reads
// them; the records must exactly fill the batch). It copies nothing and
// does not decompress: CheckRecords does that for a compressed batch. The
// broker calls both before proposing a batch; Append calls ValidateBatch
// again unless told not to.
func ValidateBatch(b []byte, maxBytes int) (BatchInfo, error) {
	if len(b) > maxBytes {
		return BatchInfo{}, &BatchError{Kind: ErrBatchTooLarge, Reason: fmt.Sprintf("%d bytes, limit %d", len(b), maxBytes)}
	}
	info, err := ParseBatchHeader(b)
	if err != nil {
		return BatchInfo{}, err
	}
	if info.NumRecords <= 0 {
		return BatchInfo{}, invalid("record count %d: a batch holds at least one record", info.NumRecords)
	}
	if info.LastOffsetDelta != info.NumRecords-1 {
		return BatchInfo{}, invalid("lastOffsetDelta %d with %d records", info.LastOffsetDelta, info.NumRecords)
	}
	return info, checkBatchBody(b, info, true)
}

// ValidateStoredBatch is ValidateBatch for a batch read back from a log
// (recovery): it also takes a cleaned batch, whose records' offset deltas
// have gaps (they only grow, and stay within lastOffsetDelta), or that
// holds no record at all.
func ValidateStoredBatch(b []byte) (BatchInfo, error) {
	info, err := ParseBatchHeader(b)
	if err != nil {
		return BatchInfo{}, err
	}
	return info, checkBatchBody(b, info, false)
}

// checkBatchBody checks the CRC-32C and, for an uncompressed batch, the
// records' framing; contiguous requires offset deltas 0..n-1.
func checkBatchBody(b []byte, info BatchInfo, contiguous bool) error {
	if got, want := crc32.Checksum(b[offAttributes:], castagnoli), binary.BigEndian.Uint32(b[offCRC:]); got != want {
		return corrupt("crc32c %08x, header says %08x", got, want)
	}
	if info.Compression() == CodecNone {
		return checkRecordFraming(b[batchHeaderSize:], info.NumRecords, info.LastOffsetDelta, contiguous)
	}
	return nil
}

// checkRecordFraming walks the length prefixes of n uncompressed records.
// It reads each record's offset delta (two varints in) and skips the rest.
// Deltas are 0..n-1 when contiguous, else strictly growing and at most
// lastDelta (a cleaned batch).
func checkRecordFraming(recs []byte, n, lastDelta int32, contiguous bool) error {
	prev := int64(-1)
	for i := int32(0); i < n; i++ {
		length, k := binary.Varint(recs)
		if k <= 0 || length < minRecordBytes || length > int64(len(recs)-k) {
			return corrupt("record %d: bad length prefix", i)
		}
		body := recs[k : k+int(length)]
		delta, err := checkRecordBody(body)
		if err != nil {
			return corrupt("record %d: %v", i, err)
		}
		if contiguous && delta != int64(i) || !contiguous && (delta <= prev || delta > int64(lastDelta)) {
			return invalid("record %d has offset delta %d", i, delta)
		}
		prev = delta
		recs = recs[k+int(length):]
	}
	if len(recs) != 0 {
		return corrupt("%d bytes follow the last of %d records", len(recs), n)
	}
	return nil
}

// stampHeader writes the assigned base offset and leader epoch into hdr,
// the first 17 bytes (or more) of a batch. Both fields are outside the CRC.
func stampHeader(hdr []byte, base int64, epoch int32) {
	binary.BigEndian.PutUint64(hdr[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(hdr[offLeaderEpoch:], uint32(epoch))
}
