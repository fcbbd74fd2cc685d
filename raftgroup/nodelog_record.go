package raftgroup

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The shared node WAL (nodeLog) stores one etcd WAL entry per record; the
// entry's Data is one of these records, tagged by its first byte. Fields
// are protobuf varints and length-prefixed bytes (protowire), and the
// raft messages inside are raft's own protobuf encodings.
const (
	// recSave is a group's Save: its hard state (empty: unchanged) and
	// the entries it appended, which may overwrite a suffix of its log.
	recSave byte = 1
	// recSnapshot is a group's durable snapshot; an installed snapshot
	// (from the leader) replaces the group's whole log, a local one only
	// covers a prefix of it.
	recSnapshot byte = 2
	// recRemove forgets a group: its replica was removed from this node.
	recRemove byte = 3
	// recCheckpoint restates every group's hard state and snapshot, so
	// that segments before it can go once no group needs their entries.
	recCheckpoint byte = 4
)

var errBadRecord = errors.New("raftgroup: corrupt node wal record")

// logRecord is a decoded record.
type logRecord struct {
	kind    byte
	group   uint64
	hs      *raftpb.HardState // recSave, may be nil
	ents    []*raftpb.Entry   // recSave
	snap    *walpb.Snapshot   // recSnapshot
	install bool              // recSnapshot
	groups  []groupState      // recCheckpoint
}

// groupState is one group's line in a checkpoint.
type groupState struct {
	group uint64
	hs    *raftpb.HardState // nil: none yet
	snap  *walpb.Snapshot   // nil: none yet
}

func appendMessage(b []byte, m proto.Message) []byte {
	if m == nil {
		return protowire.AppendVarint(b, 0)
	}
	b = protowire.AppendVarint(b, uint64(proto.Size(m)))
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
	if err != nil {
		panic(fmt.Sprintf("raftgroup: marshal %T: %v", m, err)) // raft's own messages always marshal
	}
	return out
}

// appendSave appends a recSave to b (best with room for it: see
// splitSave for the size).
func appendSave(b []byte, group uint64, hs *raftpb.HardState, ents []*raftpb.Entry) []byte {
	b = append(b, recSave)
	b = protowire.AppendVarint(b, group)
	b = appendMessage(b, hardStateOrNil(hs))
	b = protowire.AppendVarint(b, uint64(len(ents)))
	for _, e := range ents {
		b = appendMessage(b, e)
	}
	return b
}

// hardStateOrNil keeps an empty hard state out of the record, so that
// decoding tells "unchanged" from a real state.
func hardStateOrNil(hs *raftpb.HardState) proto.Message {
	if hs == nil || raft.IsEmptyHardState(hs) {
		return nil
	}
	return hs
}

func snapOrNil(s *walpb.Snapshot) proto.Message {
	if s == nil {
		return nil
	}
	return s
}

func encodeSnapshot(group uint64, snap *walpb.Snapshot, install bool) []byte {
	b := []byte{recSnapshot}
	b = protowire.AppendVarint(b, group)
	b = protowire.AppendVarint(b, protowire.EncodeBool(install))
	return appendMessage(b, snap)
}

func encodeRemove(group uint64) []byte {
	return protowire.AppendVarint([]byte{recRemove}, group)
}

func encodeCheckpoint(groups []groupState) []byte {
	b := []byte{recCheckpoint}
	b = protowire.AppendVarint(b, uint64(len(groups)))
	for _, g := range groups {
		b = protowire.AppendVarint(b, g.group)
		b = appendMessage(b, hardStateOrNil(g.hs))
		b = appendMessage(b, snapOrNil(g.snap))
	}
	return b
}

// recordReader consumes a record's fields; the first error sticks.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) varint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		r.err = fmt.Errorf("%w: %v", errBadRecord, protowire.ParseError(n))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// message decodes a length-prefixed message into m; it reports false for
// an empty one (nothing recorded).
func (r *recordReader) message(m proto.Message) bool {
	if r.err != nil {
		return false
	}
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		r.err = fmt.Errorf("%w: %v", errBadRecord, protowire.ParseError(n))
		return false
	}
	r.b = r.b[n:]
	if len(v) == 0 {
		return false
	}
	if err := proto.Unmarshal(v, m); err != nil {
		r.err = fmt.Errorf("%w: %T: %v", errBadRecord, m, err)
		return false
	}
	return true
}

// count reads a length that must fit in what is left of the record, each
// item taking at least min bytes, so a corrupt count cannot allocate much.
func (r *recordReader) count(min int) int {
	n := r.varint()
	if r.err == nil && n > uint64(len(r.b)/min) {
		r.err = fmt.Errorf("%w: count %d exceeds the record", errBadRecord, n)
		return 0
	}
	return int(n)
}

func (r *recordReader) hardState() *raftpb.HardState {
	hs := &raftpb.HardState{}
	if !r.message(hs) {
		return nil
	}
	return hs
}

func (r *recordReader) snapshot() *walpb.Snapshot {
	s := &walpb.Snapshot{}
	if !r.message(s) {
		return nil
	}
	return s
}

// decodeRecord parses a record written by one of the encoders above.
func decodeRecord(b []byte) (logRecord, error) {
	if len(b) == 0 {
		return logRecord{}, fmt.Errorf("%w: empty", errBadRecord)
	}
	rec := logRecord{kind: b[0]}
	r := &recordReader{b: b[1:]}
	switch rec.kind {
	case recSave:
		rec.group = r.varint()
		rec.hs = r.hardState()
		n := r.count(1)
		for range n {
			e := &raftpb.Entry{}
			if r.message(e) || r.err == nil {
				rec.ents = append(rec.ents, e)
			}
		}
	case recSnapshot:
		rec.group = r.varint()
		rec.install = protowire.DecodeBool(r.varint())
		if rec.snap = r.snapshot(); rec.snap == nil && r.err == nil {
			r.err = fmt.Errorf("%w: snapshot record without a snapshot", errBadRecord)
		}
	case recRemove:
		rec.group = r.varint()
	case recCheckpoint:
		n := r.count(3)
		for range n {
			g := groupState{group: r.varint()}
			g.hs = r.hardState()
			g.snap = r.snapshot()
			rec.groups = append(rec.groups, g)
		}
	default:
		return logRecord{}, fmt.Errorf("%w: unknown kind %d", errBadRecord, rec.kind)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errBadRecord, len(r.b))
	}
	if r.err != nil {
		return logRecord{}, r.err
	}
	return rec, nil
}
