package isr

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// HandleFetch answers a follower's fetch request (the peer transport's
// FetchHandler; from is the fetching node, as its handshake proved). Each
// partition is served as Kafka's Partition.fetchRecords serves a follower:
// the leader epoch is checked, then the diverging-epoch test, then the
// follower's fetch state is updated (which may raise the HW and propose
// it into the ISR), then records are read up to the log end. A request
// that finds nothing new waits, up to its MaxWaitMillis and deadline, for
// an append or an HW change on one of its partitions.
func (m *Manager) HandleFetch(from uint64, b []byte, deadline time.Time) []byte {
	req, err := decodeFetchRequest(b)
	if err != nil {
		m.logger.Warn("isr: bad fetch request", "from", from, "err", err)
		return encodeFetchResponse(&kmsg.FetchResponse{ErrorCode: kerr.InvalidRequest.Code})
	}
	if uint64(req.ReplicaState.ID) != from || req.ReplicaState.ID <= 0 {
		m.logger.Warn("isr: fetch names another replica", "from", from, "replica", req.ReplicaState.ID)
		return encodeFetchResponse(&kmsg.FetchResponse{ErrorCode: kerr.InvalidRequest.Code})
	}
	s := m.newServe(from, req)
	s.respond()
	if m.cfg.Manual {
		return encodeFetchResponse(s.resp) // nothing waits in manual mode
	}
	until := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	if deadline.Before(until) {
		until = deadline
	}
	for s.empty() && s.wait(until) {
		s.reread()
	}
	return encodeFetchResponse(s.resp)
}

// serve is one follower fetch being answered.
type serve struct {
	m     *Manager
	from  uint64
	epoch uint64 // the follower's broker epoch, 0 if unknown
	resp  *kmsg.FetchResponse
	parts []servedPart
	bytes int
}

// servedPart is one partition of it that reads records.
type servedPart struct {
	p      *Partition
	out    *kmsg.FetchResponseTopicPartition
	offset int64
	max    int
	end    int64 // the log end and HW the answer was read at
	hw     int64
}

func (m *Manager) newServe(from uint64, req *kmsg.FetchRequest) *serve {
	s := &serve{m: m, from: from, resp: kmsg.NewPtrFetchResponse()}
	if req.ReplicaState.Epoch > 0 {
		s.epoch = uint64(req.ReplicaState.Epoch)
	}
	now := m.now()
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		s.resp.Topics = append(s.resp.Topics, rt)
	}
	for i, t := range req.Topics {
		for j, rp := range t.Partitions {
			out := &s.resp.Topics[i].Partitions[j]
			out.Default()
			out.Partition = rp.Partition
			p := m.lookup(t.TopicID, rp.Partition)
			if p == nil {
				out.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if read := p.serveFollower(from, s.epoch, rp, out, now); read {
				s.parts = append(s.parts, servedPart{p: p, out: out, offset: rp.FetchOffset, max: int(max(rp.PartitionMaxBytes, 1))})
			}
		}
	}
	return s
}

// respond reads each partition's records, within the response's byte
// budget: at least one batch for the first partition with data.
func (s *serve) respond() {
	for i := range s.parts {
		sp := &s.parts[i]
		l := sp.p.log.Log()
		sp.end, sp.hw = l.EndOffset(), l.HighWatermark()
		sp.out.HighWatermark, sp.out.LastStableOffset, sp.out.LogStartOffset = sp.hw, sp.hw, l.StartOffset()
		budget := min(sp.max, s.m.cfg.MaxFetchBytes-s.bytes)
		if budget <= 0 || sp.offset >= sp.end {
			continue
		}
		data, err := l.Read(sp.offset, budget, sp.end)
		var oor *partition.OffsetOutOfRangeError
		switch {
		case errors.As(err, &oor):
			sp.out.ErrorCode = kerr.OffsetOutOfRange.Code
		case err != nil:
			sp.out.ErrorCode = kerr.KafkaStorageError.Code
		}
		sp.out.RecordBatches = data
		s.bytes += len(data)
	}
}

