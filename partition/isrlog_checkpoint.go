package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/raftq/raftq/internal/durable"
)

// isrCheckpointName is the stem of the ISR checkpoint files. There are two,
// <stem>.0 and <stem>.1, written alternately, so that when the newer one
// describes more log than recovery kept (a disk that lost synced bytes, or
// a crash inside TruncateTo) the older one is still there to fall back on.
const isrCheckpointName = "isr.checkpoint"

// isrCheckpoint is the replica's state as of log offset Offset: when it was
// written, [Start, Offset) was durable (a Log.Sync had just returned) and
// Producers and Epochs described exactly those batches. Seq orders the two
// files.
type isrCheckpoint struct {
	Seq       uint64                   `json:"seq"`
	Start     int64                    `json:"start"`
	Offset    int64                    `json:"offset"`
	Producers map[int64]*ProducerState `json:"producers,omitempty"`
	Epochs    epochCache               `json:"epochs,omitempty"`
}

// checkpointSlots is what the owner knows of the two checkpoint files.
type checkpointSlots struct {
	seq    uint64    // the newest Seq written or read
	raw    [2][]byte // each file's contents; nil when absent or unreadable
	offset [2]int64  // each file's Offset; -1 when raw is nil
}

func isrCheckpointPath(dir string, slot int) string {
	return filepath.Join(dir, fmt.Sprintf("%s.%d", isrCheckpointName, slot))
}

func encodeISRCheckpoint(c *isrCheckpoint) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode isr checkpoint: %w", err)
	}
	return sealCheckpoint(body), nil
}

// decodeISRCheckpoint checks the CRC line sealCheckpoint added and decodes
// the body into fresh state (nothing shared with an earlier decode).
func decodeISRCheckpoint(b []byte) (*isrCheckpoint, error) {
	body, err := unsealCheckpoint(b, "isr checkpoint")
	if err != nil {
		return nil, err
	}
	c := &isrCheckpoint{}
	if err := json.Unmarshal(body, c); err != nil {
		return nil, fmt.Errorf("%w: isr checkpoint: %w", ErrCorruptLog, err)
	}
	if c.Offset < 0 || c.Start < 0 {
		return nil, fmt.Errorf("%w: isr checkpoint with negative offsets", ErrCorruptLog)
	}
	return c, nil
}

// readSlots reads both checkpoint files. A missing file is an empty slot;
// one that does not decode is too, with a warning: the other file or a
// scan of the log replaces it.
func (r *ISRLog) readSlots(fsys FS) error {
	for slot := range 2 {
		r.cps.offset[slot] = -1
		b, err := readFile(fsys, isrCheckpointPath(r.cfg.Dir, slot))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read isr checkpoint: %w", err)
		}
		c, err := decodeISRCheckpoint(b)
		if err != nil {
			// Written by rename, it is never torn: the disk damaged it.
			r.logger.Warn("ignoring unreadable isr checkpoint", "dir", r.cfg.Dir, "slot", slot, "err", err)
			r.lostData = true
			continue
		}
		r.cps.raw[slot], r.cps.offset[slot] = b, c.Offset
		r.cps.seq = max(r.cps.seq, c.Seq)
	}
	return nil
}

// newestUpTo returns a fresh decode of the newest checkpoint whose Offset
// is at most end, or nil when neither is.
func (r *ISRLog) newestUpTo(end int64) *isrCheckpoint {
	var best *isrCheckpoint
	for slot := range 2 {
		if r.cps.raw[slot] == nil || r.cps.offset[slot] > end {
			continue
		}
		c, err := decodeISRCheckpoint(r.cps.raw[slot])
		if err == nil && (best == nil || c.Seq > best.Seq) {
			best = c
		}
	}
	return best
}

// Checkpoint makes the log durable (Log.Sync) and then records the
// producers and epochs as of the log end, so that Open rescans only what
// follows. The owner calls it when a segment rolls and on a timer (Kafka:
// every 60 s); Close and BecomeLeader call it too.
func (r *ISRLog) Checkpoint() error {
	if err := r.log.Sync(); err != nil {
		return fmt.Errorf("isr checkpoint: %w", err)
	}
	return r.writeCheckpoint(r.log.EndOffset())
}

