package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2E_ProduceConsume runs three raftq processes and moves records
// through them with franz-go: idempotent, acks=all.
func TestE2E_ProduceConsume(t *testing.T) {
	c := e2eCluster(t, 3)
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if res, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 3, nil, "smoke"); err != nil || res.Err != nil {
		t.Fatalf("create topic: %v %v", err, res.Err)
	}
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "smoke", Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer := e2eClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"smoke": {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0)},
	}))
	seen := map[string]bool{}
	for len(seen) < 100 {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 100", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}
