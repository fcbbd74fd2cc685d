package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

// grpFailover is the state of the coordinator-kill run.
type grpFailover struct {
	topic, group string
	parts        int32
	hist         *grpHistory
	killedAt     atomic.Int64 // unix nanos; 0 before the kill

	mu        sync.Mutex
	processed map[int32]map[int64]int // partition -> offset -> times processed
	okAfter   int                     // successful commits called after the kill
	lastSeen  map[int32]int64         // the poller's newest reads
}

func (f *grpFailover) process(p int32, off int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.processed[p] == nil {
		f.processed[p] = map[int64]int{}
	}
	f.processed[p][off]++
}

// grpCoordinatorKill runs two franz-go members that commit after every
// poll while a producer writes, kills -9 the group's coordinator node, and
// checks: commits go on at the new coordinator, committed offsets never go
// backwards (porcupine, register per partition, over every commit and
// fetch), and every record is processed at least once, none skipped.
func grpCoordinatorKill(t *testing.T, c *chaos.Cluster) {
	f := &grpFailover{topic: "grp-fail", group: "failover", parts: 6, hist: newGrpHistory(), processed: map[int32]map[int64]int{}}
	grpCreateTopic(t, c, f.topic, f.parts)
	ctx, cancel := context.WithCancel(grpCtx(t, 100*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var produced atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer produced.Store(true)
		f.produce(ctx, t, c)
	}()
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.consume(ctx, t, c, i)
		}()
	}
	reads := make(chan map[int32]int64, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.poll(ctx, t, c, reads)
	}()

	admin := e2eClient(t, c)
	waitFor(t, 60*time.Second, "commits on every partition", func(context.Context) bool {
		last := f.latestReads(reads)
		for p := int32(0); p < f.parts; p++ {
			if last[p] <= 0 {
				return false
			}
		}
		return true
	})
	victim := 0
	waitFor(t, 30*time.Second, "the group's coordinator", func(ctx context.Context) bool {
		var err error
		victim, err = grpCoordinatorOf(ctx, admin, f.group)
		return err == nil
	})
	f.killedAt.Store(time.Now().UnixNano())
	if err := c.Kill(grpCtx(t, 30*time.Second), victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed node %d, the coordinator of %s", victim, f.group)

	var ends map[int32]int64
	waitFor(t, 80*time.Second, "every record processed and committed on the new coordinator", func(ctx context.Context) bool {
		if !produced.Load() {
			return false
		}
		if ends == nil {
			ends = grpEnds(t, c, f.topic)
		}
		last := f.latestReads(reads)
		for p := int32(0); p < f.parts; p++ {
			if last[p] != ends[p] {
				return false
			}
		}
		return true
	})
	newCoord, err := grpCoordinatorOf(grpCtx(t, 10*time.Second), admin, f.group)
	if err != nil || newCoord == victim {
		t.Fatalf("coordinator after the kill: %d (%v), killed %d", newCoord, err, victim)
	}
	cancel()
	wg.Wait()
	f.verify(t, ends)
}

// latestReads drains the poller's newest observation.
func (f *grpFailover) latestReads(reads chan map[int32]int64) map[int32]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case m := <-reads:
		f.lastSeen = m
	default:
	}
	return f.lastSeen
}

func (f *grpFailover) produce(ctx context.Context, t *testing.T, c *chaos.Cluster) {
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1000))
	for round := 0; round < 150 && ctx.Err() == nil; round++ {
		var recs []*kgo.Record
		for p := int32(0); p < f.parts; p++ {
			recs = append(recs, &kgo.Record{Topic: f.topic, Partition: p, Value: []byte(fmt.Sprintf("r%d", round))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
			t.Errorf("produce round %d: %v", round, err)
			return
		}
		select {
		case <-time.After(20 * time.Millisecond): // pace the load; nothing to await
		case <-ctx.Done():
		}
	}
}

func (f *grpFailover) consume(ctx context.Context, t *testing.T, c *chaos.Cluster, id int) {
	cl := e2eClient(t, c, kgo.ClientID(fmt.Sprintf("failover-%d", id)), kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(f.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { f.process(r.Partition, r.Offset) })
		if offs := cl.UncommittedOffsets(); len(offs) > 0 {
			call := time.Now()
			cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				f.noteCommit(id, call, req, resp, err)
			})
		}
		cl.AllowRebalance() // commits of what this poll returned are done
	}
}