// writeCheckpoint writes the state as of offset into the older slot. The
// caller has just synced [start, offset).
func (r *ISRLog) writeCheckpoint(offset int64) error {
	c := &isrCheckpoint{Seq: r.cps.seq + 1, Start: r.log.StartOffset(), Offset: offset, Producers: r.producers, Epochs: r.Epochs()}
	b, err := encodeISRCheckpoint(c)
	if err != nil {
		return err
	}
	slot := int(c.Seq % 2)
	w := durable.Writer{FS: durableFS{r.log.fs}, AfterTemp: func() { r.log.crashPoint("isr-checkpoint-tmp-written") }}
	if err := w.WriteFile(isrCheckpointPath(r.cfg.Dir, slot), b, 0o644); err != nil {
		return fmt.Errorf("write isr checkpoint: %w", err)
	}
	r.cps.seq, r.cps.raw[slot], r.cps.offset[slot] = c.Seq, b, offset
	return nil
}

// dropStaleCheckpoints replaces every checkpoint at staleFrom or beyond:
// after a truncation its producers and epochs no longer match the log,
// and once the log grew past its Offset again nothing would tell. A
// truncation passes the new end itself, because a checkpoint taken at
// exactly that end may name an epoch starting there, which the cut
// forgot (a leader's epoch that never got a batch); recovery passes the
// end plus one. At most two writes (one per slot).
func (r *ISRLog) dropStaleCheckpoints(staleFrom int64) error {
	for range 2 {
		if r.cps.offset[0] < staleFrom && r.cps.offset[1] < staleFrom {
			return nil
		}
		if err := r.Checkpoint(); err != nil {
			return err
		}
	}
	return nil
}

// load rebuilds the state after Open's recovery: from the newest
// checkpoint the recovered log covers (the other one, or nothing, when
// the newest claims more), then a header scan of the batches after it.
func (r *ISRLog) load() error {
	start, end := r.log.StartOffset(), r.log.EndOffset()
	r.lostData = r.lostData || r.log.RecoveryLostData() || r.cps.offset[0] > end || r.cps.offset[1] > end
	c := r.newestUpTo(end)
	if c == nil {
		c = &isrCheckpoint{Offset: start}
	}
	if c.Seq < r.cps.seq {
		r.logger.Warn("newest isr checkpoint lies beyond the recovered log; falling back",
			"dir", r.cfg.Dir, "end", end, "from", c.Offset, "seq", c.Seq)
	}
	r.setProducers(c.Producers)
	r.setEpochs(c.Epochs.truncateFrom(end + 1))
	if err := r.rescan(max(c.Offset, start), end); err != nil {
		return err
	}
	return r.dropStaleCheckpoints(end + 1)
}

// rescan replays the headers of the batches in [from, to) into the
// producers and epochs.
func (r *ISRLog) rescan(from, to int64) error {
	if from >= to {
		return nil
	}
	err := r.log.ScanBatches(from, to, func(info BatchInfo) error {
		seq, err := r.markerSeqAt(info, to)
		if err != nil {
			return err
		}
		r.noteBatch(info, info.BaseOffset, info.BaseOffset+int64(info.LastOffsetDelta), seq)
		return nil
	})
	if err != nil {
		return fmt.Errorf("rescan [%d, %d): %w", from, to, err)
	}
	return nil
}

// markerSeqAt is the transaction number of the marker whose header info
// is, read back from the log (headers alone do not carry it), or 0 for a
// batch that is not a marker. Without it a rescan would forget which
// markers the log already took, and a late copy of one would end the
// producer's next transaction.
func (r *ISRLog) markerSeqAt(info BatchInfo, upTo int64) (int32, error) {
	if !info.Control() {
		return 0, nil
	}
	b, err := r.log.Read(info.BaseOffset, 1, upTo) // exactly this batch
	if err != nil {
		return 0, fmt.Errorf("read marker at %d: %w", info.BaseOffset, err)
	}
	return batchMarkerSeq(b, info), nil
}

// removeCheckpoints deletes both checkpoint files durably.
func (r *ISRLog) removeCheckpoints() error {
	for slot := range 2 {
		if err := removeIfExists(r.log.fs, isrCheckpointPath(r.cfg.Dir, slot)); err != nil {
			return fmt.Errorf("remove isr checkpoint: %w", err)
		}
		r.cps.raw[slot], r.cps.offset[slot] = nil, -1
	}
	if err := r.log.fs.SyncDir(r.cfg.Dir); err != nil {
		return fmt.Errorf("remove isr checkpoint: sync dir: %w", err)
	}
	return nil
}
