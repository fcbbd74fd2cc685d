package jepsen

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumer is one poll process and its client. It owns its client; only
// the group rebalance callbacks run on kgo's goroutines, and they touch
// nothing but rebalanced under mu.
type consumer struct {
	w    *Workload
	rng  *rand.Rand
	proc int
	cl   *kgo.Client
	// next is the offset after the last record read per partition, for
	// assigns that continue where the consumer left off.
	next map[int32]int64

	mu         sync.Mutex
	rebalanced []TP
}

func (w *Workload) consume(ctx context.Context, stopAt time.Time, worker int) {
	c := &consumer{w: w, rng: w.rng(worker), proc: worker, next: map[int32]int64{}}
	defer c.close()
	for w.wait(ctx, stopAt) {
		switch {
		case c.cl == nil || c.rng.IntN(w.cfg.ReassignEvery) == 0:
			c.reassign()
		case w.cfg.CrashP > 0 && c.rng.Float64() < w.cfg.CrashP:
			c.crash()
		default:
			c.poll(ctx)
		}
	}
}

func (c *consumer) reassign() {
	if c.w.cfg.PollMode == PollSubscribe {
		c.subscribe()
		return
	}
	c.assign()
}

// assign replaces the consumer with one that reads a random subset of the
// partitions, each from offset 0 or from where this consumer left off.
func (c *consumer) assign() {
	seeks := c.pickSeeks()
	inv := c.w.rec.Invoke(Op{Process: c.proc, F: FAssign, Seeks: seeks})
	c.close()
	offsets := map[int32]kgo.Offset{}
	for _, s := range seeks {
		offsets[s.Partition] = kgo.NewOffset().At(s.Offset)
	}
	cl, err := c.w.client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.w.cfg.Topic: offsets}),
		kgo.FetchMaxWait(c.w.cfg.FetchMaxWait),
		// An out-of-range seek is an error in the poll's read, not a silent
		// jump back to the start that would look like a nonmonotonic poll.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		c.w.isolation(),
	)
	comp := inv.Completion(OK)
	if err != nil {
		comp.Type, comp.Error = Fail, err.Error()
	} else {
		c.cl = cl
		for _, s := range seeks {
			c.next[s.Partition] = s.Offset
		}
	}
	c.w.rec.Complete(comp)
}

func (c *consumer) pickSeeks() []Seek {
	var seeks []Seek
	n := c.w.cfg.Partitions
	for p := range n {
		if c.rng.IntN(2) == 0 {
			seeks = append(seeks, c.seekFor(p))
		}
	}
	if len(seeks) == 0 {
		seeks = append(seeks, c.seekFor(c.rng.Int32N(n)))
	}
	return seeks
}

func (c *consumer) seekFor(p int32) Seek {
	s := Seek{Topic: c.w.cfg.Topic, Partition: p}
	if next, ok := c.next[p]; ok && c.rng.IntN(2) == 0 {
		s.Offset = next
	}
	return s
}

// subscribe replaces the consumer with a group member. Rebalances are
// held while a poll's records are committed, so each one lands between
// polls and is recorded with the next poll.
func (c *consumer) subscribe() {
	cfg := c.w.cfg
	inv := c.w.rec.Invoke(Op{Process: c.proc, F: FSubscribe, Topics: []string{cfg.Topic}, Group: cfg.Group})
	c.close()
	cl, err := c.w.client(
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.onRebalance),
		kgo.OnPartitionsRevoked(c.onRebalance),
		kgo.OnPartitionsLost(c.onRebalance),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		c.w.isolation(),
	)
	comp := inv.Completion(OK)
	if err != nil {
		comp.Type, comp.Error = Fail, err.Error()
	} else {
		c.cl = cl
	}
	c.takeRebalanced() // a new member's position is unknown anyway
	c.w.rec.Complete(comp)
}

func (c *consumer) onRebalance(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ps := range parts {
		for _, p := range ps {
			c.rebalanced = append(c.rebalanced, TP{t, p})
		}
	}
}

func (c *consumer) takeRebalanced() []TP {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.rebalanced
	c.rebalanced = nil
	return out
}

// crash tears the client down; the process ends and a new one takes over.
func (c *consumer) crash() {
	inv := c.w.rec.Invoke(Op{Process: c.proc, F: FCrash})
	c.close()
	c.w.rec.Complete(inv.Completion(Info))
	c.proc = c.w.newProcess()
}

func (c *consumer) close() {
	if c.cl == nil {
		return
	}
	if c.w.cfg.PollMode == PollSubscribe {
		c.cl.CloseAllowingRebalance()
	} else {
		c.cl.Close()
	}
	c.cl = nil
}

// poll polls once and records what came back. A poll that returns is ok
// even when some partitions had errors (they are noted); it fails only
// when the client is closed.
func (c *consumer) poll(ctx context.Context) {
	inv := c.w.rec.Invoke(Op{Process: c.proc, F: FPoll})
	fetches, reads, notes := c.fetch(ctx, c.w.cfg.OpTimeout)
	comp := inv.Completion(OK)
	comp.Reads = reads
	if fetches.IsClientClosed() {
		comp.Type = Fail
	}
	if c.w.cfg.PollMode == PollSubscribe {
		if err := c.commit(ctx, fetches); err != nil {
			notes = append(notes, "commit: "+err.Error())
		}
		comp.Rebalanced = c.takeRebalanced()
	}
	comp.Error = strings.Join(notes, "; ")
	c.w.rec.Complete(comp)
	if c.w.cfg.PollMode == PollSubscribe {
		c.cl.AllowRebalance()
	}
}

// fetch polls once for at most timeout and returns the fetches, their
// reads and notes of the partition errors other than the timeout, and
// moves the consumer's positions past the records read.
func (c *consumer) fetch(ctx context.Context, timeout time.Duration) (kgo.Fetches, []PartitionRead, []string) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	fetches := c.cl.PollFetches(pctx)
	cancel()
	reads := collectReads(fetches)
	var notes []string
	fetches.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			notes = append(notes, err.Error())
		}
	})
	for _, r := range reads {
		if n := len(r.Records); n > 0 {
			c.next[r.Partition] = r.Records[n-1].Offset + 1
		}
	}
	return fetches, reads, notes
}

func (c *consumer) commit(ctx context.Context, fetches kgo.Fetches) error {
	recs := fetches.Records()
	if len(recs) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.w.cfg.OpTimeout)
	defer cancel()
	return c.cl.CommitRecords(cctx, recs...)
}

// collectReads turns fetches into one PartitionRead per partition, with
// records in the order kgo returned them and the highest high watermark
// reported by an error-free fetch of that partition.
func collectReads(fetches kgo.Fetches) []PartitionRead {
	var out []PartitionRead
	idx := map[TP]int{}
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Topic == "" || (len(p.Records) == 0 && p.Err == nil) {
			return
		}
		tp := TP{p.Topic, p.Partition}
		i, ok := idx[tp]
		if !ok {
			i = len(out)
			idx[tp] = i
			out = append(out, PartitionRead{Topic: tp.Topic, Partition: tp.Partition, Records: []Record{}, HighWatermark: NoOffset})
		}
		r := &out[i]
		for _, rec := range p.Records {
			r.Records = append(r.Records, Record{Offset: rec.Offset, Value: string(rec.Value)})
		}
		if p.Err != nil {
			r.Error = p.Err.Error()
		} else if p.HighWatermark >= 0 {
			r.HighWatermark = max(r.HighWatermark, p.HighWatermark)
		}
	})
	return out
}
