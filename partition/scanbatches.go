package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Header fields ScanBatches decodes besides the ones parseHeader reads.
const (
	offFirstTimestamp = 27
	offProducerID     = 43
	offProducerEpoch  = 51
	offBaseSequence   = 53
)

// ScanBatches calls fn with the header facts of every stored batch from the
// one containing from up to the last one that starts below to, in order.
// It reads headers only (the walker skips large bodies), so a scan costs
// about one read per batch whatever their size. An error from fn stops the
// scan and is returned as is. The segments scanned are those published
// when the scan starts; the owner must not truncate the log during it
// (ISRLog calls it from its own goroutine).
func (l *Log) ScanBatches(from, to int64, fn func(BatchInfo) error) error {
	views, err := l.scanViews(from, to)
	if err != nil {
		return err
	}
	defer func() {
		for _, v := range views {
			v.seg.release()
		}
	}()
	for _, v := range views {
		if err := v.scan(from, to, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanViews snapshots the segments holding [from, to) and takes a
// reference on each.
func (l *Log) scanViews(from, to int64) ([]segView, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	end := l.active().next
	if from < l.start || from > end {
		return nil, &OffsetOutOfRangeError{Offset: from, Start: l.start, End: end}
	}
	var views []segView
	for i := l.segmentFor(from); i < len(l.segs) && l.segs[i].base < to; i++ {
		l.segs[i].acquire()
		views = append(views, l.segs[i].view())
	}
	return views, nil
}

// scan walks one segment's batches in [from, to).
func (v segView) scan(from, to int64, fn func(BatchInfo) error) error {
	pos := int64(0)
	if from > v.seg.base {
		h, ok, err := v.find(from)
		if err != nil || !ok {
			return err
		}
		pos = h.pos
	}
	w := newWalker(v.seg.f, pos, v.size, walkBufSize)
	defer w.close()
	for {
		h, b, err := w.nextHeader()
		if errors.Is(err, io.EOF) || (err == nil && h.base >= to) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("scan segment %d: %w: %w", v.seg.base, ErrCorruptLog, err)
		}
		if err := fn(storedInfo(h, b)); err != nil {
			return err
		}
	}
}

// nextHeader is next plus the batch's header bytes, valid until the next
// call.
func (w *walker) nextHeader() (batchHeader, []byte, error) {
	at := w.pos
	h, err := w.next()
	if err != nil {
		return h, nil, err
	}
	w.pos = at
	b, err := w.peek(batchHeaderSize)
	w.pos = h.end()
	return h, b, err
}

// storedInfo decodes the BatchInfo of a stored batch from its header bytes
// (the walker has checked the framing; recovery validated the rest).
func storedInfo(h batchHeader, b []byte) BatchInfo {
	be := binary.BigEndian
	return BatchInfo{
		Size:            int(h.size),
		BaseOffset:      h.base,
		LeaderEpoch:     int32(be.Uint32(b[offLeaderEpoch:])),
		Attributes:      int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(h.last - h.base),
		FirstTimestamp:  int64(be.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:    h.maxTS,
		ProducerID:      int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:      int32(be.Uint32(b[offNumRecords:])),
	}
}
