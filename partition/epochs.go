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