// empty reports whether the answer carries nothing a follower waits for:
// no records and no partition error. A partition the follower must act on
// (an error, a divergence) is not in parts, so it answers at once.
func (s *serve) empty() bool {
	if s.bytes > 0 {
		return false
	}
	for _, t := range s.resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.DivergingEpoch.EndOffset >= 0 {
				return false
			}
		}
	}
	return true
}

// wait blocks until one of the partitions' log end or HW moved from what
// the answer shows, or until; it reports whether one moved.
func (s *serve) wait(until time.Time) bool {
	if len(s.parts) == 0 {
		return false
	}
	for {
		ch := s.m.activity.wait()
		if s.moved() {
			return true
		}
		d := time.Until(until)
		if d <= 0 {
			return false
		}
		t := time.NewTimer(d)
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return s.moved()
		case <-s.m.stop:
			t.Stop()
			return false
		}
	}
}

func (s *serve) moved() bool {
	for _, sp := range s.parts {
		l := sp.p.log.Log()
		if l.EndOffset() != sp.end || l.HighWatermark() != sp.hw || !sp.p.leads() {
			return true
		}
	}
	return false
}

// reread answers again after a wait; the fetch state was updated once, at
// arrival, as in Kafka.
func (s *serve) reread() {
	s.bytes = 0
	for _, sp := range s.parts {
		if !sp.p.leads() {
			sp.out.ErrorCode = kerr.NotLeaderForPartition.Code
		}
	}
	s.respond()
}

func (p *Partition) leads() bool { return p.leadingEpoch.Load() >= 0 }

// serveFollower checks and records one partition of a follower's fetch
// and reports whether records should be read for it.
func (p *Partition) serveFollower(from, brokerEpoch uint64, rp kmsg.FetchRequestTopicPartition, out *kmsg.FetchResponseTopicPartition, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if code := p.checkFollowerFetch(rp); code != 0 {
		out.ErrorCode = code
		out.CurrentLeader.LeaderID, out.CurrentLeader.LeaderEpoch = leaderHint(p)
		return false
	}
	l := p.log.Log()
	out.HighWatermark, out.LastStableOffset, out.LogStartOffset = l.HighWatermark(), l.HighWatermark(), l.StartOffset()
	if rp.LastFetchedEpoch >= 0 {
		e, end := p.log.EndOffsetFor(rp.LastFetchedEpoch, false)
		if e < rp.LastFetchedEpoch || end < rp.FetchOffset {
			// Kafka answers the divergence without records and without
			// taking the fetch offset as the follower's LEO [KP 1533].
			out.DivergingEpoch.Epoch, out.DivergingEpoch.EndOffset = e, end
			return false
		}
	}
	if rp.FetchOffset < l.StartOffset() || rp.FetchOffset > l.EndOffset() {
		out.ErrorCode = kerr.OffsetOutOfRange.Code
		return false
	}
	hw, err := p.lead.followerFetch(fetch{replica: from, brokerEpoch: brokerEpoch, offset: rp.FetchOffset, logStart: rp.LogStartOffset, time: now})
	if err != nil {
		out.ErrorCode = errorCode(err)
		return false
	}
	p.setHW(hw)
	p.afterLeaderChange()
	return true
}

// checkFollowerFetch is the leader-epoch check of a follower fetch.
func (p *Partition) checkFollowerFetch(rp kmsg.FetchRequestTopicPartition) int16 {
	switch {
	case p.closed, p.role != RoleLeader:
		return kerr.NotLeaderForPartition.Code
	case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < p.epoch:
		return kerr.FencedLeaderEpoch.Code
	case rp.CurrentLeaderEpoch > p.epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

func leaderHint(p *Partition) (int32, int32) {
	if p.leaderID == 0 {
		return -1, -1
	}
	return int32(p.leaderID), p.epoch
}

func errorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
