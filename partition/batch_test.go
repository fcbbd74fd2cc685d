package partition

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateBatch_AcceptsProducerBatches(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd} {
		recs := []testRecord{{ts: 1000, value: []byte("a")}, {ts: 1005, key: []byte("k"), value: []byte("bb")}, {ts: 990}}
		b := makeBatch(t, batchSpec{records: recs, codec: codec, producerID: 7, producerEpoch: 2, baseSequence: 40, attributes: attrTransactional})
		info, err := ValidateBatch(b, len(b))
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		want := BatchInfo{
			Size: len(b), BaseOffset: 0, LeaderEpoch: -1, Attributes: int16(codec) | attrTransactional,
			LastOffsetDelta: 2, FirstTimestamp: 1000, MaxTimestamp: 1005,
			ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40, NumRecords: 3,
		}
		if info != want {
			t.Errorf("codec %d: info %+v, want %+v", codec, info, want)
		}
		if got := info.Compression(); got != codec {
			t.Errorf("Compression() = %d, want %d", got, codec)
		}
		if !info.Transactional() || info.Control() || !info.Idempotent() || info.LogAppendTime() {
			t.Errorf("attribute helpers wrong for %+v", info)
		}
	}
}

func TestValidateBatch_StampedHeaderStillValid(t *testing.T) {
	b := uniformBatch(t, 10, 50, 123)
	s := stamped(b, 1<<40, 9)
	info, err := ValidateBatch(s, len(s))
	if err != nil {
		t.Fatal(err)
	}
	if info.BaseOffset != 1<<40 || info.LeaderEpoch != 9 {
		t.Errorf("stamped header reads base %d epoch %d", info.BaseOffset, info.LeaderEpoch)
	}
}

func TestValidateBatch_Rejections(t *testing.T) {
	good := uniformBatch(t, 4, 20, 1)
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		max    int
		kind   error
		code   int16
	}{
		{"too large", func(b []byte) []byte { return b }, len(good) - 1, ErrBatchTooLarge, kerr.MessageTooLarge.Code},
		{"short", func(b []byte) []byte { return b[:40] }, 1 << 20, ErrCorruptBatch, kerr.CorruptMessage.Code},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, 1 << 20, ErrCorruptBatch, kerr.CorruptMessage.Code},
		{"length below header", func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLength:], 10); return b }, 1 << 20, ErrCorruptBatch, kerr.CorruptMessage.Code},
		{"crc", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, 1 << 20, ErrCorruptBatch, kerr.CorruptMessage.Code},
		{"trailing bytes", func(b []byte) []byte { return append(b, 0) }, 1 << 20, ErrInvalidRecord, kerr.InvalidRecord.Code},
		{"magic", func(b []byte) []byte { b[offMagic] = 1; return b }, 1 << 20, ErrInvalidRecord, kerr.InvalidRecord.Code},
		{"legacy v1 message set", func([]byte) []byte { return messageSetV1("v") }, 1 << 20, ErrInvalidRecord, kerr.InvalidRecord.Code},
		{"count vs lastOffsetDelta", func(b []byte) []byte { return recrc(setU32(b, offLastOffsetDelta, 5)) }, 1 << 20, ErrInvalidRecord, kerr.InvalidRecord.Code},
		{"no records", func(b []byte) []byte {
			return recrc(setU32(setU32(b, offNumRecords, 0), offLastOffsetDelta, math.MaxUint32))
		}, 1 << 20, ErrInvalidRecord, kerr.InvalidRecord.Code},
		{"record count above records", func(b []byte) []byte { return recrc(setU32(setU32(b, offNumRecords, 5), offLastOffsetDelta, 4)) }, 1 << 20, ErrCorruptBatch, kerr.CorruptMessage.Code},
		{"record count below records", func(b []byte) []byte { return recrc(setU32(setU32(b, offNumRecords, 3), offLastOffsetDelta, 2)) }, 1 << 20, ErrCorruptBatch, kerr.CorruptMessage.Code},
		{"record offset delta", func(b []byte) []byte { return recrc(bumpFirstOffsetDelta(b)) }, 1 << 20, ErrInvalidRecord, kerr.InvalidRecord.Code},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.mutate(append([]byte(nil), good...))
			_, err := ValidateBatch(b, c.max)
			if !errors.Is(err, c.kind) {
				t.Fatalf("err = %v, want %v", err, c.kind)
			}
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("err %T is not a *BatchError", err)
			}
			if got := ErrorCode(err); got != c.code {
				t.Errorf("ErrorCode = %d, want %d", got, c.code)
			}
		})
	}
}

func setU32(b []byte, off int, v uint32) []byte {
	binary.BigEndian.PutUint32(b[off:], v)
	return b
}

func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crcOf(b))
	return b
}

// bumpFirstOffsetDelta sets record 0's offset delta (one-byte varints in
// small test batches: length, attributes, timestampDelta 0) to 1.
func bumpFirstOffsetDelta(b []byte) []byte {
	b[batchHeaderSize+3] = 2 // zigzag(1)
	return b
}

func TestParseBatchHeader_SkipsCRC(t *testing.T) {
	b := uniformBatch(t, 3, 10, 5)
	b[len(b)-1] ^= 0xff
	if _, err := ParseBatchHeader(b); err != nil {
		t.Fatalf("ParseBatchHeader checked the payload: %v", err)
	}
	if _, err := ValidateBatch(b, len(b)); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("ValidateBatch = %v, want corrupt", err)
	}
}

func TestBatchInfo_LastSequenceWraps(t *testing.T) {
	i := BatchInfo{BaseSequence: math.MaxInt32 - 1, LastOffsetDelta: 3}
	if got, want := i.LastSequence(), int32(1); got != want {
		t.Errorf("LastSequence = %d, want %d", got, want)
	}
}

func TestErrorCode(t *testing.T) {
	cases := []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{&OffsetOutOfRangeError{Offset: 5}, kerr.OffsetOutOfRange.Code},
		{ErrClosed, kerr.KafkaStorageError.Code},
		{errors.New("other"), kerr.UnknownServerError.Code},
	}
	for _, c := range cases {
		if got := ErrorCode(c.err); got != c.want {
			t.Errorf("ErrorCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// messageSetV1 is a one-message magic-1 message set, as clients before
// Kafka 0.11 produce: shorter than a v2 batch header, with its magic byte
// where a v2 batch has its own.
func messageSetV1(value string) []byte {
	m := kmsg.MessageV1{Magic: 1, Timestamp: 1, Value: []byte(value)}
	b := m.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
	return b
}
