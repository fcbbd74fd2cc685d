package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2E_CompactedTopic runs a compacted topic on three real nodes: kcat
// produces keyed records and tombstones (-Z), franz-go reads from the
// start while the cleaners run, seeing each key's values in offset order
// ending at the latest, and after cleaning kcat and franz-go read exactly
// the latest value per key. A node killed before the writes and
// restarted after the cleaning catches up and holds the same records.
func TestE2E_CompactedTopic(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat; .ci/run installs it)")
	}
	c := e2eCluster(t, 3, "--log-cleaner-backoff", "100ms")
	cfg := func(v string) *string { return &v }
	createTopic(t, c, "cmp", 1, 3, map[string]*string{
		"cleanup.policy": cfg("compact"), "segment.bytes": cfg("4096"),
		"min.cleanable.dirty.ratio": cfg("0.01"), "delete.retention.ms": cfg("0"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	victim := 3
	if err := c.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	latest := map[string]string{}
	var in strings.Builder
	for i := range 600 {
		k := fmt.Sprintf("k%02d", i%20)
		if i >= 580 && i%4 == 0 {
			fmt.Fprintf(&in, "%s:\n", k) // -Z: an empty value is a tombstone
			delete(latest, k)
			continue
		}
		fmt.Fprintf(&in, "%s:v%d\n", k, i)
		latest[k] = fmt.Sprintf("v%d", i)
	}
	base := []string{"-b", strings.Join(seeds(c), ","), "-X", "api.version.request=true"}
	if out, err := runKcat(t, kcat, in.String(), append(base, "-P", "-t", "cmp", "-p", "0", "-K", ":", "-Z", "-X", "acks=all", "-X", "linger.ms=0", "-X", "batch.num.messages=7")...); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	// A reader from the start while the cleaners work: per key, values
	// only ever move forward.
	cl := e2eClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"cmp": {0: kgo.NewOffset().AtStart()}}))
	seen := readCompacted(t, ctx, cl, 600)
	for k, v := range latest {
		if seen[k] != v {
			t.Errorf("the reader during cleaning ended %s at %q, want %q", k, seen[k], v)
		}
	}
	waitFor(t, 60*time.Second, "the live nodes to clean", func(ctx context.Context) bool {
		for _, id := range []int{1, 2} {
			if n, err := c.Node(id); err != nil || len(segmentBytes(t, n, "cmp", 0)) > 6<<10 {
				return false
			}
		}
		return true
	})
	got, err := runKcat(t, kcat, "", append(base, "-C", "-t", "cmp", "-p", "0", "-o", "beginning", "-e", "-q", "-Z", "-f", "%k=%s\n")...)
	if err != nil {
		t.Fatalf("kcat consume: %v", err)
	}
	kc := map[string]string{}
	for _, l := range lines(got) {
		k, v, _ := strings.Cut(l, "=")
		if v == "NULL" || v == "" {
			delete(kc, k)
			continue
		}
		kc[k] = v
	}
	if fmt.Sprint(kc) != fmt.Sprint(latest) {
		t.Errorf("kcat read %v after cleaning, want %v", kc, latest)
	}
	if n := len(lines(got)); n > 200 {
		t.Errorf("kcat read %d records of 600 over 20 keys after cleaning", n)
	}
	if err := c.Start(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitReplicasEqual(t, c, "cmp", 0, c.NodeIDs())
}

// readCompacted reads the partition from the start until it passed
// offset end-1, failing if any key's value goes back, and returns each
// key's last value ("" after a tombstone).
func readCompacted(t *testing.T, ctx context.Context, cl *kgo.Client, end int64) map[string]string {
	t.Helper()
	last := map[string]int64{}
	vals := map[string]string{}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d keys before the context ended", len(vals))
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if prev, ok := last[k]; ok && r.Offset <= prev {
				t.Errorf("key %s at offset %d after %d", k, r.Offset, prev)
			}
			last[k] = r.Offset
			vals[k] = string(r.Value)
			if r.Value == nil {
				delete(vals, k)
			}
			done = done || r.Offset >= end-1
		})
		if done {
			return vals
		}
	}
}
