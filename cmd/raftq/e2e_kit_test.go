package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/chaos"
)

// Helpers shared by the end-to-end tests of the broker (e2e_clients,
// e2e_failover, e2e_badinput, e2e_metadata, e2e_cli): topic set-up, raw
// requests to one chosen node, reading a partition back, and the checks
// on what was read.

// createTopic creates a topic through any node and fails the test on an
// error.
func createTopic(t *testing.T, c *chaos.Cluster, name string, parts int32, rf int16, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(e2eClient(t, c)).CreateTopic(ctx, parts, rf, configs, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v (%s)", name, err, res.ErrMessage)
	}
}

// nodeBroker returns a kgo handle that sends requests to node id only,
// whatever the metadata says, so a test can ask a follower or a node
// without a replica. kgo sends each request at the highest version both
// sides support, whatever its Version field says; pins caps versions
// (key, max pairs) to reach older ones. Fetch is capped at v12, the last
// that names topics, unless pins say otherwise.
func nodeBroker(t *testing.T, c *chaos.Cluster, id int, pins ...int16) *kgo.Broker {
	t.Helper()
	n, err := c.Node(id)
	if err != nil {
		t.Fatal(err)
	}
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.Fetch.Int16(), 12)
	for i := 0; i+1 < len(pins); i += 2 {
		vs.SetMaxKeyVersion(pins[i], pins[i+1])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.Dialer(c.DialContext),
		kgo.RequestRetries(0), kgo.RetryTimeout(10*time.Second), kgo.MaxVersions(vs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}

// readPartition reads topic/p from offset 0 up to its current end (as
// ListOffsets says) through any node and returns the values in log order
// with their offsets.
func readPartition(t *testing.T, c *chaos.Cluster, topic string, p int32) (values []string, offsets []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := e2eClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	end := endOffset(ctx, t, cl, topic, p)
	next := int64(0)
	for next < end.Offset {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s-%d: reached offset %d of %d before the deadline", topic, p, next, end.Offset)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Errorf("%s-%d: record at offset %d, expected %d (gap or repeat)", topic, p, r.Offset, next)
			}
			values = append(values, string(r.Value))
			offsets = append(offsets, r.Offset)
			next = r.Offset + 1
		})
	}
	return values, offsets
}

// endOffset lists topic-p's end offset, retrying until ctx ends: a leader
// election (a restarted preferred replica taking its leadership back, say)
// answers LEADER_NOT_AVAILABLE or NOT_LEADER_OR_FOLLOWER for a moment, and
// kadm reports those as shard errors without retrying.
func endOffset(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, p int32) kadm.ListedOffset {
	t.Helper()
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			end, ok := ends.Lookup(topic, p)
			if ok && end.Err == nil {
				return end
			}
			err = end.Err
		}
		if ctx.Err() != nil {
			t.Fatalf("end offset of %s-%d: %v", topic, p, err)
		}
		t.Logf("end offset of %s-%d: %v; retrying", topic, p, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// checkLog checks one partition's log against what a producer sent to it
// (sent, in send order) and which values were acknowledged (acked may
// hold other partitions' values too): every
// acknowledged value is in the log exactly once, the acknowledged values
// appear in send order, every value in the log was sent, and no value
// appears twice (an unacknowledged one may be missing, never duplicated).
func checkLog(t *testing.T, name string, log, sent []string, acked map[string]bool) {
	t.Helper()
	pos := map[string]int{} // value -> send position
	for i, v := range sent {
		pos[v] = i
	}
	seen := map[string]int{}
	last := -1
	for i, v := range log {
		p, ok := pos[v]
		if !ok {
			t.Errorf("%s: log offset %d holds %q, which was never sent", name, i, v)
			continue
		}
		if seen[v]++; seen[v] > 1 {
			t.Errorf("%s: %q appears more than once (again at log offset %d)", name, v, i)
		}
		if acked[v] {
			if p < last {
				t.Errorf("%s: acknowledged %q (sent #%d) comes after sent #%d in the log", name, v, p, last)
			}
			last = p
		}
	}
	missing := 0
	for _, v := range sent {
		if acked[v] && seen[v] == 0 {
			if missing < 5 {
				t.Errorf("%s: acknowledged %q (sent #%d) is not in the log", name, v, pos[v])
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d acknowledged values missing", name, missing)
	}
}

// segmentBytes concatenates the .log files of topic-p under a node's data
// dir, in offset order: the partition's log bytes, whatever the segment
// boundaries.
func segmentBytes(t *testing.T, n chaos.Node, topic string, p int32) []byte {
	t.Helper()
	dir := filepath.Join(n.DataDir, "log", fmt.Sprintf("%s-%d", topic, p))
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names) // zero-padded base offsets sort numerically
	var out []byte
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("read segment: %v", err)
		}
		out = append(out, b...)
	}
	return out
}

