package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
)

// failoverLoad is the size of one leader-kill run.
type failoverLoad struct {
	parts       int32
	beforeKill  int // acknowledged records to reach before the kill
	afterKill   int // acknowledged records to reach after it
	maxRecords  int // never send more than this
	loadTimeout time.Duration
	valueBytes  int // pad each value to this size, uncompressed (0: no padding)
	rate        int // records per second (0: as fast as the client takes them)
}

var shortFailover = failoverLoad{parts: 3, beforeKill: 1500, afterKill: 1500, maxRecords: 30000, loadTimeout: 60 * time.Second}

// TestE2E_LeaderKill kills -9 the leader of a partition of a 3-node
// cluster while a franz-go idempotent acks=all producer loads every
// partition. The producer must carry on with the new leader; afterwards
// every acknowledged record is in the log exactly once and in send order,
// and nothing is duplicated. The killed node is then restarted: it catches
// up, and its segments hold the same bytes as every other replica's.
//
// It runs twice: with the default snapshot interval the restarted node
// catches up from the leader's raft log; with a snapshot every 64 entries
// the leader has compacted its log past the node, which must install a
// snapshot and the segment bytes streamed with it.
func TestE2E_LeaderKill(t *testing.T) {
	t.Run("log-catch-up", func(t *testing.T) { runLeaderKill(t, shortFailover, 1) })
	t.Run("snapshot-catch-up", func(t *testing.T) {
		c := runLeaderKill(t, shortFailover, 1, "--snapshot-entries", "8", "--log-level", "debug")
		// raft logs each installed snapshot ("restored snapshot", at
		// debug level through our adapter): the killed node must have
		// installed at least one, or this case tested nothing new.
		restored := 0
		for _, n := range c.Nodes() {
			b, _ := os.ReadFile(n.LogPath)
			restored += bytes.Count(b, []byte("restored snapshot"))
		}
		if restored == 0 {
			t.Error("no node installed a snapshot: the restarted node caught up from the log")
		}
	})
}

func runLeaderKill(t *testing.T, load failoverLoad, kills int, serverArgs ...string) *chaos.Cluster {
	return runLeaderKillWith(t, load, kills, nil, serverArgs...)
}

// runLeaderKillWith is runLeaderKill on a topic created with tc's configs.
func runLeaderKillWith(t *testing.T, load failoverLoad, kills int, tc topicConfigs, serverArgs ...string) *chaos.Cluster {
	c := e2eCluster(t, 3, serverArgs...)
	const topic = "failover"
	createTopic(t, c, topic, load.parts, 3, tc.with(nil))
	if mode := tc["replication.mode"]; mode != "" {
		checkMode(t, c, topic, mode)
	}
	ld := startLoad(t, c, topic, load)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for k := range kills {
		p := int32(k) % load.parts
		ld.awaitAcked(t, p, ld.ackedOn(p)+load.beforeKill)
		victim := partitionLeader(t, c, topic, p)
		t.Logf("kill -9 node %d, leader of %s-%d, after %d acknowledged records", victim, topic, p, ld.ackedOn(p))
		if err := c.Kill(ctx, victim); err != nil {
			t.Fatal(err)
		}
		// The killed leader's partition must take load again: the
		// producer has found the new leader.
		ld.awaitAcked(t, p, ld.ackedOn(p)+load.afterKill)
		if next := partitionLeader(t, c, topic, p); next == victim {
			t.Fatalf("node %d still leads after its kill", victim)
		}
		if err := c.Start(ctx, victim); err != nil {
			t.Fatalf("restart node %d: %v", victim, err)
		}
	}
	sent, acked, failed := ld.stop(t)
	t.Logf("sent %d, acknowledged %d, failed %d", countAll(sent), len(acked), failed)
	if failed > 0 {
		t.Errorf("%d records failed: the producer should have carried on with the new leader", failed)
	}
	for p := range load.parts {
		got, _ := readPartition(t, c, topic, p)
		checkLog(t, fmt.Sprintf("%s-%d", topic, p), got, sent[p], acked)
	}
	for p := range load.parts {
		n := waitReplicasEqual(t, c, topic, p, c.NodeIDs())
		t.Logf("%s-%d: %d log bytes identical on nodes %v", topic, p, n, c.NodeIDs())
	}
	checkNoCrashes(t, c)
	return c
}

