package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2E_BenchKeys: raftq bench --keys produces to a compacted topic,
// which refuses records without keys, and every record it reports is
// there with one of the keys asked for, --tombstone-ratio of them null.
func TestE2E_BenchKeys(t *testing.T) {
	c := e2eCluster(t, 1)
	bs := strings.Join(seeds(c), ",")
	const records = 400
	out := cli(t, 0, "", "bench", "--topic", "k", "--partitions", "1", "--replication-factor", "1", "--records", "400",
		"--rate", "2000", "--keys", "10", "--tombstone-ratio", "0.25", "--json", "-c", "cleanup.policy=compact", "-b", bs)
	var res benchResult
	if err := json.Unmarshal([]byte(out.stdout), &res); err != nil {
		t.Fatalf("bench --json printed %q: %v", out.stdout, err)
	}
	if res.Records != records || res.Failed != 0 || res.Keys != 10 || res.TombstoneRatio != 0.25 {
		t.Errorf("bench: %d acknowledged, %d failed, keys %d, tombstone ratio %g; want %d, 0, 10, 0.25",
			res.Records, res.Failed, res.Keys, res.TombstoneRatio, records)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := e2eClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"k": {0: kgo.NewOffset().AtStart()}}))
	keys, tombstones, read := map[string]bool{}, 0, 0
	for read < records && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			read++
			keys[string(r.Key)] = true
			if r.Value == nil {
				tombstones++
			}
		})
	}
	if read != records || len(keys) != 10 || tombstones < records/10 || tombstones > records/2 {
		t.Errorf("topic k: %d records over keys %v, %d tombstones; want %d over 10 one-digit keys, about a quarter tombstones",
			read, keys, tombstones, records)
	}
	for k := range keys {
		if len(k) != 1 {
			t.Errorf("key %q, want one digit", k)
		}
	}
}
