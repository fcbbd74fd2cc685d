package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd}

// TestRecompress_EveryCodecPair: a producer's batch in any codec comes out
// in any other with the same header facts and the same records, read back
// with franz-go's own decompressor, as a consumer would.
func TestRecompress_EveryCodecPair(t *testing.T) {
	recs := []testRecord{{ts: 1000, value: []byte("a")}, {ts: 1005, key: []byte("k"), value: bytes.Repeat([]byte("bb"), 300)}, {ts: 990}}
	plain := encodeRecords(recs)
	for _, from := range allCodecs {
		in := makeBatch(t, batchSpec{records: recs, codec: from, producerID: 7, producerEpoch: 2, baseSequence: 40})
		before, err := ValidateBatch(in, len(in))
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range allCodecs {
			out, err := Recompress(in, to)
			if err != nil {
				t.Fatalf("%s to %s: %v", codecName(from), codecName(to), err)
			}
			after, err := ValidateBatch(out, len(out))
			if err != nil {
				t.Fatalf("%s to %s: result does not validate: %v", codecName(from), codecName(to), err)
			}
			want := before
			want.Size, want.Attributes = len(out), int16(to)
			if after != want {
				t.Errorf("%s to %s: header %+v, want %+v", codecName(from), codecName(to), after, want)
			}
			got, err := kgo.DefaultDecompressor().Decompress(out[batchHeaderSize:], kgo.CompressionCodecType(to))
			if err != nil || !bytes.Equal(got, plain) {
				t.Errorf("%s to %s: records read back %q, %v; want %q", codecName(from), codecName(to), got, err, plain)
			}
			if from == to && &out[0] != &in[0] {
				t.Errorf("%s to itself: copied, want the batch as it was", codecName(from))
			}
		}
	}
}

// TestRecompress_JavaSnappyFraming: snappy in the xerial framing Kafka's
// Java clients write is read too.
func TestRecompress_JavaSnappyFraming(t *testing.T) {
	recs := []testRecord{{ts: 5, value: bytes.Repeat([]byte("java"), 20000)}, {ts: 6, value: []byte("x")}}
	plain := encodeRecords(recs)
	in := makeBatch(t, batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1})
	in = withPayload(in, CodecSnappy, xerial(plain, 32<<10))
	out, err := Recompress(in, CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[batchHeaderSize:], plain) {
		t.Error("xerial snappy records did not come back as produced")
	}
}

// TestRecompress_RefusesBadPayloads: a payload that does not decode, that
// decodes to more than MaxDecompressedBytes, or whose records do not fit
// the header's count is refused with the error a producer gets for it.
func TestRecompress_RefusesBadPayloads(t *testing.T) {
	recs := []testRecord{{ts: 1, value: []byte("v")}}
	base := makeBatch(t, batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1})
	zeros := make([]byte, MaxDecompressedBytes+1)
	var hugeSnappy []byte
	hugeSnappy = binary.AppendUvarint(hugeSnappy, MaxDecompressedBytes+1)
	cases := []struct {
		name    string
		codec   Codec
		payload []byte
		want    error
	}{
		{"gzip garbage", CodecGzip, []byte("not gzip at all"), ErrCorruptBatch},
		{"lz4 garbage", CodecLz4, []byte("not lz4 at all"), ErrCorruptBatch},
		{"zstd garbage", CodecZstd, []byte("not zstd at all"), ErrCorruptBatch},
		{"snappy garbage", CodecSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ErrCorruptBatch},
		{"xerial cut short", CodecSnappy, append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 9), ErrCorruptBatch},
		{"unknown codec", Codec(6), []byte("x"), ErrInvalidRecord},
		{"gzip bomb", CodecGzip, compress(t, zeros, CodecGzip), ErrBatchTooLarge},
		{"lz4 bomb", CodecLz4, compress(t, zeros, CodecLz4), ErrBatchTooLarge},
		{"zstd bomb", CodecZstd, compress(t, zeros, CodecZstd), ErrBatchTooLarge},
		{"snappy claiming too much", CodecSnappy, hugeSnappy, ErrBatchTooLarge},
		{"xerial claiming too much", CodecSnappy, xerial(zeros, 4<<20), ErrBatchTooLarge},
		{"two records for one", CodecGzip, compress(t, encodeRecords(append(recs, recs...)), CodecGzip), ErrCorruptBatch},
	}
	for _, c := range cases {
		_, err := Recompress(withPayload(base, c.codec, c.payload), CodecNone)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// withPayload replaces b's records with payload in codec c, fixing the
// length and CRC.
func withPayload(b []byte, c Codec, payload []byte) []byte {
	out := append(append([]byte{}, b[:batchHeaderSize]...), payload...)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-framePrefix))
	attrs := binary.BigEndian.Uint16(out[offAttributes:])
	binary.BigEndian.PutUint16(out[offAttributes:], attrs&^attrCodecMask|uint16(c))
	return recrc(out)
}

