package isr

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetcher replicates every partition this node follows from one leader
// node, all of them in one Fetch request at a time, as Kafka's
// ReplicaFetcherThread does. A follower's next fetch is its
// acknowledgement: it names the new log end as its fetch offset.
type fetcher struct {
	m      *Manager
	leader uint64
	parts  map[uint64]*Partition // guarded by m.mu
	kicked chan struct{}         // its partitions changed
}

const (
	// fetchSlack is how much longer than the leader's long-poll a fetch
	// may take before the follower gives up on it.
	fetchSlack = 5 * time.Second
	// refusedBackoff holds a partition's fetches back after its leader
	// refused one (not the leader, a stale epoch), until new metadata.
	refusedBackoff = 200 * time.Millisecond
	// behindBackoff holds them back after a refusal from a leader that
	// has not yet applied the metadata this follower has (leaderBehind).
	behindBackoff = 10 * time.Millisecond
	minBackoff    = 50 * time.Millisecond
	maxBackoff    = time.Second
)

func newFetcher(m *Manager, leader uint64) *fetcher {
	return &fetcher{m: m, leader: leader, parts: map[uint64]*Partition{}, kicked: make(chan struct{}, 1)}
}

// kick cuts the fetcher's idle wait short.
func (f *fetcher) kick() {
	select {
	case f.kicked <- struct{}{}:
	default:
	}
}

func (f *fetcher) run() {
	defer f.m.wg.Done()
	backoff := minBackoff
	for {
		parts, ok := f.m.fetchSet(f)
		if !ok {
			return
		}
		now := f.m.now()
		sent, req := f.request(parts, now)
		if len(sent) == 0 {
			f.sleep(retryWait(parts, now))
			continue
		}
		if f.round(sent, req) {
			backoff = minBackoff
			continue
		}
		f.sleep(backoff)
		backoff = min(2*backoff, maxBackoff)
	}
}

// retryWait is how long a fetcher with nothing to send waits: until the
// first of its partitions held back after a refusal may fetch again, at
// most refusedBackoff (a kick, new metadata, cuts it short).
func retryWait(parts []*Partition, now time.Time) time.Duration {
	wait := refusedBackoff
	for _, p := range parts {
		if d := p.retryIn(now); d > 0 {
			wait = min(wait, d)
		}
	}
	return wait
}

// round sends one fetch and applies its answer; it reports whether it
// went through and needs no backoff.
func (f *fetcher) round(sent []fetchPos, req *kmsg.FetchRequest) bool {
	ctx, cancel := context.WithTimeout(f.m.ctx, f.m.cfg.ReplicaFetchWaitMax+fetchSlack)
	start := time.Now()
	b, err := f.m.cfg.Fetch(ctx, f.leader, encodeFetchRequest(req))
	cancel()
	if h := f.m.cfg.Hooks.FollowerFetch; h != nil {
		h(time.Since(start), err != nil)
	}
	if err != nil {
		if f.m.ctx.Err() == nil {
			f.m.logger.Debug("isr: fetch failed", "leader", f.leader, "err", err)
		}
		return false
	}
	return f.answer(sent, b)
}

// answer decodes a fetch answer and applies it; it reports whether the
// round needs no backoff.
func (f *fetcher) answer(sent []fetchPos, b []byte) bool {
	resp, err := decodeFetchResponse(b)
	if err == nil && resp.ErrorCode != 0 {
		f.m.logger.Warn("isr: fetch refused", "leader", f.leader, "code", resp.ErrorCode)
		return false
	}
	if err != nil {
		f.m.logger.Warn("isr: bad fetch response", "leader", f.leader, "err", err)
		return false
	}
	return f.apply(sent, resp)
}

// apply hands each partition's answer to its partition; it reports false
// when every partition was refused, so that the fetcher backs off.
func (f *fetcher) apply(sent []fetchPos, resp *kmsg.FetchResponse) bool {
	byKey := make(map[partKey]*kmsg.FetchResponseTopicPartition, len(sent))
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			byKey[partKey{t.TopicID, t.Partitions[j].Partition}] = &t.Partitions[j]
		}
	}
	ok := false
	for _, pos := range sent {
		rp := byKey[partKey{pos.p.cfg.TopicID, pos.p.cfg.Index}]
		if rp == nil {
			continue
		}
		if pos.p.applyFetch(f.leader, pos, rp) {
			ok = true
		}
	}
	return ok
}

// request builds the fetch for every partition ready to fetch.
func (f *fetcher) request(parts []*Partition, now time.Time) ([]fetchPos, *kmsg.FetchRequest) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID = int32(f.m.cfg.Self)
	if f.m.cfg.BrokerEpoch != nil {
		if e := f.m.cfg.BrokerEpoch(); e > 0 {
			req.ReplicaState.Epoch = int64(e)
		}
	}
	if !f.m.cfg.Manual {
		req.MaxWaitMillis = int32(f.m.cfg.ReplicaFetchWaitMax.Milliseconds())
	}
	req.MinBytes = 1
	req.MaxBytes = int32(f.m.cfg.MaxFetchBytes)
	req.SessionID, req.SessionEpoch = 0, -1
	topics := map[[16]byte]int{}
	var sent []fetchPos
	for _, p := range parts {
		pos, ok := p.fetchPosition(f.leader, now)
		if !ok {
			continue
		}
		sent = append(sent, pos)
		i, ok := topics[p.cfg.TopicID]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.TopicID = p.cfg.TopicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[p.cfg.TopicID] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.cfg.Index
		rp.CurrentLeaderEpoch = pos.epoch
		rp.FetchOffset = pos.offset
		rp.LastFetchedEpoch = pos.lastEpoch
		rp.LogStartOffset = pos.logStart
		rp.PartitionMaxBytes = int32(f.m.cfg.MaxFetchBytes)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return sent, req
}

// sleep waits d, or less if the partitions change or the Manager closes.
func (f *fetcher) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.kicked:
	case <-f.m.stop:
	}
}
