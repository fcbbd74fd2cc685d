package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/logging"
)

// kafkajsRoundTrip runs kafkajs (Node.js) against the cluster through
// testdata/kafkajs/client.js: its admin client creates a topic, its
// idempotent producer (acks=all) fills each partition, franz-go reads
// that back, and a kafkajs consumer group member reads the topic from the
// beginning and commits what it read. kafkajs always consumes through a
// group, so this also runs its JoinGroup, SyncGroup, Heartbeat and
// OffsetCommit against raftq's coordinator. (It reads its own topic, not
// franz-go's: kafkajs cannot decode snappy, franz-go's default codec,
// without a plugin, from Kafka as from raftq.) Last, it reads franz-go's
// records from a topic whose compression.type is gzip.
func kafkajsRoundTrip(t *testing.T, c *chaos.Cluster, tc topicConfigs) {
	node, env := kafkajsEnv(t)
	brokers := strings.Join(seeds(c), ",")
	const parts, perPart = 3, 40
	if out := runKafkajs(t, node, env, "create", brokers, "kafkajs", fmt.Sprint(parts), "3", tc.arg()); out != "created true partitions 3" {
		t.Fatalf("kafkajs create: %q, want the topic created with 3 partitions", out)
	}
	want := map[int32][]string{}
	for p := range int32(parts) {
		vals := seq(fmt.Sprintf("kafkajs-p%d", p), perPart)
		want[p] = vals
		out := runKafkajs(t, node, env, "produce", brokers, "kafkajs", fmt.Sprint(p), fmt.Sprintf("kafkajs-p%d", p), fmt.Sprint(perPart))
		var bases []string
		for off := 0; off < perPart; off += 10 {
			bases = append(bases, fmt.Sprintf("ack %d %d", off, off))
		}
		if got := lines(out); !slices.Equal(got, bases) {
			t.Errorf("kafkajs produce to %d: base offsets %q, want %q", p, got, bases)
		}
		got, _ := readPartition(t, c, "kafkajs", p)
		checkLog(t, fmt.Sprintf("kafkajs-%d", p), got, vals, allAcked(vals))
	}

	got := map[int32][]string{}
	for _, l := range lines(runKafkajs(t, node, env, "consume", brokers, "kafkajs-group", "kafkajs", fmt.Sprint(parts*perPart))) {
		f := strings.SplitN(l, " ", 3)
		p, perr := strconv.Atoi(f[0])
		off, oerr := strconv.Atoi(f[1])
		if len(f) != 3 || perr != nil || oerr != nil || off != len(got[int32(p)]) {
			t.Fatalf("kafkajs consume: line %q out of order or malformed", l)
		}
		got[int32(p)] = append(got[int32(p)], f[2])
	}
	for p, vs := range want {
		if !slices.Equal(got[p], vs) {
			t.Errorf("kafkajs consumer read kafkajs-%d as %v, want %v", p, got[p], vs)
		}
	}
	checkGroupCommitted(t, c, "kafkajs-group", "kafkajs", want)

	// franz-go's snappy batches in a topic that stores gzip: kafkajs reads
	// them without a plugin (what the README suggests).
	gz := "gzip"
	createTopic(t, c, "kafkajs-gzip", 1, 3, tc.with(map[string]*string{"compression.type": &gz}))
	vals := seq("kafkajs-gzip-snappy-from-franz-go", perPart)
	produceValues(t, e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())), "kafkajs-gzip", 0, vals...)
	var read []string
	for _, l := range lines(runKafkajs(t, node, env, "consume", brokers, "kafkajs-gzip-group", "kafkajs-gzip", fmt.Sprint(perPart))) {
		if f := strings.SplitN(l, " ", 3); len(f) == 3 {
			read = append(read, f[2])
		}
	}
	if !slices.Equal(read, vals) {
		t.Errorf("kafkajs read the gzip topic as %v, want %v", read, vals)
	}
}