// noteCommit records each partition's commit: success, or unknown outcome
// (transport error, NOT_COORDINATOR, timeout), while refusals with other
// codes (stale generation, rebalance) stored nothing and are left out.
func (f *grpFailover) noteCommit(client int, call time.Time, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	ret := time.Now()
	codes := map[int32]int16{}
	if err == nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				codes[p.Partition] = p.ErrorCode
			}
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			code, answered := codes[p.Partition]
			switch {
			case err != nil || !answered || code == kerr.NotCoordinator.Code || code == kerr.RequestTimedOut.Code:
				f.hist.commit(client, p.Partition, p.Offset, call, ret, false)
			case code == 0:
				f.hist.commit(client, p.Partition, p.Offset, call, ret, true)
				if k := f.killedAt.Load(); k != 0 && call.UnixNano() > k {
					f.mu.Lock()
					f.okAfter++
					f.mu.Unlock()
				}
			}
		}
	}
}

// poll fetches the committed offsets in a loop, one request at a time,
// recording each as a read and publishing the newest to reads. It asks
// the cluster for the coordinator before every fetch, so it follows a
// failover as soon as the cluster knows of it.
func (f *grpFailover) poll(ctx context.Context, t *testing.T, c *chaos.Cluster, reads chan map[int32]int64) {
	cl := e2eClient(t, c)
	prev := map[int32]int64{}
	for p := int32(0); p < f.parts; p++ {
		prev[p] = -1
	}
	for ctx.Err() == nil {
		call := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cur, err := f.fetchCommitted(rctx, cl)
		cancel()
		ret := time.Now()
		if err == nil {
			for p := int32(0); p < f.parts; p++ {
				v := cur[p]
				f.hist.read(9, p, v, call, ret)
				if v < prev[p] {
					t.Errorf("partition %d: committed offset went back from %d to %d", p, prev[p], v)
				}
				prev[p] = v
			}
			select {
			case <-reads:
			default:
			}
			reads <- cur
		}
		select {
		case <-time.After(50 * time.Millisecond): // polling pace
		case <-ctx.Done():
		}
	}
}

// fetchCommitted sends one OffsetFetch to the group's coordinator.
func (f *grpFailover) fetchCommitted(ctx context.Context, cl *kgo.Client) (map[int32]int64, error) {
	coord, err := grpCoordinatorOf(ctx, cl, f.group)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = f.group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = f.topic
	for p := int32(0); p < f.parts; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	kresp, err := cl.Broker(coord).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return nil, fmt.Errorf("offset fetch from %d: %+v", coord, resp.Groups)
	}
	out := map[int32]int64{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, kerr.ErrorForCode(p.ErrorCode)
			}
			out[p.Partition] = p.Offset
		}
	}
	if len(out) != int(f.parts) {
		return nil, fmt.Errorf("offset fetch answered %d partitions", len(out))
	}
	return out, nil
}

func (f *grpFailover) verify(t *testing.T, ends map[int32]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dups := 0
	for p := int32(0); p < f.parts; p++ {
		for off := int64(0); off < ends[p]; off++ {
			switch n := f.processed[p][off]; {
			case n == 0:
				t.Errorf("partition %d offset %d was never processed (skipped)", p, off)
			case n > 1:
				dups += n - 1
			}
		}
	}
	if f.okAfter == 0 {
		t.Error("no commit succeeded after the coordinator was killed")
	}
	bad, ops := f.hist.check(60 * time.Second)
	if len(bad) > 0 {
		t.Errorf("committed offsets of partitions %v are not linearizable as registers", bad)
	}
	t.Logf("%d records, %d reprocessed after failover (at least once), %d commits after the kill, porcupine checked %d operations",
		grpSum(ends), dups, f.okAfter, ops)
}

func grpSum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
