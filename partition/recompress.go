package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Recompression. A topic whose compression.type names a codec stores
// every batch in that codec, as Kafka's broker does: the leader
// decompresses a batch that came in another codec and compresses its
// records again before proposing it, so replicas only ever see the
// result. The codecs are franz-go's (kgo.DefaultCompressor), which write
// what Kafka's own clients read; decompression is bounded, since a few
// bytes of zstd or gzip can claim gigabytes.

// MaxDecompressedBytes bounds what one batch's records may decompress to.
const MaxDecompressedBytes = 64 << 20

// codecs names each codec as compression.type does and gives franz-go's
// compressor for it.
var codecs = [...]struct {
	name string
	kgo  func() kgo.CompressionCodec
}{
	CodecNone:   {"uncompressed", kgo.NoCompression},
	CodecGzip:   {"gzip", kgo.GzipCompression},
	CodecSnappy: {"snappy", kgo.SnappyCompression},
	CodecLz4:    {"lz4", kgo.Lz4Compression},
	CodecZstd:   {"zstd", kgo.ZstdCompression},
}

// ParseCodec maps a compression.type value to its codec: "uncompressed"
// is CodecNone, and "producer" (keep the producer's codec) gives ok false.
func ParseCodec(name string) (c Codec, ok bool) {
	for i, d := range codecs {
		if d.name == name {
			return Codec(i), true
		}
	}
	return 0, false
}

// Recompress returns the validated batch b with its records in codec to,
// or b itself when it is in that codec already. The header keeps its
// offsets, timestamps, producer id, epoch and sequence; the codec bits,
// the length and the CRC are set for the new records. The decompressed
// records are checked as an uncompressed batch's are.
func Recompress(b []byte, to Codec) ([]byte, error) {
	info, err := ParseBatchHeader(b)
	if err != nil {
		return nil, err
	}
	from := info.Compression()
	if from == to {
		return b, nil
	}
	recs := b[batchHeaderSize:] // uncompressed records were checked by ValidateBatch
	if from != CodecNone {
		release := acquireDecompression()
		defer release()
		if recs, err = decompressChecked(b, info); err != nil {
			return nil, err
		}
	}
	payload, err := compressRecords(recs, to)
	if err != nil {
		return nil, err
	}
	if len(payload) > math.MaxInt32-batchHeaderSize {
		return nil, &BatchError{Kind: ErrBatchTooLarge, Reason: fmt.Sprintf("%d bytes once compressed", len(payload))}
	}
	out := make([]byte, batchHeaderSize+len(payload))
	copy(out, b[:batchHeaderSize])
	copy(out[batchHeaderSize:], payload)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-framePrefix))
	attrs := binary.BigEndian.Uint16(out[offAttributes:])
	binary.BigEndian.PutUint16(out[offAttributes:], attrs&^attrCodecMask|uint16(to))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out, nil
}

// CheckRecords checks the records of the validated batch b as
// ValidateBatch checks an uncompressed batch's, decompressing them first
// if they are compressed: what Kafka's broker does before it appends a
// batch, so that a payload no consumer can decode is refused at produce
// instead of stopping every consumer of the partition at it.
func CheckRecords(b []byte) error {
	info, err := ParseBatchHeader(b)
	if err != nil || info.Compression() == CodecNone {
		return err // uncompressed records were checked by ValidateBatch
	}
	release := acquireDecompression()
	defer release()
	_, err = decompressChecked(b, info)
	return err
}

// decompressChecked returns the records of the compressed batch b, whose
// header info describes, once they decompress within MaxDecompressedBytes
// and frame as info says. The caller holds a decompression slot.
func decompressChecked(b []byte, info BatchInfo) ([]byte, error) {
	recs, err := decompressRecords(b[batchHeaderSize:], info.Compression(), MaxDecompressedBytes)
	if err != nil {
		return nil, err
	}
	return recs, checkRecordFraming(recs, info.NumRecords, info.LastOffsetDelta, true)
}

// decompressions bounds how many batches the node decompresses at once
// (Recompress, CheckRecords), and so the memory that many producers can
// make it hold: each may take MaxDecompressedBytes and twice that while
// it grows. Producers beyond it wait their turn.
var decompressions = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

func acquireDecompression() (release func()) {
	decompressions <- struct{}{}
	return func() { <-decompressions }
}