// xerial frames src as Java's SnappyOutputStream does: the header, then
// snappy blocks of at most block bytes, each behind its length.
func xerial(src []byte, block int) []byte {
	out := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	for len(src) > 0 {
		n := min(block, len(src))
		enc := s2.EncodeSnappy(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
		src = src[n:]
	}
	return out
}

// FuzzRecompress: whatever a producer sends, Recompress returns an error
// or a batch that validates, holds the same records, passes CheckRecords,
// and decompresses back to the records that came in.
func FuzzRecompress(f *testing.F) {
	recs := []testRecord{{ts: 1, key: []byte("k"), value: []byte("value")}, {ts: 2}}
	for _, c := range allCodecs {
		f.Add(makeBatch(f, batchSpec{records: recs, codec: c, producerID: -1, producerEpoch: -1, baseSequence: -1}), uint8(CodecZstd))
	}
	f.Fuzz(func(t *testing.T, b []byte, to uint8) {
		codec := allCodecs[int(to)%len(allCodecs)]
		in, err := ValidateBatch(b, len(b))
		if err != nil {
			return // produce refuses these before recompressing
		}
		out, err := Recompress(b, codec)
		if err != nil {
			return
		}
		info, err := ValidateBatch(out, len(out))
		if err != nil {
			t.Fatalf("recompressed batch does not validate: %v", err)
		}
		if info.NumRecords != in.NumRecords || info.BaseSequence != in.BaseSequence || info.Compression() != codec {
			t.Fatalf("header changed: %+v from %+v", info, in)
		}
		back, err := Recompress(out, CodecNone)
		if err != nil {
			t.Fatalf("a recompressed batch does not decompress: %v", err)
		}
		recs, err := decompressRecords(b[batchHeaderSize:], in.Compression(), MaxDecompressedBytes)
		if err != nil {
			t.Fatalf("Recompress took records that do not decompress: %v", err)
		}
		if !bytes.Equal(back[batchHeaderSize:], recs) {
			t.Fatal("the records changed on the way")
		}
		if err := CheckRecords(out); err != nil {
			t.Fatalf("CheckRecords refuses what Recompress gave: %v", err)
		}
	})
}

// TestStampLogAppendTime: a stamped batch still validates, says the broker
// set its time, carries that time as its max timestamp, and keeps its
// records.
func TestStampLogAppendTime(t *testing.T) {
	for _, c := range allCodecs {
		b := makeBatch(t, batchSpec{records: []testRecord{{ts: 5, value: []byte("a")}, {ts: 9}}, codec: c, producerID: -1, producerEpoch: -1, baseSequence: -1})
		recs := bytes.Clone(b[batchHeaderSize:])
		StampLogAppendTime(b, 1_700_000_000_000)
		info, err := ValidateBatch(b, len(b))
		if err != nil {
			t.Fatalf("%s: stamped batch does not validate: %v", codecName(c), err)
		}
		if !info.LogAppendTime() || info.MaxTimestamp != 1_700_000_000_000 || info.FirstTimestamp != 5 || info.Compression() != c {
			t.Errorf("%s: stamped header %+v", codecName(c), info)
		}
		if !bytes.Equal(b[batchHeaderSize:], recs) {
			t.Errorf("%s: records changed", codecName(c))
		}
	}
}

// TestCheckRecords: a compressed batch whose payload does not decode, or
// whose records do not frame, is refused; good ones in every codec pass.
func TestCheckRecords(t *testing.T) {
	recs := []testRecord{{ts: 1, value: []byte("v")}, {ts: 2, key: []byte("k")}}
	for _, c := range allCodecs {
		if err := CheckRecords(makeBatch(t, batchSpec{records: recs, codec: c, producerID: -1, producerEpoch: -1, baseSequence: -1})); err != nil {
			t.Errorf("%s: %v", codecName(c), err)
		}
	}
	base := makeBatch(t, batchSpec{records: recs, producerID: -1, producerEpoch: -1, baseSequence: -1})
	bad := map[string][]byte{
		"gzip that is not gzip":      withPayload(base, CodecGzip, []byte("not gzip at all")),
		"gzip of a broken record":    withPayload(base, CodecGzip, compress(t, []byte{12, 0, 0, 0, 10, 'k', 0, 0}, CodecGzip)),
		"zstd of one record for two": withPayload(base, CodecZstd, compress(t, encodeRecords(recs[:1]), CodecZstd)),
	}
	for name, b := range bad {
		if err := CheckRecords(b); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: %v, want a corrupt batch", name, err)
		}
	}
}
