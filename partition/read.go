package partition

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
)

// span is where whole batches lie inside one segment file. It holds a
// reference on the segment, so the file stays open, even if retention
// deletes the segment meanwhile, until release: Read copies the bytes
// after Log.mu is let go.
type span struct {
	base  int64 // base offset of the segment (its file name)
	pos   int64 // byte position of the first batch in the .log file
	size  int64 // bytes; zero when there is nothing to read
	first int64 // base offset of the first batch
	next  int64 // offset after the last batch: where the next read starts

	seg      *segment
	released atomic.Bool
}

// appendTo appends the span's bytes to dst.
func (r *span) appendTo(dst []byte) ([]byte, error) {
	if r.size == 0 {
		return dst, nil
	}
	n := len(dst)
	dst = append(dst, make([]byte, r.size)...)
	got, err := r.seg.f.ReadAt(dst[n:], r.pos)
	if int64(got) < r.size {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return dst[:n], fmt.Errorf("read segment %d at %d: %w: %w", r.base, r.pos, ErrCorruptLog, err)
	}
	return dst, nil
}

// release lets the segment file close (once it is deleted and no other
// reader holds it). It is safe to call more than once.
func (r *span) release() {
	if r.seg != nil && r.released.CompareAndSwap(false, true) {
		r.seg.release()
	}
}

// Read returns whole batches starting with the one that contains offset:
// at least one batch even if it is larger than maxBytes, more while they
// fit in maxBytes, none at or beyond upTo (the high watermark), and all
// from one segment. At the log end, or at or above upTo, it returns no
// bytes and no error. Below the log start or above the end it returns an
// *OffsetOutOfRangeError.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	r, err := l.readSpan(offset, maxBytes, upTo)
	if err != nil {
		return nil, err
	}
	defer r.release()
	return r.appendTo(nil)
}

// readSpan finds the batches Read returns. The caller must release the
// span.
func (l *Log) readSpan(offset int64, maxBytes int, upTo int64) (*span, error) {
	v, end, err := l.locate(offset)
	if err != nil {
		return nil, err
	}
	upTo = min(upTo, end)
	if offset >= upTo {
		v.seg.release()
		return &span{first: offset, next: offset}, nil
	}
	r, err := v.spanFrom(offset, maxBytes, upTo)
	if err != nil {
		v.seg.release()
		return nil, err
	}
	if r.size == 0 {
		v.seg.release()
		r.seg = nil
	}
	return r, nil
}

// locate finds the segment holding offset and takes a reference on it.
func (l *Log) locate(offset int64) (segView, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return segView{}, 0, ErrClosed
	}
	end := l.active().next
	if offset < l.start || offset > end {
		return segView{}, 0, &OffsetOutOfRangeError{Offset: offset, Start: l.start, End: end}
	}
	s := l.segs[l.segmentFor(offset)]
	s.acquire()
	return s.view(), end, nil
}

// spanFrom computes the span of a read of offset < upTo.
func (v segView) spanFrom(offset int64, maxBytes int, upTo int64) (*span, error) {
	first, ok, err := v.find(offset)
	if err != nil {
		return nil, err
	}
	if !ok || first.next() > upTo {
		return &span{base: v.seg.base, first: offset, next: offset, seg: v.seg}, nil
	}
	r := &span{base: v.seg.base, pos: first.pos, first: first.base, seg: v.seg}
	endPos, next, err := v.cutoff(first, maxBytes, upTo)
	if err != nil {
		return nil, err
	}
	r.size, r.next = endPos-first.pos, next
	return r, nil
}

// find returns the header of the batch containing offset, through the
// sparse index and then a short walk. ok is false past the segment's end.
func (v segView) find(offset int64) (batchHeader, bool, error) {
	rel := uint32(min(offset-v.seg.base, math.MaxUint32))
	e := lookupOffset(v.index, rel)
	w := newWalker(v.seg.f, int64(e.pos), v.size, walkBufSize)
	defer w.close()
	want := v.seg.base + int64(e.rel)
	for {
		h, err := w.next()
		if errors.Is(err, io.EOF) {
			return batchHeader{}, false, nil
		}
		if err == nil && want >= 0 && h.base != want {
			err = fmt.Errorf("index says offset %d at %d, batch there has %d", want, h.pos, h.base)
		}
		if err != nil {
			return batchHeader{}, false, fmt.Errorf("read segment %d: %w: %w", v.seg.base, ErrCorruptLog, err)
		}
		if h.last >= offset {
			return h, true, nil
		}
		want = -1
	}
}

// cutoff returns the end position and next offset of a read starting with
// batch first: bounded by upTo (exclusive) and by maxBytes, but never
// shorter than first itself.
func (v segView) cutoff(first batchHeader, maxBytes int, upTo int64) (int64, int64, error) {
	limitPos, limitNext, err := v.limit(upTo)
	if err != nil {
		return 0, 0, err
	}
	want := first.pos + int64(max(maxBytes, 0))
	switch {
	case want >= limitPos:
		return limitPos, limitNext, nil
	case first.end() >= want:
		return first.end(), first.next(), nil
	}
	return v.lastBoundary(first, want)
}

// limit returns the position and offset of the first batch that reaches
// upTo or beyond: where a read bounded by upTo must stop. It reads only
// headers of batches that start below upTo, so bytes above the high
// watermark, which a truncation may be cutting concurrently, are never
// touched.
func (v segView) limit(upTo int64) (int64, int64, error) {
	if upTo >= v.next {
		return v.size, v.next, nil
	}
	e := lookupOffset(v.index, uint32(upTo-v.seg.base))
	pos, next := int64(e.pos), v.seg.base+int64(e.rel)
	w := newWalker(v.seg.f, pos, v.size, walkBufSize)
	defer w.close()
	for next < upTo {
		h, err := w.next()
		if err == nil && h.base != next {
			err = fmt.Errorf("batch at %d has base %d, want %d", h.pos, h.base, next)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read segment %d: %w: %w", v.seg.base, ErrCorruptLog, err)
		}
		if h.next() > upTo {
			return h.pos, h.base, nil
		}
		pos, next = h.end(), h.next()
	}
	return pos, next, nil
}

// lastBoundary returns the last batch boundary at or below want (beyond
// first's end), starting from the index entry closest below it.
func (v segView) lastBoundary(first batchHeader, want int64) (int64, int64, error) {
	endPos, next := first.end(), first.next()
	from := first.pos
	if e := lookupPosition(v.index, uint32(want)); int64(e.pos) > first.pos {
		from, endPos, next = int64(e.pos), int64(e.pos), v.seg.base+int64(e.rel)
	}
	w := newWalker(v.seg.f, from, want, walkBufSize)
	defer w.close()
	for {
		h, err := w.next()
		if errors.Is(err, io.EOF) || errors.Is(err, errTorn) {
			return endPos, next, nil // the next batch ends beyond want
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read segment %d: %w: %w", v.seg.base, ErrCorruptLog, err)
		}
		endPos, next = h.end(), h.next()
	}
}
