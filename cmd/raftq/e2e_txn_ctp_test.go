package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
)

// e2eGroupTransactSession runs franz-go's GroupTransactSession on real
// processes, consume-transform-produce from one topic to another of the
// mode: a committed round, an aborted one and a committed one again. A
// read_committed consumer of the output then sees each input record
// transformed exactly once and nothing of the aborted round, and the
// group's offsets stand at the input's ends.
func e2eGroupTransactSession(t *testing.T, c *chaos.Cluster, mode string, tc topicConfigs) {
	in, out, group := "ctp-in-"+mode, "ctp-out-"+mode, "ctp-"+mode
	waitAllRegistered(t, c)
	createTopic(t, c, in, 2, 3, tc.with(nil))
	createTopic(t, c, out, 2, 3, tc.with(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pr := e2eClient(t, c, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var inputs []string
	produce := func(prefix string, n int) {
		for i := range n {
			v := fmt.Sprintf("%s%d", prefix, i)
			if err := pr.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			inputs = append(inputs, v)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds(c)...), kgo.TransactionalID("ctp-tx-"+mode),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionTimeout(20*time.Second), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	// round transforms want input records in transactions ended with how.
	round := func(want int, prefix string, how kgo.TransactionEndTry) {
		t.Helper()
		for seen := 0; seen < want; {
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			fs := sess.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				t.Fatalf("%s round: transformed %d of %d", prefix, seen, want)
			}
			if err := sess.Begin(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			n := 0
			fs.EachRecord(func(r *kgo.Record) {
				n++
				sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Value: []byte(prefix + string(r.Value))}, nil)
			})
			committed, err := sess.End(ctx, how)
			if err != nil {
				t.Fatalf("end: %v", err)
			}
			if how == kgo.TryCommit && !committed {
				continue // aborted by the session: consumed again
			}
			seen += n
		}
	}
	produce("a", 10)
	round(10, "T-", kgo.TryCommit)
	produce("b", 4)
	round(4, "X-", kgo.TryAbort)
	round(4, "T-", kgo.TryCommit)

	var got []string
	for p := range int32(2) {
		got = append(got, readIsolated(ctx, t, c, out, p, kgo.ReadCommitted())...)
	}
	var want []string
	for _, v := range inputs {
		want = append(want, "T-"+v)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s read_committed: %q, want each input transformed once: %q", out, got, want)
	}
	checkGroupAtEnds(ctx, t, c, group, in)
}

// checkGroupAtEnds waits until group's committed offsets of topic stand
// at its partitions' end offsets (a transaction's offsets appear with its
// marker).
func checkGroupAtEnds(ctx context.Context, t *testing.T, c *chaos.Cluster, group, topic string) {
	t.Helper()
	adm := kadm.NewClient(e2eClient(t, c))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("end offsets of %s: %v %v", topic, err, ends.Error())
	}
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last look: %s", last)
		}
	}()
	waitFor(t, 30*time.Second, group+"'s offsets of "+topic+" at its ends", func(ctx context.Context) bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			last = err.Error()
			return false
		}
		var diff []string
		ends.Each(func(e kadm.ListedOffset) {
			if o, ok := offs.Lookup(topic, e.Partition); !ok || o.At != e.Offset {
				diff = append(diff, fmt.Sprintf("partition %d at %d, end %d", e.Partition, o.At, e.Offset))
			}
		})
		last = strings.Join(diff, "; ")
		return len(diff) == 0
	})
}
