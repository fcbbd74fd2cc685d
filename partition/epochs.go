package partition

import "sort"

// EpochStart records where a leader epoch (a raft term) began in the log:
// the log end offset when its leader's first entry, the no-op, applied.
type EpochStart struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"start_offset"`
}

// epochCache is the ordered list of epoch starts, as Kafka's
// leader-epoch-checkpoint holds it.
type epochCache []EpochStart

// note records that epoch began at offset, if it is newer than the last.
func (c epochCache) note(epoch int32, offset int64) epochCache {
	if n := len(c); n > 0 && c[n-1].Epoch >= epoch {
		return c
	}
	return append(c, EpochStart{epoch, offset})
}

// endOffset answers OffsetForLeaderEpoch as Kafka's LeaderEpochFileCache
// does: for the current epoch, the log end; for an older one, the start of
// the next epoch above it, with the largest known epoch at or below it (or
// the requested epoch itself when it predates every known one); for an
// unknown newer epoch, (-1, -1).
func (c epochCache) endOffset(epoch int32, logEnd int64) (int32, int64) {
	n := len(c)
	switch {
	case epoch < 0 || n == 0:
		return -1, -1
	case c[n-1].Epoch == epoch:
		return epoch, logEnd
	}
	hi := sort.Search(n, func(i int) bool { return c[i].Epoch > epoch })
	if hi == n {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c[0].StartOffset
	}
	return c[hi-1].Epoch, c[hi].StartOffset
}

// assign records that epoch began at offset, as Kafka's
// LeaderEpochFileCache.assign does since KAFKA-7415 (PR 5678): entries that
// the new start contradicts (an epoch at or above it, or a start at or
// above offset) are dropped first, so the cache stays increasing in both
// epoch and offset. A start for the latest epoch at or above the known one
// changes nothing. Unlike note, which the raft Replica uses and which only
// ever appends, assign may rewrite the tail: an ISR follower's log is cut
// and refilled by whichever leader it follows.
func (c epochCache) assign(epoch int32, offset int64) epochCache {
	if n := len(c); n > 0 && c[n-1].Epoch == epoch && c[n-1].StartOffset <= offset {
		return c
	}
	keep := len(c)
	for keep > 0 && (c[keep-1].Epoch >= epoch || c[keep-1].StartOffset >= offset) {
		keep--
	}
	return append(c[:keep:keep], EpochStart{epoch, offset})
}

// truncateFrom drops the starts at or above offset, as Kafka's
// truncateFromEnd does when the log is cut there.
func (c epochCache) truncateFrom(offset int64) epochCache {
	keep := len(c)
	for keep > 0 && c[keep-1].StartOffset >= offset {
		keep--
	}
	return c[:keep:keep]
}

// latest returns the newest epoch, or -1 when none is known.
func (c epochCache) latest() int32 {
	if len(c) == 0 {
		return -1
	}
	return c[len(c)-1].Epoch
}

// at returns the epoch the batch at offset belongs to: the latest start at
// or below it. ok is false before the first start.
func (c epochCache) at(offset int64) (epoch int32, ok bool) {
	i := sort.Search(len(c), func(i int) bool { return c[i].StartOffset > offset })
	if i == 0 {
		return 0, false
	}
	return c[i-1].Epoch, true
}
