package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

// kafkajsRoundTrip runs kafkajs (Node.js) against the cluster through
// testdata/kafkajs/client.js: its admin client creates a topic, its
// idempotent producer (acks=all) fills each partition, franz-go reads
// that back, and a kafkajs consumer group member reads the topic from the
// beginning and commits what it read. kafkajs always consumes through a
// group, so this also runs its JoinGroup, SyncGroup, Heartbeat and
// OffsetCommit against raftq's coordinator. (It reads its own topic, not
// franz-go's: kafkajs cannot decode snappy, franz-go's default codec,
// without a plugin, from Kafka as from raftq.)
func kafkajsRoundTrip(t *testing.T, c *chaos.Cluster) {
	node, env := kafkajsEnv(t)
	brokers := strings.Join(seeds(c), ",")
	const parts, perPart = 3, 40
	if out := runKafkajs(t, node, env, "create", brokers, "kafkajs", fmt.Sprint(parts), "3"); out != "created true partitions 3" {
		t.Fatalf("kafkajs create: %q, want the topic created with 3 partitions", out)
	}
	want := map[int32][]string{}
	for p := range int32(parts) {
		vals := seq(fmt.Sprintf("kafkajs-p%d", p), perPart)
		want[p] = vals
		out := runKafkajs(t, node, env, "produce", brokers, "kafkajs", fmt.Sprint(p), fmt.Sprintf("kafkajs-p%d", p), fmt.Sprint(perPart))
		var want []string
		for off := 0; off < perPart; off += 10 {
			want = append(want, fmt.Sprintf("%d %d", p, off))
		}
		if got := lines(out); !slices.Equal(got, want) {
			t.Errorf("kafkajs produce to %d: base offsets %q, want %q", p, got, want)
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
}

// kafkajsEnv finds node and the kafkajs package: $RAFTQ_KAFKAJS, a
// node_modules directory, or where .ci/run installs it with npm.
func kafkajsEnv(t *testing.T) (node string, env []string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (Node.js 20 is on the CI machines)")
	}
	dir := os.Getenv("RAFTQ_KAFKAJS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "raftq", "kafkajs", "node_modules")
	}
	if _, err := os.Stat(filepath.Join(dir, "kafkajs", "package.json")); err != nil {
		t.Skipf("kafkajs is not installed in %s (.ci/run installs it: npm install --prefix %s kafkajs@2.2.4)", dir, filepath.Dir(dir))
	}
	return node, append(os.Environ(), "NODE_PATH="+dir)
}

// runKafkajs runs testdata/kafkajs/client.js and returns its output,
// trimmed; any failure ends the test.
func runKafkajs(t *testing.T, node string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("testdata", "kafkajs", "client.js")}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafkajs %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("kafkajs %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// TestE2E_KafkajsLeaderKill kills -9 the leader of a partition while a
// kafkajs idempotent producer (acks=all, one request in flight) sends to
// it, five records a request (killLeaderUnderClient).
func TestE2E_KafkajsLeaderKill(t *testing.T) {
	node, env := kafkajsEnv(t)
	c := e2eCluster(t, 3)
	const topic, count = "kafkajs-failover", 2000
	createTopic(t, c, topic, 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "kafkajs", "client.js"),
		"load", strings.Join(seeds(c), ","), topic, "0", "kjs", fmt.Sprint(count))
	cmd.Env = env
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := make(chan string, count)
	go func() {
		defer close(acks)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			acks <- sc.Text()
		}
	}()
	got := killLeaderUnderClient(ctx, t, c, topic, acks, func() error {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("%w; stderr:\n%s", err, stderr.String())
		}
		return nil
	})
	checkClientFailover(t, c, topic, got, seq("kjs", count))
	// kafkajs logs each failed attempt: without one, the kill never
	// reached the producer and this tested nothing.
	if !strings.Contains(stderr.String(), "[Producer] Failed to send messages") {
		t.Errorf("kafkajs never retried a request; stderr:\n%s", stderr.String())
	}
}
