package partition

import "fmt"

// TruncateTo cuts the log so it ends at off (a batch straddling off goes
// whole, as Log.Truncate does), as a follower does where its log diverged
// from the leader's, or after an unclean election. Epoch starts at or
// above the new end are dropped; producer state is rebuilt from the newest
// checkpoint at or below the new end plus a header scan of the batches
// between; the high watermark is lowered to the new end if above it (the
// only way it moves down). At or above the LEO the log stays as it is, as
// in Kafka, but epochs that start at off or later, and so hold no batch,
// are forgotten: a follower that led an epoch without appending to it
// must stop naming that epoch as the last it fetched, or its leader
// would answer every fetch with the same divergence. It is durable when
// it returns, checkpoints included.
func (r *ISRLog) TruncateTo(off int64) error {
	if off >= r.log.EndOffset() {
		return r.forgetEpochsFrom(off)
	}
	end, err := r.log.Truncate(off)
	if err != nil {
		return fmt.Errorf("truncate isr log to %d: %w", off, err)
	}
	r.log.crashPoint("isr-truncated")
	r.setEpochs(epochCache(r.Epochs()).truncateFrom(end))
	if err := r.rebuildProducers(end); err != nil {
		return fmt.Errorf("truncate isr log to %d: %w", off, err)
	}
	return r.dropStaleCheckpoints(end)
}

// forgetEpochsFrom drops the epochs that start at off or later, durably.
func (r *ISRLog) forgetEpochsFrom(off int64) error {
	before := r.Epochs()
	after := epochCache(before).truncateFrom(off)
	if len(after) == len(before) {
		return nil
	}
	r.setEpochs(after)
	return r.Checkpoint()
}

// rebuildProducers recomputes the producer state of [start, end) as
// Kafka's truncateTo does from its producer snapshots.
func (r *ISRLog) rebuildProducers(end int64) error {
	start := r.log.StartOffset()
	from := start
	r.setProducers(nil)
	if c := r.newestUpTo(end); c != nil {
		if c.Producers != nil {
			r.setProducers(c.Producers)
		}
		from = max(from, c.Offset)
	}
	return r.scanProducers(from, end)
}

// scanProducers replays the producers of the batches in [from, to); unlike
// rescan it leaves the epochs alone (TruncateTo cut them already).
func (r *ISRLog) scanProducers(from, to int64) error {
	if from >= to {
		return nil
	}
	err := r.log.ScanBatches(from, to, func(info BatchInfo) error {
		if !info.Idempotent() {
			return nil
		}
		seq, err := r.markerSeqAt(info, to)
		if err != nil {
			return err
		}
		r.recordProducer(info, info.BaseOffset, info.BaseOffset+int64(info.LastOffsetDelta), seq)
		return nil
	})
	if err != nil {
		return fmt.Errorf("rescan producers [%d, %d): %w", from, to, err)
	}
	return nil
}

// ResetTo empties the log and restarts it at offset, as a follower whose
// LEO is below the leader's log start does (Kafka's
// truncateFullyAndStartAt): producers and epochs are cleared, and start,
// end and high watermark all become offset. It is durable when it returns.
// The old checkpoints are removed first, so a crash midway never pairs
// them with the new log.
func (r *ISRLog) ResetTo(offset int64) error {
	if err := r.removeCheckpoints(); err != nil {
		return fmt.Errorf("reset isr log to %d: %w", offset, err)
	}
	if err := r.log.Reset(offset); err != nil {
		return fmt.Errorf("reset isr log to %d: %w", offset, err)
	}
	r.setProducers(nil)
	r.setEpochs(nil)
	return r.Checkpoint()
}

// TruncateAboveEpoch cuts the log where its first epoch newer than epoch
// starts: group 0 gave no leader such an epoch yet, so batches of one are
// damage (a flipped partitionLeaderEpoch, which the CRC does not cover)
// rather than records, and they would make every fetch from the real
// leader diverge. It reports whether batches were cut; the replica then
// counts as one that lost data (LostData).
func (r *ISRLog) TruncateAboveEpoch(epoch int32) (bool, error) {
	var from int64 = -1
	for _, e := range r.Epochs() {
		if e.Epoch > epoch {
			from = e.StartOffset
			break
		}
	}
	if from < 0 {
		return false, nil
	}
	cut := from < r.log.EndOffset()
	r.logger.Warn("log holds epochs newer than its leader's; cutting them", "dir", r.cfg.Dir, "leader_epoch", epoch, "from", from, "end", r.log.EndOffset())
	if err := r.TruncateTo(from); err != nil {
		return false, err
	}
	r.lostData = r.lostData || cut
	return cut, nil
}
