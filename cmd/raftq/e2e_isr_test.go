package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
)

// The ISR mode end to end: the client and leader-kill tests of the raft
// mode, on topics created with replication.mode=isr and
// min.insync.replicas=2 (RF 3), so that acks=all needs the leader and one
// follower.

// topicConfigs are configs every topic of a test is created with.
type topicConfigs map[string]string

// isrTopic is Kafka's recommended ISR setup: RF 3, min.insync.replicas 2.
var isrTopic = topicConfigs{"replication.mode": "isr", "min.insync.replicas": "2"}

// with returns extra plus tc's configs (extra's win).
func (tc topicConfigs) with(extra map[string]*string) map[string]*string {
	if len(tc) == 0 {
		return extra
	}
	out := map[string]*string{}
	for k, v := range tc {
		out[k] = &v
	}
	maps.Copy(out, extra)
	return out
}

// plus returns tc with key set to value.
func (tc topicConfigs) plus(key, value string) topicConfigs {
	out := maps.Clone(tc)
	if out == nil {
		out = topicConfigs{}
	}
	out[key] = value
	return out
}

// arg is tc as one KEY=VALUE,... argument ("" when empty).
func (tc topicConfigs) arg() string {
	var kvs []string
	for _, k := range slices.Sorted(maps.Keys(tc)) {
		kvs = append(kvs, k+"="+tc[k])
	}
	return strings.Join(kvs, ",")
}

// TestE2E_ClientsISR is TestE2E_Clients on ISR topics: franz-go, sarama,
// kafka-go, kcat and kafkajs produce (idempotent, acks=all where they
// can) and consume, and every acknowledged record is read back once, in
// send order.
func TestE2E_ClientsISR(t *testing.T) { runClients(t, isrTopic) }

// TestE2E_LeaderKillISR kills -9 the leader of an ISR partition with
// min.insync.replicas=2 mid-load: group 0 fences it and elects from the
// ISR, the franz-go producer carries on, every acknowledged record is in
// the log once and in send order, and the killed node, restarted, catches
// up by fetching until its segments hold the same bytes as the others'.
// It runs with Kafka's default flush policy (none) and with
// flush.messages=1 (an fsync before a batch counts).
func TestE2E_LeaderKillISR(t *testing.T) {
	t.Run("no-flush", func(t *testing.T) { runLeaderKillWith(t, shortFailover, 1, isrTopic) })
	t.Run("flush-messages-1", func(t *testing.T) {
		runLeaderKillWith(t, shortFailover, 1, isrTopic.plus("flush.messages", "1"))
	})
}

// checkMode fails t unless every node's replicas of topic replicate in
// mode (the status's mode), so that a test of a mode cannot pass on the
// other. It waits for the replicas to open: CreateTopics answers once
// group 0 has placed an ISR topic, before the nodes host it.
func checkMode(t *testing.T, c *chaos.Cluster, topic, mode string) {
	t.Helper()
	var wrong []string
	waitFor(t, 30*time.Second, "every node to host "+topic, func(ctx context.Context) bool {
		wrong = wrong[:0]
		for _, id := range c.NodeIDs() {
			s, err := nodeStatus(ctx, c, id)
			if err != nil {
				return false
			}
			seen := 0
			for _, p := range s.Partitions {
				if p.Topic != topic {
					continue
				}
				seen++
				if p.Mode != mode {
					wrong = append(wrong, fmt.Sprintf("node %d replicates %s-%d in mode %q", id, topic, p.Partition, p.Mode))
				}
			}
			if seen == 0 {
				return false
			}
		}
		return true
	})
	for _, w := range wrong {
		t.Errorf("%s, want %q", w, mode)
	}
}

// TestE2E_CLIISR creates an ISR topic with raftq topic create -c, and
// checks what topic describe and cluster status show of it: the mode,
// leader epoch, ISR, ELR and each follower's lag.
func TestE2E_CLIISR(t *testing.T) {
	c := e2eCluster(t, 3)
	bs := strings.Join(seeds(c), ",")
	n1, _ := c.Node(1)
	cli(t, 0, "", "topic", "create", "isr", "-p", "2", "-r", "3", "-c", "replication.mode=isr", "-c", "min.insync.replicas=2", "-b", bs)
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceValues(t, cl, "isr", 0, seq("isr", 5)...)

	out := cli(t, 0, "", "topic", "describe", "isr", "-b", bs)
	for _, want := range []string{"replication.mode isr", "ISR", "ELR", "replication.mode=isr", "min.insync.replicas=2"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("topic describe lacks %q:\n%s", want, out.stdout)
		}
	}
	set := `\[[1-3] [1-3] [1-3]\]`
	row := func(p, end int) *regexp.Regexp {
		return regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+[1-3]\s+\d+\s+%s\s+%s\s+\[\]\s+\[\]\s+0\s+%d\s*$`, p, set, set, end))
	}
	if !row(0, 5).MatchString(out.stdout) || !row(1, 0).MatchString(out.stdout) {
		t.Errorf("topic describe: want partition 0 ending at 5 and 1 at 0, each with a full ISR and no ELR:\n%s", out.stdout)
	}

	t.Logf("topic describe:\n%s", out.stdout)
	leader := partitionLeader(t, c, "isr", 0)
	line := regexp.MustCompile(fmt.Sprintf(`(?m)^isr\s+0\s+%d\s+\d+\s+5\s+0\s+%s\s+\[\]\s+\d:0/\S+\s+\d:0/\S+\s*$`, leader, set))
	waitFor(t, 30*time.Second, "cluster status to show isr-0 with both followers caught up", func(context.Context) bool {
		out = cli(t, 0, "", "cluster", "status", "--admin", n1.AdminAddr())
		return strings.Contains(out.stdout, "ISR PARTITIONS") && line.MatchString(out.stdout)
	})
	t.Logf("cluster status:\n%s", out.stdout)
}

// TestE2E_ClientLeaderKillISR runs sarama's and kafkajs's idempotent
// producers (acks=all) through a kill -9 of an ISR partition's leader
// with min.insync.replicas=2: every record is acknowledged once, at the
// offset it was sent for, and the log holds them in order. A kafkajs group
// consumer goes through one too: it reads every offset in order and the
// group commits the end.
func TestE2E_ClientLeaderKillISR(t *testing.T) {
	t.Run("sarama", func(t *testing.T) { runSaramaLeaderKill(t, isrTopic) })
	t.Run("kafkajs", func(t *testing.T) { runKafkajsLeaderKill(t, isrTopic) })
	t.Run("kafkajs-consumer", func(t *testing.T) { runKafkajsConsumerLeaderKill(t, isrTopic) })
}

// TestE2E_BadInputISR is TestE2E_BadInput on ISR topics: each bad input
// gets a Kafka code or a closed connection, and nothing written is lost
// or changed; at the end the replicas' segments are byte-identical.
func TestE2E_BadInputISR(t *testing.T) { runBadInput(t, isrTopic) }

// bumpLeaderEpoch kills -9 leader, the leader of topic-p, waits for group
// 0 to elect another, restarts the killed node and returns the new leader.
func bumpLeaderEpoch(t *testing.T, c *chaos.Cluster, topic string, p int32, leader int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	next := partitionLeader(t, c, topic, p)
	if err := c.Start(ctx, leader); err != nil {
		t.Fatalf("restart node %d: %v", leader, err)
	}
	waitAllRegistered(t, c)
	if next == leader {
		t.Fatalf("node %d still leads %s-%d after its kill", leader, topic, p)
	}
	return next
}
