package raftgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Every normal entry a Group proposes carries a header naming its origin,
// so that the proposer's node can find the waiter when the entry is
// persisted and applied (as etcd server frames request ids):
//
//	byte 0      frameVersion
//	bytes 1-8   origin node id, big endian
//	bytes 9-16  proposal id, unique per node incarnation, big endian
//	bytes 17-   payload
//
// Conf changes carry the same header, without payload, in their Context.
// An entry with empty data is the leader's no-op.
const (
	frameVersion = 1
	frameHeader  = 17
)

// ErrBadFrame means an entry's data is not in the group's framing: the log
// holds data this code did not write.
var ErrBadFrame = errors.New("raftgroup: bad entry frame")

type origin struct {
	node uint64
	id   uint64
}

func frame(o origin, payload []byte) []byte {
	b := make([]byte, frameHeader+len(payload))
	b[0] = frameVersion
	binary.BigEndian.PutUint64(b[1:9], o.node)
	binary.BigEndian.PutUint64(b[9:17], o.id)
	copy(b[frameHeader:], payload)
	return b
}

// unframe splits data into its origin and payload. Empty data is the
// leader's no-op: zero origin, nil payload, no error.
func unframe(data []byte) (origin, []byte, error) {
	if len(data) == 0 {
		return origin{}, nil, nil
	}
	if len(data) < frameHeader {
		return origin{}, nil, fmt.Errorf("%w: %d bytes, header needs %d", ErrBadFrame, len(data), frameHeader)
	}
	if data[0] != frameVersion {
		return origin{}, nil, fmt.Errorf("%w: version %d", ErrBadFrame, data[0])
	}
	o := origin{node: binary.BigEndian.Uint64(data[1:9]), id: binary.BigEndian.Uint64(data[9:17])}
	if o.node == 0 {
		return origin{}, nil, fmt.Errorf("%w: zero origin node", ErrBadFrame)
	}
	return o, data[frameHeader:], nil
}
