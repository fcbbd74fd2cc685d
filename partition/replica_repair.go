package partition

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
)

// GapError is OpenReplica's answer when recovery cut the log below the
// end its checkpoint records: damaged batches that raft no longer holds
// (its log is compacted behind the snapshot the checkpoint belongs to),
// so replaying raft cannot rebuild them. The replica must not serve the
// hole; FillReplica copies [End, Next) from a replica that has it.
type GapError struct {
	Dir       string
	End, Next int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("partition %s: log ends at %d below its checkpoint's %d (damaged batches raft no longer holds)", e.Dir, e.End, e.Next)
}

// Unwrap makes a GapError an ErrCorruptLog.
func (e *GapError) Unwrap() error { return ErrCorruptLog }

// FillReplica copies into the log in cfg.Dir the batches its checkpoint
// records and recovery cut, from the log end to the checkpoint's end,
// through fetch(from, upTo): whole batches from another replica's log,
// starting at from, none reaching upTo. Raft replicas store the same
// batches at the same offsets, so another replica that has applied that
// far holds them exactly. Every fetched batch is checked in full (CRC
// included) before it is appended, so damage is never copied; the log
// is synced before FillReplica returns. It returns how many bytes it
// copied; OpenReplica then opens the replica whole.
func FillReplica(cfg ReplicaConfig, fetch func(from, upTo int64) ([]byte, error)) (int64, error) {
	if cfg.Log.FS == nil {
		cfg.Log.FS = OSFS()
	}
	cfg.Log.Logger = cfg.Logger
	cp, err := readReplicaCheckpoint(cfg.Log.FS, cfg.Dir)
	if err != nil {
		return 0, err
	}
	l, err := Open(cfg.Dir, cfg.Log)
	if err != nil {
		return 0, err
	}
	n, err := fill(l, cp.Next, fetch)
	if err == nil {
		err = l.Sync()
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("fill replica %s: %w", cfg.Dir, err)
	}
	return n, nil
}

func fill(l *Log, upTo int64, fetch func(from, upTo int64) ([]byte, error)) (int64, error) {
	var n int64
	for l.EndOffset() < upTo {
		from := l.EndOffset()
		b, err := fetch(from, upTo)
		if err != nil {
			return n, fmt.Errorf("fetch [%d, %d): %w", from, upTo, err)
		}
		if len(b) == 0 {
			return n, fmt.Errorf("fetch [%d, %d): no batch", from, upTo)
		}
		for len(b) > 0 {
			info, size, err := frameInfo(b)
			if err != nil {
				return n, err
			}
			batch := b[:size]
			b = b[size:]
			if _, err := ValidateStoredBatch(batch); err != nil {
				return n, fmt.Errorf("fetched batch at %d: %w", info.BaseOffset, err)
			}
			if info.BaseOffset+int64(info.LastOffsetDelta) >= upTo {
				return n, fmt.Errorf("%w: fetched batch at %d reaches past %d", ErrCorruptLog, info.BaseOffset, upTo)
			}
			if _, _, err := l.AppendReplica(batch); err != nil {
				return n, err
			}
			n += int64(size)
		}
	}
	return n, nil
}

// restoreInPlace is Restore for a replica whose checkpoint file was
// damaged (unanchored): raft's own copy of the checkpoint, the local
// snapshot's data, replaces the file, and the log is cut back to it as
// at open. When recovery cut the log below it, the file is still
// rewritten, so that the next open reports the GapError that
// FillReplica repairs.
func (r *Replica) restoreInPlace(snap *raftpb.Snapshot) error {
	idx := snap.GetMetadata().GetIndex()
	cp, err := decodeSnapshotData(snap)
	if err != nil {
		return err
	}
	cp.Applied = idx
	if err := writeReplicaCheckpoint(r.fs(), r.cfg.Dir, &cp); err != nil {
		return fmt.Errorf("partition: restore snapshot %d in place: %w", idx, err)
	}
	if err := cutAtWrongEpoch(r.Log(), cp.Epochs, cp.Next); err != nil {
		return fmt.Errorf("partition: restore snapshot %d in place: %w", idx, err)
	}
	if err := r.rewind(r.Log(), cp); err != nil {
		return fmt.Errorf("partition: restore snapshot %d in place: %w", idx, err)
	}
	r.unanchored = false
	r.adopt(cp)
	r.logger.Warn("replica checkpoint rebuilt from the raft snapshot", "dir", r.cfg.Dir, "snapshot", idx, "next", cp.Next)
	return nil
}

// anchorEmpty starts an unanchored replica's log over, empty at offset
// 0, when raft replays from its first entry (there was no snapshot to
// restore): the replay rebuilds everything.
func (r *Replica) anchorEmpty() error {
	r.unanchored = false
	r.logger.Warn("replica checkpoint unreadable and no raft snapshot: rebuilding the log from raft's first entry", "dir", r.cfg.Dir)
	return r.Log().Reset(0)
}

// openCheckpoint reads the replica checkpoint; a damaged one (CRC or
// JSON) leaves the replica unanchored rather than failing the open.
func (r *Replica) openCheckpoint() (replicaCheckpoint, error) {
	cp, err := readReplicaCheckpoint(r.fs(), r.cfg.Dir)
	if errors.Is(err, ErrCorruptLog) {
		r.logger.Warn("replica checkpoint damaged; waiting for raft's snapshot to stand in for it", "dir", r.cfg.Dir, "err", err)
		r.unanchored = true
		return replicaCheckpoint{}, nil
	}
	return cp, err
}
