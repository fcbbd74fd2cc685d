package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
)

// Benchmarks of the group coordinator on a 3-node in-process cluster
// (real WALs with fsync always, real TCP on loopback); commands and
// figures in coordinator/groups/doc.go. Each compares with a baseline
// measured in the same run.

// benchGroupCluster starts a cluster whose offsets topic exists, and
// returns the coordinator node of group and its offsets partition.
func benchGroupCluster(b *testing.B, group string) (*testCluster, uint64, *replica) {
	b.Helper()
	c := newTestCluster(b, 3, func(cfg *Config) {
		cfg.OffsetsPartitions = 3
		cfg.GroupMinSessionTimeout = time.Second
		cfg.GroupInitialRebalanceDelay = 0
	})
	var coord uint64
	var rep *replica
	eventually(b, "a coordinator for "+group, func() bool {
		for id, n := range c.nodes {
			if _, code := n.groupCoordinator(group); code == 0 {
				coord = id
				t := n.Metadata().Topics[groups.OffsetsTopic]
				rep = n.replicaFor(groups.OffsetsTopic, groups.PartitionFor(group, int32(len(t.Partitions))))
				return true
			}
		}
		c.nodes[1].requestOffsetsTopic()
		return false
	})
	return c, coord, rep
}

func commitRequest(group string, p int32, off int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "bench"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = p, off
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// BenchmarkGroup_OffsetCommit measures simple OffsetCommits (one
// partition each) answered after the offsets partition's raft group has
// committed and applied them, against raw proposals of the same size on
// the same raft group from inside the leader (no Kafka round trip).
//
//	go test ./broker -run '^$' -bench BenchmarkGroup_OffsetCommit -benchtime 3s
func BenchmarkGroup_OffsetCommit(b *testing.B) {
	const group = "bench-commits"
	c, coord, rep := benchGroupCluster(b, group)
	createTopic(b, c.client(), "bench", 16, 3)
	cl := c.client()
	broker := cl.Broker(int(coord))
	var seq atomic.Int64
	commit := func(ctx context.Context) error {
		n := seq.Add(1)
		resp, err := broker.Request(ctx, commitRequest(group, int32(n%16), n))
		if err != nil {
			return err
		}
		if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			return fmt.Errorf("commit: code %d", code)
		}
		return nil
	}
	data, _ := (&groups.Command{Commit: &groups.Commit{Group: group + "-raw", Generation: -1,
		Offsets: []groups.CommitOffset{{TopicPartition: groups.TopicPartition{Topic: "bench", Partition: 1}, Offset: 1}}}}).Encode()
	propose := func(ctx context.Context) error {
		p, err := raftOf(rep).Propose(ctx, data)
		if err != nil {
			return err
		}
		_, err = p.Wait(ctx)
		return err
	}
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("kafka-commit/clients=%d", par), func(b *testing.B) { runParallel(b, par, commit) })
		b.Run(fmt.Sprintf("raft-propose-baseline/proposers=%d", par), func(b *testing.B) { runParallel(b, par, propose) })
	}
}

// runParallel runs fn b.N times over par goroutines and reports ops/s.
func runParallel(b *testing.B, par int, fn func(context.Context) error) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, par)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < par; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := fn(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkGroup_Rebalance measures how long a new group of franz-go
// consumers (cooperative-sticky, 100 ms heartbeats) takes from the
// clients' start until every member holds its final share of 6
// partitions; the 1-member group is the same-run baseline (one join, no
// coordination between members).
//
//	go test ./broker -run '^$' -bench BenchmarkGroup_Rebalance -benchtime 5x
func BenchmarkGroup_Rebalance(b *testing.B) {
	c, _, _ := benchGroupCluster(b, "warmup")
	createTopic(b, c.client(), "rebal", 6, 3)
	for _, members := range []int{1, 3} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += joinGroupOnce(b, c, fmt.Sprintf("rebal-%d-%d", members, i), members)
			}
			b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms/rebalance")
		})
	}
}

// joinGroupOnce starts members consumers in a new group and returns the
// time until each holds 6/members partitions; closing is not timed.
func joinGroupOnce(b *testing.B, c *testCluster, group string, members int) time.Duration {
	b.StopTimer()
	var mu sync.Mutex
	held := make([]int, members)
	done := make(chan struct{})
	var once sync.Once
	check := func() {
		for _, h := range held {
			if h != 6/members {
				return
			}
		}
		once.Do(func() { close(done) })
	}
	var cls []*kgo.Client
	b.StartTimer()
	start := time.Now()
	for i := 0; i < members; i++ {
		cl := c.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics("rebal"), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.SessionTimeout(3*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				held[i] += len(m["rebal"])
				check()
				mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				held[i] -= len(m["rebal"])
				mu.Unlock()
			}))
		cls = append(cls, cl)
		go func() {
			for {
				if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatalf("group %s never settled: %v", group, held)
	}
	d := time.Since(start)
	b.StopTimer()
	for _, cl := range cls {
		cl.Close()
	}
	b.StartTimer()
	return d
}
