package partition

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// indexEntrySize is the size of one .index entry: the batch's base offset
// relative to the segment's base, then its byte position, both uint32
// big-endian (Kafka's layout; Kafka indexes a batch's last offset, we its
// base offset).
const indexEntrySize = 8

// indexEntry locates one batch inside its segment.
type indexEntry struct {
	rel uint32 // base offset - segment base
	pos uint32 // byte position in the .log file
}

func encodeIndex(es []indexEntry) []byte {
	b := make([]byte, len(es)*indexEntrySize)
	for i, e := range es {
		binary.BigEndian.PutUint32(b[i*indexEntrySize:], e.rel)
		binary.BigEndian.PutUint32(b[i*indexEntrySize+4:], e.pos)
	}
	return b
}

// decodeIndex parses an .index file. Entries must rise strictly in both
// offset and position, or the file is rejected (and rebuilt by the caller).
func decodeIndex(b []byte) ([]indexEntry, error) {
	if len(b)%indexEntrySize != 0 {
		return nil, fmt.Errorf("index size %d is not a multiple of %d", len(b), indexEntrySize)
	}
	es := make([]indexEntry, len(b)/indexEntrySize)
	for i := range es {
		es[i] = indexEntry{
			rel: binary.BigEndian.Uint32(b[i*indexEntrySize:]),
			pos: binary.BigEndian.Uint32(b[i*indexEntrySize+4:]),
		}
		if i > 0 && (es[i].rel <= es[i-1].rel || es[i].pos <= es[i-1].pos) {
			return nil, fmt.Errorf("index entry %d does not rise", i)
		}
	}
	return es, nil
}

// lookupOffset returns the last entry at or below rel, or the segment's
// start (0, 0) when there is none.
func lookupOffset(es []indexEntry, rel uint32) indexEntry {
	i := sort.Search(len(es), func(i int) bool { return es[i].rel > rel })
	if i == 0 {
		return indexEntry{}
	}
	return es[i-1]
}

// lookupPosition returns the last entry at or below byte position pos, or
// the segment's start.
func lookupPosition(es []indexEntry, pos uint32) indexEntry {
	i := sort.Search(len(es), func(i int) bool { return es[i].pos > pos })
	if i == 0 {
		return indexEntry{}
	}
	return es[i-1]
}

// truncateIndex returns the entries below rel in a new slice, so readers
// holding the old slice never see it rewritten.
func truncateIndex(es []indexEntry, rel uint32) []indexEntry {
	i := sort.Search(len(es), func(i int) bool { return es[i].rel >= rel })
	return append([]indexEntry(nil), es[:i]...)
}