// StampLogAppendTime marks the batch b, in place, as timestamped by the
// broker at now (Unix milliseconds), as Kafka does for a topic whose
// message.timestamp.type is LogAppendTime: the timestamp type bit and the
// max timestamp are set, the CRC recomputed, and the records untouched
// (consumers take every record's time from the batch).
func StampLogAppendTime(b []byte, now int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(now))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// ClearLogAppendTime marks the batch b, in place, as timestamped by its
// producer (CreateTime), recomputing the CRC: what Kafka does to a batch
// that claims LogAppendTime on a CreateTime topic.
func ClearLogAppendTime(b []byte) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs&^attrLogAppendTime)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// decompressRecords returns the records of a batch payload in codec c,
// refusing more than limit bytes.
func decompressRecords(src []byte, c Codec, limit int) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch c {
	case CodecNone:
		return src, nil
	case CodecGzip:
		var r *gzip.Reader
		if r, err = gzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = readBounded(r, limit)
		}
	case CodecLz4:
		out, err = readBounded(lz4.NewReader(bytes.NewReader(src)), limit)
	case CodecSnappy:
		if err = checkSnappySize(src, limit); err == nil {
			out, err = kgo.DefaultDecompressor().Decompress(src, kgo.CodecSnappy)
		}
	case CodecZstd:
		if out, err = zstdDecoder(limit).DecodeAll(src, nil); errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, tooBig(limit)
		}
	default:
		return nil, invalid("unknown compression codec %d", c)
	}
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) {
			return nil, be
		}
		return nil, corrupt("decompress %s records: %v", codecName(c), err)
	}
	return out, nil
}

func readBounded(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err == nil && len(out) > limit {
		return nil, tooBig(limit)
	}
	return out, err
}

func tooBig(limit int) error {
	return &BatchError{Kind: ErrBatchTooLarge, Reason: fmt.Sprintf("records decompress to more than %d bytes", limit)}
}

// xerialMagic starts snappy in the framing Kafka's Java clients write:
// a 16-byte header, then blocks each behind a big-endian length.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// checkSnappySize adds up the lengths a snappy payload's blocks claim, so
// that decoding never allocates more than limit bytes.
func checkSnappySize(src []byte, limit int) error {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialMagic) {
		n, err := s2.DecodedLen(src)
		if err == nil && n > limit {
			return tooBig(limit)
		}
		return err
	}
	total := 0
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return fmt.Errorf("xerial block length cut short")
		}
		size := int(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if size > len(rest) {
			return fmt.Errorf("xerial block of %d bytes, %d left", size, len(rest))
		}
		n, err := s2.DecodedLen(rest[:size])
		if err != nil {
			return err
		}
		if total += n; total > limit {
			return tooBig(limit)
		}
		rest = rest[size:]
	}
	return nil
}

// zstdDecoders holds a decoder per output bound; each is safe for
// concurrent DecodeAll calls.
var zstdDecoders sync.Map // int -> *zstd.Decoder

func zstdDecoder(limit int) *zstd.Decoder {
	if d, ok := zstdDecoders.Load(limit); ok {
		return d.(*zstd.Decoder)
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic(fmt.Sprintf("zstd decoder: %v", err)) // only for bad options
	}
	v, loaded := zstdDecoders.LoadOrStore(limit, d)
	if loaded {
		d.Close()
	}
	return v.(*zstd.Decoder)
}

// compressors holds one kgo compressor per codec; each is safe for
// concurrent use and pools its encoders.
var compressors sync.Map // Codec -> kgo.Compressor

func compressRecords(recs []byte, c Codec) ([]byte, error) {
	if c == CodecNone {
		return recs, nil
	}
	comp, err := compressorFor(c)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	out, used := comp.Compress(&buf, recs)
	if used != kgo.CompressionCodecType(c) {
		return nil, fmt.Errorf("compress records with %s: the codec failed", codecName(c))
	}
	return out, nil
}

func compressorFor(c Codec) (kgo.Compressor, error) {
	if v, ok := compressors.Load(c); ok {
		return v.(kgo.Compressor), nil
	}
	if c <= CodecNone || int(c) >= len(codecs) {
		return nil, fmt.Errorf("unknown compression codec %d", c)
	}
	comp, err := kgo.DefaultCompressor(codecs[c].kgo())
	if err != nil {
		return nil, fmt.Errorf("%s compressor: %w", codecName(c), err)
	}
	v, _ := compressors.LoadOrStore(c, comp)
	return v.(kgo.Compressor), nil
}

func codecName(c Codec) string {
	if c >= 0 && int(c) < len(codecs) {
		return codecs[c].name
	}
	return fmt.Sprintf("codec %d", c)
}
