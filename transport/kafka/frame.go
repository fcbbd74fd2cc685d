package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readFrame reads one size-prefixed frame from r. The returned slice is
// freshly allocated and owned by the caller. io.EOF means r ended exactly
// at a frame boundary.
func readFrame(r io.Reader, maxBytes int) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, truncated(err)
	}
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	switch {
	case size < 0:
		return nil, fmt.Errorf("%w: negative frame size %d", ErrMalformed, size)
	case int64(size) > int64(maxBytes):
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, size, maxBytes)
	case size < minFrameBytes:
		return nil, fmt.Errorf("%w: frame of %d bytes cannot hold a request header", ErrMalformed, size)
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(r, frame); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, truncated(err)
	}
	return frame, nil
}

// truncated maps a mid-frame EOF to ErrTruncated and leaves other errors
// (a clean EOF, timeouts, closed sockets) as they are.
func truncated(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return err
}

// decodeHeader decodes a request header and returns an empty request of
// that key with its version set, and the body bytes after the header. An
// unknown key yields an *UnsupportedError carrying what could be read.
func decodeHeader(frame []byte) (Header, kmsg.Request, []byte, error) {
	r := kbin.Reader{Src: frame}
	h := Header{Key: r.Int16(), Version: r.Int16(), CorrelationID: r.Int32()}
	if !r.Ok() {
		return h, nil, nil, fmt.Errorf("%w: short request header", ErrMalformed)
	}
	if h.Version < 0 {
		return h, nil, nil, fmt.Errorf("%w: negative version %d of api key %d", ErrMalformed, h.Version, h.Key)
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, nil, &UnsupportedError{Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID, UnknownKey: true}
	}
	req.SetVersion(h.Version)
	if h.Key == 7 && h.Version == 0 {
		// ControlledShutdown v0 predates the client id.
		return h, req, r.Src, nil
	}
	h.ClientID = r.NullableString()
	if req.IsFlexible() {
		h.Tags = kmsg.ReadTags(&r)
	}
	if err := r.Complete(); err != nil {
		return h, nil, nil, fmt.Errorf("%w: %s v%d header: %w", ErrMalformed, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, r.Src, nil
}

// decodeBody decodes body into req, whose version is already set.
func decodeBody(h Header, req kmsg.Request, body []byte) error {
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %s v%d body (correlation id %d): %w", ErrMalformed, kmsg.NameForKey(h.Key), h.Version, h.CorrelationID, err)
	}
	return nil
}

// responseHeaderFlexible reports whether the response to h uses header v1
// (with a tagged-field section). ApiVersions responses never do, so that a
// client can read them before knowing what the broker speaks.
func responseHeaderFlexible(h Header, req kmsg.Request) bool {
	return h.Key != apiVersionsKey && req.IsFlexible()
}

// appendResponseHeader appends a response's size prefix placeholder and
// header; the caller patches the size with patchSize.
func appendResponseHeader(dst []byte, corr int32, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if flexible {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}
