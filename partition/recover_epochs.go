package partition

import (
	"encoding/binary"
	"errors"
)

// A batch's partitionLeaderEpoch lies outside its CRC (Append stamps it),
// so a flipped bit there passes every other check, and an ISR log would
// take the wrong epoch as where its leaders changed. The owner knows
// better: its checkpoint lists the epoch starts of the log below its end,
// and its epochs never go down. Recovery checks both when the owner says
// so (openChecked) and cuts the log at the first batch that disagrees, as
// at any damaged batch. Where an epoch goes down, either batch may be
// the damaged one (the later one lowered, or the earlier one raised), so
// the open cuts at the earlier (suspect). A batch above the checkpoint
// whose epoch was raised, with no batch after it, is not caught here; an
// ISR replica cuts epochs newer than its leader's (TruncateAboveEpoch).

// epochCheck is what recovery knows of the epochs the batches must carry.
type epochCheck struct {
	on    bool
	known epochCache // the epoch starts of the log below upTo
	upTo  int64
	last  int32 // the epoch of the last batch scanned; -1 before the first
	// lastBase is where that batch starts; suspect is lastBase when the
	// next batch's epoch went down (-1: none), where Open cuts the log.
	lastBase, suspect int64
}

// openChecked is Open with the owner's epochs checked at recovery: the
// batches below upTo must carry the epochs known says, and no batch an
// epoch below the one before it.
func openChecked(dir string, cfg Config, known epochCache, upTo int64) (*Log, error) {
	return open(dir, cfg, epochCheck{on: true, known: known, upTo: upTo, last: -1, suspect: -1})
}

// check returns why the batch at base, b, disagrees with the epochs (nil
// when it agrees), and remembers its epoch.
func (c *epochCheck) check(base int64, b []byte) error {
	if !c.on {
		return nil
	}
	epoch := int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	if epoch < c.last {
		c.suspect = c.lastBase
		return corrupt("batch at %d has leader epoch %d, below the %d before it", base, epoch, c.last)
	}
	if base < c.upTo {
		if want, ok := c.known.at(base); ok && want != epoch {
			return corrupt("batch at %d has leader epoch %d; the checkpoint says %d", base, epoch, want)
		}
	}
	c.last, c.lastBase = epoch, base
	return nil
}

// cutSuspect cuts an opened log at the batch before an epoch that went
// down (epochCheck.suspect): it may be the damaged one.
func (l *Log) cutSuspect() error {
	at := l.epochs.suspect
	if !l.epochs.on || at < 0 || at < l.StartOffset() || at >= l.EndOffset() {
		return nil
	}
	l.logger.Warn("cutting the log at the batch before a leader epoch that went down", "offset", at)
	if _, err := l.Truncate(at); err != nil {
		return err
	}
	l.lostData = true
	return nil
}

// errWrongEpoch stops cutAtWrongEpoch's scan.
var errWrongEpoch = errors.New("partition: batch with a wrong leader epoch")

// cutAtWrongEpoch is the epoch check of an open for a log opened without
// it (a replica whose checkpoint was damaged, once raft's snapshot has
// given the checkpoint back): the log is cut at the first batch below
// upTo whose leader epoch is not the one known says.
func cutAtWrongEpoch(l *Log, known epochCache, upTo int64) error {
	bad := int64(-1)
	err := l.ScanBatches(l.StartOffset(), min(upTo, l.EndOffset()), func(info BatchInfo) error {
		if want, ok := known.at(info.BaseOffset); ok && want != info.LeaderEpoch {
			bad = info.BaseOffset
			return errWrongEpoch
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWrongEpoch) {
		return err
	}
	if bad < 0 {
		return nil
	}
	l.logger.Warn("cutting the log at a batch whose leader epoch disagrees with the checkpoint", "offset", bad)
	_, err = l.Truncate(bad)
	return err
}
