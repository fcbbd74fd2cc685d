package partition

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// timeEntrySize is the size of one .timeindex entry: a timestamp (int64)
// then a relative offset (uint32), big-endian, as in Kafka.
const timeEntrySize = 12

// timeEntry says: every batch up to and including the one at base offset
// rel has a max timestamp of at most ts. Entries are added next to offset
// index entries (and when a segment is sealed) whenever the largest
// timestamp seen so far has grown, so ts rises strictly.
type timeEntry struct {
	ts  int64
	rel uint32
}

func encodeTimeIndex(es []timeEntry) []byte {
	b := make([]byte, len(es)*timeEntrySize)
	for i, e := range es {
		binary.BigEndian.PutUint64(b[i*timeEntrySize:], uint64(e.ts))
		binary.BigEndian.PutUint32(b[i*timeEntrySize+8:], e.rel)
	}
	return b
}

// decodeTimeIndex parses a .timeindex file: timestamps must rise strictly
// and offsets must not fall.
func decodeTimeIndex(b []byte) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("time index size %d is not a multiple of %d", len(b), timeEntrySize)
	}
	es := make([]timeEntry, len(b)/timeEntrySize)
	for i := range es {
		es[i] = timeEntry{
			ts:  int64(binary.BigEndian.Uint64(b[i*timeEntrySize:])),
			rel: binary.BigEndian.Uint32(b[i*timeEntrySize+8:]),
		}
		if i > 0 && (es[i].ts <= es[i-1].ts || es[i].rel < es[i-1].rel) {
			return nil, fmt.Errorf("time index entry %d does not rise", i)
		}
	}
	return es, nil
}

// lookupTime returns the last entry whose timestamp is below ts: every batch
// up to it is older than ts, so a search may start there. ok is false when
// the search must start at the segment's first batch.
func lookupTime(es []timeEntry, ts int64) (e timeEntry, ok bool) {
	i := sort.Search(len(es), func(i int) bool { return es[i].ts >= ts })
	if i == 0 {
		return timeEntry{}, false
	}
	return es[i-1], true
}

// truncateTimeIndex returns the entries below rel in a new slice.
func truncateTimeIndex(es []timeEntry, rel uint32) []timeEntry {
	i := sort.Search(len(es), func(i int) bool { return es[i].rel >= rel })
	return append([]timeEntry(nil), es[:i]...)
}