// kafkajsTxn runs kafkajs's transactions against the cluster, through
// testdata/kafkajs/client.js's txn and readc: a transactional producer
// (idempotent, one request in flight) commits a transaction over every
// partition of a topic and aborts another, then does consume-transform-
// produce from kafkajsRoundTrip's topic "kafkajs" (a read_committed group
// member; per batch, a transaction with its records and the batch's
// offsets, sendOffsets, committed). A kafkajs read_committed consumer then
// reads the topic up to its end offsets and must see exactly the committed
// records, in order, and no aborted one; franz-go, reading uncommitted,
// still finds the aborted ones in the log, and the group's committed
// offsets are the source's end. It runs after kafkajsRoundTrip, which
// fills "kafkajs" (its subtest).
func kafkajsTxn(t *testing.T, c *chaos.Cluster, tc topicConfigs) {
	node, env := kafkajsEnv(t)
	brokers := strings.Join(seeds(c), ",")
	const topic, group, parts, perPart = "kafkajs-txn", "kafkajs-txn-group", 3, 10
	createTopic(t, c, topic, parts, 3, tc.with(nil))
	source := map[int32][]string{}
	for p := range int32(parts) {
		source[p], _ = readPartition(t, c, "kafkajs", p)
		if len(source[p]) == 0 {
			t.Fatalf("kafkajs-%d is empty: kafkajsTxn reads what kafkajsRoundTrip wrote", p)
		}
	}
	var ctp []string
	ctpTxns := map[int32]int{}
	for _, l := range lines(runKafkajs(t, node, env, "txn", brokers, "kafkajs-txn-id", topic, fmt.Sprint(parts), "kjs", fmt.Sprint(perPart), "kafkajs", group)) {
		var p int32
		switch {
		case strings.HasPrefix(l, "ctp "):
			ctp = append(ctp, l)
			if _, err := fmt.Sscanf(l, "ctp %d", &p); err != nil {
				t.Fatalf("kafkajs txn: malformed line %q", l)
			}
			ctpTxns[p]++
		case l != "committed" && l != "aborted":
			t.Errorf("kafkajs txn: unexpected line %q", l)
		}
	}
	t.Logf("kafkajs consume-transform-produce: %d transactions: %q", len(ctp), ctp)
	want := map[int32][]string{}
	for p := range int32(parts) {
		want[p] = seq(fmt.Sprintf("kjs-commit-p%d", p), perPart)
		for _, v := range source[p] {
			want[p] = append(want[p], "ctp-"+v)
		}
	}

	// The end offsets to read to, past every record the transactions
	// wrote (acks=all), the last markers perhaps still to come.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := e2eClient(t, c)
	ends := map[int32]int64{}
	var endArg []string
	for p := range int32(parts) {
		ends[p] = endOffset(ctx, t, cl, topic, p).Offset
		endArg = append(endArg, fmt.Sprintf("%d:%d", p, ends[p]))
	}
	got := map[int32][]string{}
	last := map[int32]int64{}
	for _, l := range lines(runKafkajs(t, node, env, "readc", brokers, "kafkajs-txn-reader", topic, strings.Join(endArg, ","))) {
		var p int32
		var off int64
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 {
			t.Fatalf("kafkajs readc: malformed line %q", l)
		}
		if _, err := fmt.Sscanf(f[0]+" "+f[1], "%d %d", &p, &off); err != nil {
			t.Fatalf("kafkajs readc: malformed line %q", l)
		}
		if prev, ok := last[p]; ok && off <= prev {
			t.Fatalf("kafkajs readc: offset %d of partition %d after %d", off, p, prev)
		}
		last[p] = off
		got[p] = append(got[p], f[2])
	}
	for p := range int32(parts) {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("kafkajs read_committed consumer read %s-%d as %q, want %q", topic, p, got[p], want[p])
		}
		// The log holds the aborted records (and markers) too: the
		// consumer read past them, to an end offset beyond them.
		all := readUncommitted(t, c, topic, p, len(want[p])+perPart)
		aborted := seq(fmt.Sprintf("kjs-abort-p%d", p), perPart)
		if n := countIn(all, aborted); n != perPart {
			t.Errorf("%s-%d read uncommitted holds %d of the %d aborted records", topic, p, n, perPart)
		}
		// Below the end, at least: the records, the first two
		// transactions' markers and those of all but the last ctp one.
		if floor := int64(len(all) + 2 + ctpTxns[p] - 1); ends[p] < floor {
			t.Errorf("%s-%d's end offset %d: want at least %d (records and markers)", topic, p, ends[p], floor)
		}
	}
	checkGroupCommitted(t, c, group, "kafkajs", source)
}

