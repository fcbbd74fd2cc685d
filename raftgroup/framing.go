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

// frame builds a single-proposal entry whose payload is the parts joined,
// copying each part once.
func frame(o origin, parts ...[]byte) []byte {
	b := make([]byte, frameHeader, frameHeader+partsLen(parts))
	b[0] = frameVersion
	binary.BigEndian.PutUint64(b[1:9], o.node)
	binary.BigEndian.PutUint64(b[9:17], o.id)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func partsLen(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
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

// Small proposals are coalesced: the group's goroutine packs a run of them
// into one raft entry, so that one WAL record, one replication message
// entry and one apply turn carry many proposals (dragonboat and TiKV batch
// the same way). The state machine still sees each payload as its own
// Entry, with the raft index shared and Sub counting within it:
//
//	byte 0      frameBatchVersion
//	uvarint     count
//	count times: origin node (8 bytes), proposal id (8 bytes),
//	             uvarint payload length, payload
const frameBatchVersion = 2

// coalesceMax is the largest payload that is coalesced; larger ones are
// framed by their proposer and get an entry of their own.
const coalesceMax = 64 << 10

// frameBatch packs proposals (each with raw parts) into one entry.
func frameBatch(props []*Proposal) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, p := range props {
		n += 16 + binary.MaxVarintLen64 + partsLen(p.parts)
	}
	b := make([]byte, 0, n)
	b = append(b, frameBatchVersion)
	b = binary.AppendUvarint(b, uint64(len(props)))
	for _, p := range props {
		b = binary.BigEndian.AppendUint64(b, p.origin.node)
		b = binary.BigEndian.AppendUint64(b, p.origin.id)
		b = binary.AppendUvarint(b, uint64(partsLen(p.parts)))
		for _, part := range p.parts {
			b = append(b, part...)
		}
	}
	return b
}

// eachPayload calls fn with every (origin, payload) that data carries: one
// for a single frame, many for a batch frame, and once with a zero origin
// and nil payload for the leader's empty no-op. It stops at fn's first
// error.
func eachPayload(data []byte, fn func(o origin, payload []byte) error) error {
	if len(data) == 0 || data[0] != frameBatchVersion {
		o, payload, err := unframe(data)
		if err != nil {
			return err
		}
		return fn(o, payload)
	}
	count, k := binary.Uvarint(data[1:])
	if k <= 0 || count == 0 || count > uint64(len(data)) {
		return fmt.Errorf("%w: batch count", ErrBadFrame)
	}
	rest := data[1+k:]
	for i := uint64(0); i < count; i++ {
		if len(rest) < 16 {
			return fmt.Errorf("%w: batch entry %d truncated", ErrBadFrame, i)
		}
		o := origin{node: binary.BigEndian.Uint64(rest[:8]), id: binary.BigEndian.Uint64(rest[8:16])}
		size, k := binary.Uvarint(rest[16:])
		if k <= 0 || o.node == 0 || size > uint64(len(rest)-16-k) {
			return fmt.Errorf("%w: batch entry %d header", ErrBadFrame, i)
		}
		rest = rest[16+k:]
		if err := fn(o, rest[:size:size]); err != nil {
			return err
		}
		rest = rest[size:]
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the batch", ErrBadFrame, len(rest))
	}
	return nil
}
