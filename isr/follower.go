package isr

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// fetchPos is where a follower fetches one partition from: its log end
// and the newest epoch in its log (Kafka's LastFetchedEpoch), at the
// leader epoch it follows.
type fetchPos struct {
	p         *Partition
	epoch     int32
	offset    int64
	lastEpoch int32
	logStart  int64
}

// fetchPosition reports where to fetch from, and false if this replica
// should not fetch from leader now.
func (p *Partition) fetchPosition(leader uint64, now time.Time) (fetchPos, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.role != RoleFollower || p.leaderID != leader || now.Before(p.retryAt) {
		return fetchPos{}, false
	}
	return fetchPos{p: p, epoch: p.epoch, offset: p.log.EndOffset(), lastEpoch: p.log.LatestEpoch(), logStart: p.log.Log().StartOffset()}, true
}

// applyFetch takes the leader's answer for this partition, as Kafka's
// AbstractFetcherThread.processFetchRequest does: a divergence truncates,
// an out-of-range offset truncates or resets, records are appended, and
// the HW and log start follow the leader's. An answer to a fetch made in
// another role, epoch or position is dropped. It reports whether the
// answer was usable (not a refusal).
func (p *Partition) applyFetch(leader uint64, pos fetchPos, rp *kmsg.FetchResponseTopicPartition) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.role != RoleFollower || p.leaderID != leader || p.epoch != pos.epoch || p.log.EndOffset() != pos.offset {
		return true
	}
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		p.outOfRange(rp)
		return true
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.UnknownTopicOrPartition.Code:
		if leaderBehind(rp, pos.epoch) {
			// The leader has yet to apply the metadata that made it
			// leader at our epoch, which it will within moments: ask
			// again soon, and count the answer usable so that the
			// fetcher does not back off. The new leader's HW, and so
			// its acks=all producers, wait for this fetch.
			p.retryAt = p.m.now().Add(behindBackoff)
			return true
		}
		p.retryAt = p.m.now().Add(refusedBackoff)
		return false
	default:
		p.logger.Warn("isr: fetch error", "group", p.cfg.Group, "leader", leader, "code", rp.ErrorCode)
		p.retryAt = p.m.now().Add(refusedBackoff)
		return false
	}
	if rp.DivergingEpoch.EndOffset >= 0 || rp.DivergingEpoch.Epoch >= 0 {
		p.truncateDiverging(rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
		return true
	}
	if err := p.appendFetched(rp.RecordBatches); err != nil {
		p.logger.Warn("isr: replicated batches refused", "group", p.cfg.Group, "leader", leader, "err", err)
	}
	p.followLeader(rp.HighWatermark, rp.LogStartOffset)
	return true
}

// leaderBehind reports whether a refusal comes from a leader that knows
// less than this follower, which fetched at epoch: it does not know the
// epoch yet, or it still names an older leader (or none).
func leaderBehind(rp *kmsg.FetchResponseTopicPartition, epoch int32) bool {
	switch rp.ErrorCode {
	case kerr.UnknownLeaderEpoch.Code:
		return true
	case kerr.NotLeaderForPartition.Code:
		return rp.CurrentLeader.LeaderEpoch < epoch
	}
	return false
}

// retryIn is how long this replica's fetches are still held back after a
// refusal (0: not held back).
func (p *Partition) retryIn(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.retryAt.Sub(now), 0)
}

// appendFetched appends the leader's batches, then flushes if the policy
// says so, before the next fetch reports them.
func (p *Partition) appendFetched(b []byte) error {
	now := p.m.now()
	err := splitBatches(b, func(batch []byte) error {
		if err := p.log.AppendFollower(batch); err != nil {
			return err
		}
		info, _ := partition.ParseBatchHeader(batch)
		p.flush.appended(int64(info.NumRecords), now)
		return nil
	})
	if ferr := p.maybeFlush(now); err == nil {
		err = ferr
	}
	return err
}

// followLeader takes the leader's HW (a follower's is min(leader HW, own
// LEO)) and log start (never past its own HW).
func (p *Partition) followLeader(hw, logStart int64) {
	if hw >= 0 {
		if _, err := p.log.SetHighWatermark(hw); err != nil {
			p.logger.Warn("isr: follower high watermark", "group", p.cfg.Group, "err", err)
		}
	}
	l := p.log.Log()
	if start := min(logStart, l.HighWatermark()); start > l.StartOffset() {
		if err := l.AdvanceStart(start); err != nil {
			p.logger.Warn("isr: follow the leader's log start", "group", p.cfg.Group, "start", start, "err", err)
		}
	}
}

// truncateDiverging cuts the log where it diverged from the leader's,
// after Kafka's getOffsetTruncationState [KAFT 583–633]: to the leader's
// end offset for the epoch, or, if this log does not know that epoch, to
// its own end of the largest epoch below it, so that the next fetch asks
// again with that epoch (KIP-279's back-to-back elections).
func (p *Partition) truncateDiverging(epoch int32, end int64) {
	leo := p.log.EndOffset()
	var to int64
	switch fe, fend := p.log.EndOffsetFor(epoch, false); {
	case epoch < 0 || end < 0:
		to = min(p.log.HighWatermark(), leo)
	case fe < 0:
		to = min(end, leo)
	case fe != epoch:
		to = min(fend, leo)
	default:
		to = min(end, fend, leo)
	}
	p.logger.Info("isr: truncating diverged log", "group", p.cfg.Group, "leader_epoch", epoch, "leader_end", end, "to", to, "leo", leo)
	if err := p.truncating(func() error { return p.log.TruncateTo(to) }); err != nil {
		p.logger.Error("isr: truncate", "group", p.cfg.Group, "to", to, "err", err)
		p.retryAt = p.m.now().Add(refusedBackoff)
	}
}

// outOfRange handles OFFSET_OUT_OF_RANGE [KAFT fetchOffsetAndTruncate]:
// a log end below the leader's log start restarts the log there; a log
// end the leader does not have is cut back to the leader's HW, which the
// leader holds.
func (p *Partition) outOfRange(rp *kmsg.FetchResponseTopicPartition) {
	leo := p.log.EndOffset()
	var err error
	switch {
	case rp.LogStartOffset >= 0 && leo < rp.LogStartOffset:
		p.logger.Info("isr: log behind the leader's start, resetting", "group", p.cfg.Group, "leo", leo, "leader_start", rp.LogStartOffset)
		err = p.truncating(func() error { return p.log.ResetTo(rp.LogStartOffset) })
	case rp.HighWatermark >= 0 && rp.HighWatermark < leo:
		err = p.truncating(func() error { return p.log.TruncateTo(rp.HighWatermark) })
	default:
		err = errors.New("out of range, but neither below the leader's start nor above its HW")
	}
	if err != nil {
		p.logger.Warn("isr: offset out of range", "group", p.cfg.Group, "err", err)
		p.retryAt = p.m.now().Add(refusedBackoff)
	}
}