// readUncommitted reads topic-p from its start, read_uncommitted, until
// it has n records (transaction markers leave gaps between them).
func readUncommitted(t *testing.T, c *chaos.Cluster, topic string, p int32, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := e2eClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var vals []string
	for len(vals) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s-%d uncommitted: %d records of %d before the deadline", topic, p, len(vals), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	return vals
}

// countIn counts the values of vals found in log.
func countIn(log, vals []string) int {
	n := 0
	for _, v := range vals {
		if slices.Contains(log, v) {
			n++
		}
	}
	return n
}

// kafkajsEnv finds node and the kafkajs package: $RAFTQ_KAFKAJS, a
// node_modules directory, or where .ci/run installs it with npm (the user
// cache directory: $XDG_CACHE_HOME or ~/.cache).
func kafkajsEnv(t *testing.T) (node string, env []string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (Node.js 20 is on the CI machines)")
	}
	dir := os.Getenv("RAFTQ_KAFKAJS")
	if cache, err := os.UserCacheDir(); dir == "" && err == nil {
		dir = filepath.Join(cache, "raftq", "kafkajs", "node_modules")
	}
	if _, err := os.Stat(filepath.Join(dir, "kafkajs", "package.json")); err != nil {
		t.Skipf("kafkajs is not installed in %s (.ci/run installs it: npm install --prefix %s kafkajs@2.2.4)", dir, filepath.Dir(dir))
	}
	// KAFKAJS_LOG_LEVEL would override the script's level and put
	// kafkajs's info lines on the stdout the tests parse.
	env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KAFKAJS_LOG_LEVEL=") })
	return node, append(env, "NODE_PATH="+dir)
}

