package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/raftq/raftq/raftgroup"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A kindBatch body is a sequence of envelopes, each
//
//	group  uvarint  raft group id
//	size   uvarint  length of msg
//	msg    size bytes, raftpb.Message in protobuf encoding
//
// running to the end of the frame. An empty body is invalid.

// errNilMessage marks an envelope without a message; it is dropped.
var errNilMessage = errors.New("peer: envelope without a message")

var (
	marshalOpts   = proto.MarshalOptions{UseCachedSize: true}
	unmarshalOpts = proto.UnmarshalOptions{Merge: true}
)

// encodeStats counts what appendSized did.
type encodeStats struct {
	frames, msgs, dropped int
	firstErr              error
}

// appendSized appends batch to dst as kindBatch frames whose payload
// stays within max bytes, splitting the batch where needed and keeping
// its order; sizes holds each message's encoded size and total the
// envelopes', as sizeBatch computes them. A message that can not be
// encoded, or alone exceeds max, is dropped and counted; raft retransmits
// what matters.
func appendSized(dst []byte, batch []raftgroup.Envelope, sizes []int, total, max int) ([]byte, encodeStats) {
	var st encodeStats
	// One growth for the whole batch: protobuf's MarshalAppend would
	// otherwise reallocate to the exact size for every message that does
	// not fit, copying everything encoded so far each time.
	dst = slices.Grow(dst, total+(frameHeader+1)*(2+total/max))
	dst, start := beginFrame(dst, kindBatch)
	payload := 1 // the kind byte
	for i := range batch {
		group, m := batch[i].Group, batch[i].Msg
		if m == nil {
			st.drop(fmt.Errorf("%w: group %d", errNilMessage, group))
			continue
		}
		size := sizes[i]
		need := uvarintLen(group) + uvarintLen(uint64(size)) + size
		if 1+need > max {
			st.drop(fmt.Errorf("%w: group %d %s of %d bytes, limit %d", ErrMessageTooLarge, group, m.GetType(), need, max))
			continue
		}
		if payload+need > max {
			finishFrame(dst, start)
			st.frames++
			dst, start = beginFrame(dst, kindBatch)
			payload = 1
		}
		var err error
		if dst, err = appendEnvelope(dst, group, m, size); err != nil {
			st.drop(err)
			continue
		}
		payload += need
		st.msgs++
	}
	if payload == 1 {
		return dst[:start], st
	}
	finishFrame(dst, start)
	st.frames++
	return dst, st
}

// sizeBatch returns each message's encoded size (which protobuf caches
// for the marshal that follows) and the bytes all envelopes take.
func sizeBatch(batch []raftgroup.Envelope) ([]int, int) {
	sizes := make([]int, len(batch))
	for i := range batch {
		if m := batch[i].Msg; m != nil {
			sizes[i] = proto.Size(m)
		}
	}
	return sizes, envelopeBytes(sizes)
}

// envelopeBytes bounds the bytes envelopes of these message sizes take.
func envelopeBytes(sizes []int) int {
	total := 0
	for _, n := range sizes {
		total += 2*binary.MaxVarintLen64 + n
	}
	return total
}

func (st *encodeStats) drop(err error) {
	st.dropped++
	if st.firstErr == nil {
		st.firstErr = err
	}
}

// appendEnvelope appends one envelope; on error dst is returned unchanged.
func appendEnvelope(dst []byte, group uint64, m *raftpb.Message, size int) ([]byte, error) {
	mark := len(dst)
	dst = binary.AppendUvarint(dst, group)
	dst = binary.AppendUvarint(dst, uint64(size))
	body := len(dst)
	dst, err := marshalOpts.MarshalAppend(dst, m)
	if err != nil {
		return dst[:mark], fmt.Errorf("marshal group %d %s: %w", group, m.GetType(), err)
	}
	if got := len(dst) - body; got != size {
		return dst[:mark], fmt.Errorf("marshal group %d %s: %d bytes, sized %d", group, m.GetType(), got, size)
	}
	return dst, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// decodeBatch decodes a kindBatch body. It checks the whole structure before
// it allocates, so a hostile length costs nothing; the messages' byte fields
// are copied, so body may be reused afterwards.
func decodeBatch(body []byte) ([]raftgroup.Envelope, error) {
	n, err := countEnvelopes(body)
	if err != nil {
		return nil, err
	}
	envs := make([]raftgroup.Envelope, n)
	msgs := make([]raftpb.Message, n) // one allocation for the batch's messages
	for i := range envs {
		group, msg, rest := splitEnvelope(body)
		envs[i] = raftgroup.Envelope{Group: group, Msg: &msgs[i]}
		if err := unmarshalOpts.Unmarshal(msg, envs[i].Msg); err != nil {
			return nil, fmt.Errorf("%w: envelope %d (group %d): %w", ErrCorruptFrame, i, group, err)
		}
		body = rest
	}
	return envs, nil
}

// countEnvelopes validates the envelope framing of body and counts them.
func countEnvelopes(body []byte) (int, error) {
	n := 0
	for off := 0; off < len(body); n++ {
		_, k := binary.Uvarint(body[off:])
		if k <= 0 {
			return 0, fmt.Errorf("%w: envelope %d: bad group varint at byte %d", ErrCorruptFrame, n, off)
		}
		off += k
		size, k := binary.Uvarint(body[off:])
		if k <= 0 {
			return 0, fmt.Errorf("%w: envelope %d: bad size varint at byte %d", ErrCorruptFrame, n, off)
		}
		off += k
		if size > uint64(len(body)-off) {
			return 0, fmt.Errorf("%w: envelope %d claims %d bytes, %d left", ErrCorruptFrame, n, size, len(body)-off)
		}
		off += int(size)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: empty batch", ErrCorruptFrame)
	}
	return n, nil
}

// splitEnvelope takes the first envelope off a body countEnvelopes accepted.
func splitEnvelope(body []byte) (group uint64, msg, rest []byte) {
	group, k := binary.Uvarint(body)
	body = body[k:]
	size, k := binary.Uvarint(body)
	body = body[k:]
	return group, body[:size], body[size:]
}
