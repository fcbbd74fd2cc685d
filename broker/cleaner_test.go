package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A compacted topic on three nodes: keyless records are refused with
// INVALID_RECORD; every replica's cleaner drops superseded records and
// tombstones past delete.retention.ms; a consumer from the start reads,
// per key, values in offset order ending at the latest; and the replicas
// hold the same records.
func TestNode_CompactedTopic(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LogCleanerBackoff = 50 * time.Millisecond })
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	cfgs := map[string]*string{
		"cleanup.policy": new("compact"), "segment.bytes": new("2048"),
		"min.cleanable.dirty.ratio": new("0.01"), "delete.retention.ms": new("0"),
	}
	res, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 3, cfgs, "cmp")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	keyless := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "cmp", Value: []byte("no key")})
	if err := keyless.FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}
	latest := map[string]string{}
	for i := range 300 {
		k := fmt.Sprintf("k%d", i%10)
		r := &kgo.Record{Topic: "cmp", Key: []byte(k), Value: []byte(fmt.Sprintf("v%d", i))}
		if i >= 290 && i%2 == 0 {
			r.Value = nil // tombstones for five keys at the end
			delete(latest, k)
		} else {
			latest[k] = string(r.Value)
		}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Roll past the last record, so that all 300 are in sealed segments.
	for i := range 40 {
		r := &kgo.Record{Topic: "cmp", Key: []byte("filler"), Value: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	latest["filler"] = "39"
	eventually(t, "every replica cleaned", func() bool {
		for _, n := range c.nodes {
			if r := n.replicaFor("cmp", 0); r == nil || logOf(r).Size() > 8<<10 {
				return false
			}
		}
		return true
	})
	recs := consumeAll(t, c, "cmp", 0, 1)
	recs = append(recs, consumeUntil(t, c, "cmp", recs[len(recs)-1].Offset+1, 340)...)
	got := map[string]string{}
	last := int64(-1)
	for _, r := range recs {
		if r.Offset <= last {
			t.Fatalf("offset %d after %d", r.Offset, last)
		}
		last = r.Offset
		if r.Value == nil {
			delete(got, string(r.Key))
		} else {
			got[string(r.Key)] = string(r.Value)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(latest) {
		t.Fatalf("after cleaning a consumer ends at %v, want %v", got, latest)
	}
	if len(recs) > 110 {
		t.Fatalf("a consumer from the start read %d records of 340 over 11 keys", len(recs))
	}
}

// consumeUntil reads from offset until it has read a record at or past
// end-1 (compaction leaves gaps, so it cannot count records).
func consumeUntil(t *testing.T, c *testCluster, topic string, from, end int64) []*kgo.Record {
	t.Helper()
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read up to %v, want %d", out, end)
		}
		out = append(out, fs.Records()...)
	}
	return out
}