// runKafkajs runs testdata/kafkajs/client.js to its end and returns its
// output, trimmed; any failure ends the test.
func runKafkajs(t *testing.T, node string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := startKafkajs(ctx, t, node, env, args...)
	var out []string
	for l := range p.lines {
		out = append(out, l)
	}
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	if p.stderr.String() != "" {
		t.Logf("kafkajs %s: stderr:\n%s", strings.Join(args, " "), p.stderr.String())
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// TestE2E_KafkajsLeaderKill kills -9 the leader of a partition while a
// kafkajs idempotent producer (acks=all, one request in flight) sends to
// it, five records a request (killLeaderUnderClient).
func TestE2E_KafkajsLeaderKill(t *testing.T) { runKafkajsLeaderKill(t, nil) }

// runKafkajsLeaderKill is TestE2E_KafkajsLeaderKill on a topic created
// with tc's configs.
func runKafkajsLeaderKill(t *testing.T, tc topicConfigs) {
	node, env := kafkajsEnv(t)
	c := e2eCluster(t, 3)
	const topic, count = "kafkajs-failover", 2000
	createTopic(t, c, topic, 1, 3, tc.with(nil))
	if mode := tc["replication.mode"]; mode != "" {
		checkMode(t, c, topic, mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := startKafkajs(ctx, t, node, env, "load", strings.Join(seeds(c), ","), topic, "0", "kjs", fmt.Sprint(count))
	resume := func() {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatalf("resume kafkajs: %v", err)
		}
	}
	got := killLeaderUnderClient(ctx, t, c, topic, p.lines, resume, p.wait)
	checkClientFailover(t, c, topic, got, seq("kjs", count))
}

// kafkajsProc is a running testdata/kafkajs/client.js.
type kafkajsProc struct {
	lines  <-chan string // its output lines as they come, closed at its end
	wait   func() error  // waits for its exit; safe to call more than once
	stderr *logging.Buffer
	stdin  io.WriteCloser
}

// startKafkajs starts testdata/kafkajs/client.js; the test's end kills it
// if it still runs.
func startKafkajs(ctx context.Context, t *testing.T, node string, env []string, args ...string) *kafkajsProc {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("testdata", "kafkajs", "client.js")}, args...)...)
	cmd.Env = env
	p := &kafkajsProc{stderr: &logging.Buffer{}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	var werr error
	p.lines = lines
	p.wait = func() error {
		once.Do(func() {
			<-read // Wait closes the pipe: read it all first
			if werr = cmd.Wait(); werr != nil {
				werr = fmt.Errorf("kafkajs %s: %w; stderr:\n%s", args[0], werr, p.stderr.String())
			}
		})
		return werr
	}
	t.Cleanup(func() {
		cancel()
		_ = p.wait()
	})
	return p
}

// TestE2E_KafkajsConsumerLeaderKill has a kafkajs group member read a
// partition, committing each record, while the partition's leader is
// killed -9 halfway: the records produced after the kill (by franz-go,
// uncompressed, to the new leader) must reach it too. Every offset is
// read, in order; a run of offsets is read again only as a redelivery
// from an earlier commit after a rejoin (kafkajs rejoins if the group's
// coordinator was on the killed node), and the group commits the end.
func TestE2E_KafkajsConsumerLeaderKill(t *testing.T) { runKafkajsConsumerLeaderKill(t, nil) }

// runKafkajsConsumerLeaderKill is TestE2E_KafkajsConsumerLeaderKill on a
// topic created with tc's configs.
func runKafkajsConsumerLeaderKill(t *testing.T, tc topicConfigs) {
	node, env := kafkajsEnv(t)
	c := e2eCluster(t, 3)
	const topic, group, half = "kafkajs-consume-failover", "kafkajs-failover-group", 500
	createTopic(t, c, topic, 1, 3, tc.with(nil))
	if mode := tc["replication.mode"]; mode != "" {
		checkMode(t, c, topic, mode)
	}
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	vals := seq("kjs-c", 2*half)
	produceValues(t, cl, topic, 0, vals[:half]...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := startKafkajs(ctx, t, node, env, "consume", strings.Join(seeds(c), ","), group, topic, fmt.Sprint(2*half))
	lines, wait := p.lines, p.wait
	// next is the first offset not yet read; cur the one the current run
	// of deliveries must bring next. A rejoin may start a run again from
	// an earlier offset (its commit), never from a later one.
	next, cur, repeats := 0, 0, 0
	take := func(l string) {
		var part, off int
		var v string
		if _, err := fmt.Sscanf(l, "%d %d %s", &part, &off, &v); err != nil || part != 0 || off > cur || off >= len(vals) || v != vals[off] {
			t.Fatalf("kafkajs consumer: line %q where offset %d was due (a skip, or not the record there)", l, cur)
		}
		if off < next {
			repeats++
		} else {
			next++
		}
		cur = off + 1
	}
	for next < half {
		l, ok := <-lines
		if !ok {
			t.Fatalf("kafkajs consumer ended at offset %d: %v", next, wait())
		}
		take(l)
	}
	victim := partitionLeader(t, c, topic, 0)
	t.Logf("kill -9 node %d, leader of %s-0, after the consumer read %d records", victim, topic, next)
	if err := c.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	produceValues(t, cl, topic, 0, vals[half:]...)
	for l := range lines {
		take(l)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if next != 2*half {
		t.Fatalf("kafkajs consumer read up to offset %d, want %d", next, 2*half)
	}
	t.Logf("%d records delivered again after a rejoin", repeats)
	checkGroupCommitted(t, c, group, topic, map[int32][]string{0: vals})
	checkNoCrashes(t, c)
}
