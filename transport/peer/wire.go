package peer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// Frame layout (all integers big-endian):
//
//	length  uint32  bytes after the 8-byte header: kind + body
//	crc     uint32  CRC-32C (Castagnoli) of kind + body
//	kind    byte
//	body    length-1 bytes
const (
	frameHeader = 8
	// maxFrameLimit is the largest MaxFrameBytes a Config may set.
	maxFrameLimit = 1 << 30
	// shrinkAbove is the buffer capacity above which readers and writers
	// drop a buffer that is mostly unused.
	shrinkAbove = 4 << 20
)

// Frame kinds. Their values are part of the wire format.
const (
	kindBatch byte = 1 + iota // body: envelopes, see appendEnvelope
	kindPing                  // body: empty; keeps an idle connection alive
	kindChunk                 // body: snapshot body bytes
	kindEnd                   // body: empty; the snapshot body is complete
	kindAck                   // body: status byte, then the receiver's error text
	kindBye                   // body: empty; the sender is stopping cleanly and hangs up
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginFrame appends a header placeholder and the kind byte, and returns
// the frame's start offset for finishFrame.
func beginFrame(dst []byte, kind byte) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	return dst, start
}

// finishFrame fills in the header of the frame that begins at start and
// runs to the end of dst.
func finishFrame(dst []byte, start int) {
	payload := dst[start+frameHeader:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
}

// appendFrame appends one complete frame.
func appendFrame(dst []byte, kind byte, body []byte) []byte {
	dst, start := beginFrame(dst, kind)
	dst = append(dst, body...)
	finishFrame(dst, start)
	return dst
}

// frameReader reads frames from a stream. The body it returns aliases an
// internal buffer that the next call overwrites.
type frameReader struct {
	r   *bufio.Reader
	max int
	hdr [frameHeader]byte
	buf []byte
}

func newFrameReader(r io.Reader, size, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, size), max: max}
}

// next returns the next frame. io.EOF means the stream ended cleanly between
// frames; ErrFrameTooLarge and ErrCorruptFrame mean the stream can not be
// trusted any further.
func (fr *frameReader) next() (kind byte, body []byte, err error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:4])
	if n == 0 {
		return 0, nil, fmt.Errorf("%w: zero-length frame", ErrCorruptFrame)
	}
	if uint64(n) > uint64(fr.max) {
		return 0, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, fr.max)
	}
	if cap(fr.buf) < int(n) || (cap(fr.buf) > shrinkAbove && int(n) < cap(fr.buf)/4) {
		fr.buf = make([]byte, n) // grow, or let go of a buffer a rare huge frame left behind
	}
	payload := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		return 0, nil, noEOF(err)
	}
	if got, want := crc32.Checksum(payload, castagnoli), binary.BigEndian.Uint32(fr.hdr[4:]); got != want {
		return 0, nil, fmt.Errorf("%w: crc %08x, header says %08x (%d bytes, kind %d)", ErrCorruptFrame, got, want, n, payload[0])
	}
	return payload[0], payload[1:], nil
}

// noEOF turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
