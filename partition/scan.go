package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// errTorn marks bytes that are not a whole, well-formed batch: the end of
// the valid part of a segment.
var errTorn = errors.New("torn or malformed batch")

// batchHeader is what the log learns from a stored batch's first 61 bytes.
type batchHeader struct {
	pos   int64 // byte position in the segment
	size  int64 // bytes, header included
	base  int64
	last  int64
	maxTS int64
}

func (h batchHeader) next() int64 { return h.last + 1 }
func (h batchHeader) end() int64  { return h.pos + h.size }

// parseHeader reads a stored batch header. It checks only what a walk needs
// to step safely to the next batch; recovery validates the rest.
func parseHeader(b []byte, pos int64) (batchHeader, error) {
	length := int64(int32(binary.BigEndian.Uint32(b[offLength:])))
	delta := int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])))
	if length < batchHeaderSize-framePrefix || b[offMagic] != 2 || delta < 0 {
		return batchHeader{}, fmt.Errorf("batch at %d: %w", pos, errTorn)
	}
	base := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	return batchHeader{
		pos:   pos,
		size:  framePrefix + length,
		base:  base,
		last:  base + delta,
		maxTS: int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
	}, nil
}

// walker steps through the batches of a segment file from a batch boundary
// up to limit. It reads through a buffer so that small batches cost one
// read per buffer rather than one per batch, but once it has seen a batch
// that fills a quarter of the buffer it reads bare headers, so stepping
// over large batches does not read their bodies.
type walker struct {
	r     io.ReaderAt
	pos   int64 // position of the next batch
	limit int64
	buf   []byte
	bufAt int64 // file position of buf[0]
	n     int   // valid bytes in buf
	large bool  // batches seen so far are large: read headers only
	pool  *[]byte
}

// walkBufs recycles the buffers of short walks (lookups on the read path).
var walkBufs = sync.Pool{New: func() any { b := make([]byte, walkBufSize); return &b }}

func newWalker(r io.ReaderAt, pos, limit int64, bufSize int) *walker {
	w := &walker{r: r, pos: pos, limit: limit, bufAt: -1, large: true}
	if bufSize == walkBufSize {
		w.pool = walkBufs.Get().(*[]byte)
		w.buf = *w.pool
	} else {
		w.buf = make([]byte, bufSize)
	}
	return w
}

// close returns a pooled buffer; the walker must not be used after.
func (w *walker) close() {
	if w.pool != nil {
		walkBufs.Put(w.pool)
		w.pool, w.buf = nil, nil
	}
}

// next returns the header of the batch at the walker's position and steps
// past it. io.EOF means the walk reached limit exactly; errTorn means the
// bytes there are not a whole batch.
func (w *walker) next() (batchHeader, error) {
	if w.pos >= w.limit {
		return batchHeader{}, io.EOF
	}
	if w.limit-w.pos < batchHeaderSize {
		return batchHeader{}, fmt.Errorf("%d bytes at %d: %w", w.limit-w.pos, w.pos, errTorn)
	}
	b, err := w.peek(batchHeaderSize)
	if err != nil {
		return batchHeader{}, err
	}
	h, err := parseHeader(b, w.pos)
	if err != nil {
		return batchHeader{}, err
	}
	if h.end() > w.limit {
		return batchHeader{}, fmt.Errorf("batch at %d runs past %d: %w", h.pos, w.limit, errTorn)
	}
	w.large = h.size > int64(len(w.buf)/4)
	w.pos = h.end()
	return h, nil
}

// nextBatch is next plus the batch's bytes, valid until the next call.
func (w *walker) nextBatch() (batchHeader, []byte, error) {
	at := w.pos
	h, err := w.next()
	if err != nil {
		return h, nil, err
	}
	w.pos = at
	w.large = false
	b, err := w.peek(int(h.size))
	w.pos = h.end()
	return h, b, err
}

// peek returns n bytes at the walker's position, refilling the buffer (and
// growing it for a batch larger than the buffer) when they are not there.
func (w *walker) peek(n int) ([]byte, error) {
	if w.bufAt >= 0 && w.pos >= w.bufAt && w.pos+int64(n) <= w.bufAt+int64(w.n) {
		off := int(w.pos - w.bufAt)
		return w.buf[off : off+n], nil
	}
	if n > len(w.buf) {
		w.buf = make([]byte, n)
	}
	m := int(min(int64(len(w.buf)), w.limit-w.pos))
	if w.large {
		m = n
	}
	got, err := w.r.ReadAt(w.buf[:m], w.pos)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		w.bufAt = -1
		return nil, fmt.Errorf("read %d bytes at %d: %w", n, w.pos, err)
	}
	w.bufAt, w.n = w.pos, got
	return w.buf[:n], nil
}