// load produces value "p<P>-<i>" to every partition in turn, as fast as
// the client accepts them, and records which were acknowledged.
type load struct {
	cl       *kgo.Client
	max      int
	pad      int // value size, see failoverLoad.valueBytes
	rate     int // see failoverLoad.rate
	timeout  time.Duration
	stopping atomic.Bool        // ends the producing loop
	ctx      context.Context    // cancelled at cleanup only: fails what is still buffered
	cancel   context.CancelFunc // (cancelling it earlier would fail buffered records)
	done     chan struct{}

	mu      sync.Mutex
	sent    map[int32][]string
	acked   map[string]bool
	ackedP  map[int32]int // acknowledged per partition
	failed  int
	firstEr error
	maxWait time.Duration // the longest a record waited for its answer
	cond    chan struct{} // closed and replaced on every ack
}

func startLoad(t *testing.T, c *chaos.Cluster, topic string, fl failoverLoad) *load {
	opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(2000), kgo.ProducerLinger(time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}
	if fl.valueBytes > 0 {
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	cl := e2eClient(t, c, opts...)
	ld := &load{cl: cl, max: fl.maxRecords, pad: fl.valueBytes, rate: fl.rate, timeout: fl.loadTimeout, done: make(chan struct{}),
		sent: map[int32][]string{}, acked: map[string]bool{}, ackedP: map[int32]int{}, cond: make(chan struct{})}
	ld.ctx, ld.cancel = context.WithCancel(context.Background())
	go ld.run(fl.parts)
	t.Cleanup(func() { ld.cancel(); ld.halt() })
	return ld
}

func (l *load) run(parts int32) {
	defer close(l.done)
	pace, stopPace := l.pacer()
	defer stopPace()
	for i := 0; i < l.max; i++ {
		if l.stopping.Load() {
			return
		}
		pace(i)
		p := int32(i) % parts
		v := fmt.Sprintf("p%d-%d", p, i/int(parts))
		if len(v) < l.pad {
			v += strings.Repeat(".", l.pad-len(v))
		}
		l.mu.Lock()
		l.sent[p] = append(l.sent[p], v)
		l.mu.Unlock()
		l.cl.Produce(l.ctx, &kgo.Record{Partition: p, Value: []byte(v), Timestamp: time.Now()}, func(r *kgo.Record, err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.maxWait = max(l.maxWait, time.Since(r.Timestamp))
			if err != nil {
				l.failed++
				if l.firstEr == nil {
					l.firstEr = err
				}
				return
			}
			l.acked[string(r.Value)] = true
			l.ackedP[r.Partition]++
			close(l.cond)
			l.cond = make(chan struct{})
		})
	}
}

// pacer returns what run calls before its i'th record, and a stop for
// when it ends: nothing without a rate, else a wait for the next 10 ms
// tick every rate/100 records.
func (l *load) pacer() (pace func(i int), stop func()) {
	if l.rate <= 0 {
		return func(int) {}, func() {}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	per := max(l.rate/100, 1)
	return func(i int) {
		if i%per == 0 {
			<-tick.C
		}
	}, tick.Stop
}

func (l *load) ackedOn(p int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ackedP[p]
}

// awaitAcked waits until n records of partition p are acknowledged.
func (l *load) awaitAcked(t *testing.T, p int32, n int) {
	t.Helper()
	deadline := time.After(l.timeout)
	for {
		l.mu.Lock()
		got, failed, ferr, cond := l.ackedP[p], l.failed, l.firstEr, l.cond
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-cond:
		case <-deadline:
			t.Fatalf("%d of %d records of partition %d acknowledged within %s (%d failed, first: %v)", got, n, p, l.timeout, failed, ferr)
		}
	}
}

func (l *load) halt() {
	l.stopping.Store(true)
	<-l.done
}

// stop ends the load, waits for every answer and returns what was sent,
// what was acknowledged and how many failed.
func (l *load) stop(t *testing.T) (map[int32][]string, map[string]bool, int) {
	t.Helper()
	l.halt()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstEr != nil {
		t.Logf("first produce error: %v", l.firstEr)
	}
	return l.sent, l.acked, l.failed
}

// longestWait is the longest any record has waited for its answer.
func (l *load) longestWait() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxWait
}

func countAll(m map[int32][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}
