package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Special timestamps of a ListOffsets request.
const (
	ListLatest   int64 = -1
	ListEarliest int64 = -2
)

// ListOffset answers one partition of a ListOffsets request, seeing only
// offsets below upTo (the high watermark, for consumers): ListLatest gives
// upTo (capped at the log end), ListEarliest the log start, and any other
// timestamp the first record at or after it (OffsetForTimestamp). The
// timestamp returned is -1 for latest and earliest. ReadLimit gives upTo
// for a request's isolation level: READ_COMMITTED sees up to the last
// stable offset.
func (l *Log) ListOffset(ts int64, upTo int64) (offset, timestamp int64, err error) {
	switch ts {
	case ListLatest:
		if err := l.Err(); errors.Is(err, ErrClosed) {
			return -1, -1, err
		}
		return min(upTo, l.EndOffset()), -1, nil
	case ListEarliest:
		if err := l.Err(); errors.Is(err, ErrClosed) {
			return -1, -1, err
		}
		return l.StartOffset(), -1, nil
	}
	return l.OffsetForTimestamp(ts, upTo)
}

// OffsetForTimestamp returns the offset and timestamp of the first record,
// in offset order from the log start and below upTo, whose timestamp is at
// or after ts; offset and timestamp are -1 when there is none. It picks the
// segment by its largest timestamp, starts inside it from the time index,
// walks batch headers to the first batch whose max timestamp qualifies, and
// reads only that batch's records (decompressing if needed).
func (l *Log) OffsetForTimestamp(ts int64, upTo int64) (offset, timestamp int64, err error) {
	after := int64(-1)
	for {
		v, start, ok, err := l.nextSegmentByTime(ts, after, upTo)
		if err != nil || !ok {
			return -1, -1, err
		}
		offset, timestamp, found, err := l.searchSegment(v, ts, max(start, v.seg.base), upTo)
		v.seg.release()
		if err != nil || found {
			return offset, timestamp, err
		}
		after = v.seg.base
	}
}

// nextSegmentByTime returns the first segment after base `after` whose
// largest timestamp reaches ts, with a reference taken.
func (l *Log) nextSegmentByTime(ts, after, upTo int64) (segView, int64, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return segView{}, 0, false, ErrClosed
	}
	for _, s := range l.segs {
		if s.base >= upTo {
			break
		}
		if s.base > after && s.maxTS >= ts && s.next > l.start {
			s.acquire()
			return s.view(), l.start, true, nil
		}
	}
	return segView{}, 0, false, nil
}

// searchSegment looks in one segment for the first record at or after ts
// with an offset in [from, upTo).
func (l *Log) searchSegment(v segView, ts, from, upTo int64) (int64, int64, bool, error) {
	begin := from
	if e, ok := lookupTime(v.times, ts); ok {
		begin = max(begin, v.seg.base+int64(e.rel))
	}
	h, ok, err := v.find(begin)
	if err != nil || !ok {
		return -1, -1, false, err
	}
	w := newWalker(v.seg.f, h.pos, v.size, walkBufSize)
	defer w.close()
	for {
		h, b, err := w.nextBatch()
		if errors.Is(err, io.EOF) {
			return -1, -1, false, nil
		}
		if err != nil {
			return -1, -1, false, fmt.Errorf("read segment %d: %w: %w", v.seg.base, ErrCorruptLog, err)
		}
		if h.next() > upTo {
			return -1, -1, false, nil
		}
		if h.maxTS < ts {
			continue
		}
		off, t, found, err := l.firstRecordAt(b, ts, from)
		if err != nil || found {
			return off, t, found, err
		}
	}
}

// firstRecordAt finds, inside one batch, the first record with an offset at
// or above from and a timestamp at or after ts.
func (l *Log) firstRecordAt(b []byte, ts, from int64) (int64, int64, bool, error) {
	info, err := ParseBatchHeader(b)
	if err != nil {
		return -1, -1, false, fmt.Errorf("%w: %w", ErrCorruptLog, err)
	}
	base := int64(binary.BigEndian.Uint64(b))
	if info.LogAppendTime() {
		ok := info.MaxTimestamp >= ts && base+int64(info.LastOffsetDelta) >= from
		return max(base, from), info.MaxTimestamp, ok, nil
	}
	recs := b[batchHeaderSize:]
	if info.Compression() != CodecNone {
		// Stored batches were checked with MaxDecompressedBytes only if a
		// recent build took them; this bound is kgo's, as before.
		recs, err = decompressRecords(recs, info.Compression(), math.MaxInt32)
		if err != nil {
			return -1, -1, false, fmt.Errorf("decompress batch at offset %d: %w: %v", base, ErrCorruptLog, err)
		}
	}
	return scanRecordTimes(recs, info, base, ts, from)
}

// scanRecordTimes walks uncompressed records for the first one at or after
// ts with offset at or above from.
func scanRecordTimes(recs []byte, info BatchInfo, base, ts, from int64) (int64, int64, bool, error) {
	for i := int32(0); i < info.NumRecords; i++ {
		length, k := binary.Varint(recs)
		if k <= 0 || length < minRecordBytes || length > int64(len(recs)-k) {
			return -1, -1, false, fmt.Errorf("record %d of batch %d: %w", i, base, ErrCorruptLog)
		}
		body := recs[k : k+int(length)]
		tsDelta, j := binary.Varint(body[1:])
		offDelta, m := binary.Varint(body[1+max(j, 0):])
		if j <= 0 || m <= 0 {
			return -1, -1, false, fmt.Errorf("record %d of batch %d: %w", i, base, ErrCorruptLog)
		}
		if off, t := base+offDelta, info.FirstTimestamp+tsDelta; off >= from && t >= ts {
			return off, t, true, nil
		}
		recs = recs[k+int(length):]
	}
	return -1, -1, false, nil
}
