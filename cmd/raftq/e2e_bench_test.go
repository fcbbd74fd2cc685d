package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestE2E_Bench runs `raftq bench` against a real cluster: it creates its
// topic with the configs given, every record it reports is in the topic,
// none failed, and its request round trips were timed (each request
// carries at least one record and takes no longer than the slowest record
// it carried).
func TestE2E_Bench(t *testing.T) {
	c := e2eCluster(t, 3)
	bs := strings.Join(seeds(c), ",")
	const records = 3000
	out := cli(t, 0, "", "bench", "--topic", "b", "--partitions", "3", "--records", strconv.Itoa(records),
		"--rate", "3000", "--interval", "500ms", "--json", "-c", "segment.bytes=1048576", "-b", bs)
	var res benchResult
	if err := json.Unmarshal([]byte(out.stdout), &res); err != nil {
		t.Fatalf("bench --json printed %q: %v", out.stdout, err)
	}
	if res.Records != records || res.Failed != 0 {
		t.Errorf("bench: %d records acknowledged, %d failed; want %d and 0", res.Records, res.Failed, records)
	}
	if res.Requests < 1 || res.Requests > records || res.RequestP50ms <= 0 || res.RequestMaxMs > res.MaxMs {
		t.Errorf("bench: %d requests, round trip p50 %v ms max %v ms, record max %v ms; want 1-%d requests, each no slower than the slowest record",
			res.Requests, res.RequestP50ms, res.RequestMaxMs, res.MaxMs, records)
	}
	wantSetup := map[string]string{"brokers": "3", "raftq.fsync": "always", "raftq.wal": "shared", "raftq.async.writes": "false",
		"raftq.wal.segment.bytes": "4194304", "topic.partitions": "3", "topic.replication.factor": "3", "topic.replication.mode": "raft", "durability": "raft:fsync-always"}
	for k, v := range wantSetup {
		if res.Setup[k] != v {
			t.Errorf("bench setup %s = %q, want %q (setup %v)", k, res.Setup[k], v, res.Setup)
		}
	}
	acked := 0
	for _, iv := range res.Intervals {
		acked += iv.Acked
	}
	if acked != records {
		t.Errorf("intervals hold %d records, want %d: %+v", acked, records, res.Intervals)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := e2eClient(t, c)
	var inTopic int64
	for p := range int32(3) {
		inTopic += endOffset(ctx, t, cl, "b", p).Offset
	}
	if inTopic != records {
		t.Errorf("topic b holds %d records, bench reported %d", inTopic, records)
	}
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("b", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "segment.bytes" && cfg.MaybeValue() != "1048576" {
			t.Errorf("bench topic b: segment.bytes %s, want the 1048576 given with -c", cfg.MaybeValue())
		}
	}

	t.Run("txn", func(t *testing.T) { benchTxnRun(t, c) })

	// A malformed --config is a usage error, an unknown key the broker's.
	cli(t, 2, "", "bench", "--topic", "c", "--records", "1", "-c", "segment.bytes", "-b", bs)
	out = cli(t, 1, "", "bench", "--topic", "c", "--records", "1", "-c", "no.such.config=1", "-b", bs)
	if !strings.Contains(out.stderr, "no.such.config") {
		t.Errorf("bench with an unknown topic config: stderr %q, want it named", out.stderr)
	}
}
