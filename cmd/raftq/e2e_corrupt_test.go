package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/broker"
)

// TestE2E_CorruptSegmentRepairsFromPeers flips a bit in a batch of a
// stopped follower's sealed segment, below its replica checkpoint (its
// raft snapshot, so raft does not replay it): the restarted node finds
// the bad CRC at open, cuts its log there, copies the lost batches from a
// peer before it rejoins the partition's raft group, and ends with the
// same bytes as the others. Every acknowledged record then reads back
// once, in order, from the repaired node itself.
func TestE2E_CorruptSegmentRepairsFromPeers(t *testing.T) {
	c := e2eCluster(t, 3, "--snapshot-entries", "20")
	const topic = "corrupt"
	createTopic(t, c, topic, 1, 3, map[string]*string{"segment.bytes": new("4096")})
	cl := e2eClient(t, c, kgo.ProducerLinger(0))
	var sent []string
	for i := range 30 { // one batch, one raft entry each
		v := seq(fmt.Sprintf("r%02d", i), 20)
		produceValues(t, cl, topic, 0, v...)
		sent = append(sent, v...)
	}
	waitReplicasEqual(t, c, topic, 0, []int{1, 2, 3})
	leader := partitionLeader(t, c, topic, 0)
	victim := leader%3 + 1
	n, _ := c.Node(victim)
	dir := filepath.Join(n.DataDir, "log", topic+"-0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	cp := replicaCheckpointNext(t, dir)
	seg, pos := batchBelow(t, dir, cp)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[pos+80] ^= 0x20 // a record's value: inside the batch's CRC
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d: flipped a bit in %s at %d (checkpoint end %d)", victim, filepath.Base(seg), pos+80, cp)
	if err := c.Start(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("node %d to host %s-0 again", victim, topic), func(ctx context.Context) bool {
		s, err := nodeStatus(ctx, c, victim)
		return err == nil && len(s.Offline) == 0 && hasPartition(s, topic, 0)
	})
	waitReplicasEqual(t, c, topic, 0, []int{1, 2, 3})
	logb, _ := os.ReadFile(n.LogPath)
	if !strings.Contains(string(logb), "cutting segment at its first bad batch") || !strings.Contains(string(logb), "repaired a damaged partition log from a peer") {
		t.Errorf("node %d's log does not report the cut and the repair", victim)
	}
	checkLog(t, topic+"-0 read from node "+fmt.Sprint(victim), readFromNode(t, nodeBroker(t, c, victim), topic, 0), sent, allAcked(sent))
	checkNoCrashes(t, c)
}

func hasPartition(s broker.Status, topic string, p int32) bool {
	for _, ps := range s.Partitions {
		if ps.Topic == topic && ps.Partition == p {
			return true
		}
	}
	return false
}

// replicaCheckpointNext reads the log end a partition's replica
// checkpoint records.
func replicaCheckpointNext(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "replica.checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	body, _, _ := strings.Cut(string(b), "\n")
	var cp struct{ Next int64 }
	if err := json.Unmarshal([]byte(body), &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Next < 100 {
		t.Fatalf("checkpoint ends at %d: too few batches below it", cp.Next)
	}
	return cp.Next
}

// batchBelow returns a sealed segment and the position of a batch in it
// that ends well below offset next.
func batchBelow(t *testing.T, dir string, next int64) (string, int) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("%d segments: %v", len(segs), err)
	}
	seg := segs[0] // sealed

	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 200 || int64(binary.BigEndian.Uint64(b[:8])) >= next/2 {
		t.Fatalf("segment %s (%d bytes) does not lie below %d", seg, len(b), next)
	}
	return seg, int(12 + binary.BigEndian.Uint32(b[8:12])) // its second batch
}

// readFromNode fetches topic-p from offset 0 to its high watermark from
// one node, follower or not, and returns the values, checking offsets run
// without gaps or repeats and every batch's CRC.
func readFromNode(t *testing.T, b *kgo.Broker, topic string, p int32) []string {
	t.Helper()
	var out []string
	for off := int64(0); ; {
		rp := fetchPartition(t, b, topic, p, off, -1)
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: p, Offset: off}, &rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			t.Fatalf("fetch %s-%d at %d from a node: %v", topic, p, off, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset != off {
				t.Fatalf("record at %d, want %d", r.Offset, off)
			}
			out = append(out, string(r.Value))
			off++
		}
		if off >= rp.HighWatermark {
			return out
		}
		if len(fp.Records) == 0 {
			t.Fatalf("no progress at %d of %d", off, rp.HighWatermark)
		}
	}
}