// waitReplicasEqual waits until every running node hosting topic-p
// reports the same high watermark and log size, then checks that their
// segments hold the same bytes. It returns the common length in bytes.
func waitReplicasEqual(t *testing.T, c *chaos.Cluster, topic string, p int32, hosts []int) int {
	t.Helper()
	what := fmt.Sprintf("replicas %v of %s-%d to agree", hosts, topic, p)
	waitFor(t, 60*time.Second, what, func(ctx context.Context) bool {
		var hw, size int64 = -1, -1
		for _, id := range hosts {
			s, err := nodeStatus(ctx, c, id)
			if err != nil {
				return false
			}
			i := slices.IndexFunc(s.Partitions, func(ps broker.PartitionStatus) bool { return ps.Topic == topic && ps.Partition == p })
			if i < 0 {
				return false
			}
			ps := s.Partitions[i]
			if hw >= 0 && (ps.HighWatermark != hw || ps.SizeBytes != size) || ps.Applied != ps.Commit {
				return false
			}
			hw, size = ps.HighWatermark, ps.SizeBytes
		}
		return true
	})
	var first []byte
	for i, id := range hosts {
		n, _ := c.Node(id)
		b := segmentBytes(t, n, topic, p)
		if i == 0 {
			first = b
			continue
		}
		if !bytes.Equal(b, first) {
			t.Errorf("%s-%d: node %d's segments (%d bytes) differ from node %d's (%d bytes) at byte %d",
				topic, p, id, len(b), hosts[0], len(first), firstDiff(b, first))
		}
	}
	return len(first)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// hostsOf returns the nodes whose /v1/status lists a replica of topic-p.
func hostsOf(ctx context.Context, c *chaos.Cluster, topic string, p int32) []int {
	var out []int
	for _, id := range c.NodeIDs() {
		if !c.Running(id) {
			continue
		}
		s, err := nodeStatus(ctx, c, id)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(s.Partitions, func(ps broker.PartitionStatus) bool { return ps.Topic == topic && ps.Partition == p }) {
			out = append(out, id)
		}
	}
	return out
}

// checkNoCrashes fails the test if any node exited without being asked.
func checkNoCrashes(t *testing.T, c *chaos.Cluster) {
	t.Helper()
	for _, e := range c.Crashes() {
		t.Errorf("node %d (pid %d) exited on its own: %s", e.Node, e.PID, e.Err)
	}
}

// produceValues produces values to topic-p with kgo (idempotent, acks=all)
// and fails on any error.
func produceValues(t *testing.T, cl *kgo.Client, topic string, p int32, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s-%d: %v", topic, p, err)
	}
}

// seq returns n values "prefix-0" .. "prefix-<n-1>".
func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// allAcked marks every value acknowledged.
func allAcked(values []string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

// metadataLeader asks node id for topic-p's leader and leader epoch.
func metadataLeader(ctx context.Context, b *kgo.Broker, topic string, p int32) (leader, epoch int32, err error) {
	mt, err := topicMetadata(ctx, b, topic)
	if err != nil {
		return -1, -1, err
	}
	for _, mp := range mt.Partitions {
		if mp.Partition == p {
			return mp.Leader, mp.LeaderEpoch, nil
		}
	}
	return -1, -1, fmt.Errorf("no metadata for %s-%d", topic, p)
}

// lines splits output into non-empty trimmed lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// checkGroupCommitted checks that group committed, for each partition of
// topic, the offset after its last record. It asks until an answer comes
// (a node may be down, or the group's coordinator moving).
func checkGroupCommitted(t *testing.T, c *chaos.Cluster, group, topic string, want map[int32][]string) {
	t.Helper()
	adm := kadm.NewClient(e2eClient(t, c))
	var offs kadm.OffsetResponses
	waitFor(t, 30*time.Second, group+"'s committed offsets", func(ctx context.Context) bool {
		var err error
		if offs, err = adm.FetchOffsets(ctx, group); err != nil {
			t.Logf("fetch %s's offsets: %v; asking again", group, err)
		}
		return err == nil
	})
	for p, vs := range want {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.Err != nil || o.At != int64(len(vs)) {
			t.Errorf("%s committed %s-%d at %+v, want %d", group, topic, p, o, len(vs))
		}
	}
}
