package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos"
)

// rollingLoad is each topic's load during the rolling restart: paced,
// so that the restarts, not the load, take the test's time.
var rollingLoad = failoverLoad{parts: 3, maxRecords: 1 << 20, loadTimeout: 60 * time.Second, rate: 1000}

// TestE2E_RollingRestart restarts every node of a 3-node cluster in turn
// (SIGTERM, wait for the exit, start, wait until the cluster is whole
// again) while franz-go idempotent acks=all producers load a raft topic
// and an ISR topic (min.insync.replicas=2). Each node drains before it
// stops: it hands its raft partitions to other voters and its ISR ones
// away by its controlled shutdown, and leads nothing when it exits, as
// its drain report says. No produce error reaches the clients, and every
// acknowledged record is read back once, in send order.
func TestE2E_RollingRestart(t *testing.T) {
	c := e2eCluster(t, 3, "--leader-balance-interval", "1s", "--shutdown-timeout", "10s")
	topics := map[string]topicConfigs{"roll-raft": nil, "roll-isr": isrTopic}
	loads := map[string]*load{}
	for name, tc := range topics {
		createTopic(t, c, name, rollingLoad.parts, 3, tc.with(nil))
		loads[name] = startLoad(t, c, name, rollingLoad)
	}
	checkMode(t, c, "roll-isr", "isr")
	for _, id := range c.NodeIDs() {
		waitWhole(t, c, topics)
		waitLeads(t, c, id, topics)
		for _, ld := range loads { // the load runs on every partition
			for p := range rollingLoad.parts {
				ld.awaitAcked(t, p, ld.ackedOn(p)+200)
			}
		}
		rep := stopDrained(t, c, id)
		t.Logf("node %d drained before it stopped: %s", id, rep)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := c.Start(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("restart node %d: %v", id, err)
		}
	}
	waitWhole(t, c, topics)
	for name, ld := range loads {
		sent, acked, failed := ld.stop(t)
		t.Logf("%s: sent %d, acknowledged %d, failed %d; the longest a record waited: %s",
			name, countAll(sent), len(acked), failed, ld.longestWait().Round(time.Millisecond))
		if failed > 0 {
			t.Errorf("%s: %d records failed: a rolling restart must reach the client as latency only", name, failed)
		}
		for p := range rollingLoad.parts {
			got, _ := readPartition(t, c, name, p)
			checkLog(t, fmt.Sprintf("%s-%d", name, p), got, sent[p], acked)
		}
	}
	checkNoCrashes(t, c)
}

// drainReport matches the line a node logs at the end of its drain.
var drainReport = regexp.MustCompile(`msg="leadership drain(?:ed| ended[^"]*)"(?: node=\d+)? led=(\d+) moved=(\d+) left=(\d+) metadata_to=(\d+) lingered=(\S+) took=(\S+)`)

// stopDrained stops node id with SIGTERM and checks, from the report it
// logged, that its drain moved every partition it led (at least one)
// and left none. It returns the report.
func stopDrained(t *testing.T, c *chaos.Cluster, id int) string {
	t.Helper()
	n, err := c.Node(id)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(n.LogPath)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Stop(ctx, id); err != nil {
		t.Fatalf("stop node %d: %v", id, err)
	}
	after, err := os.ReadFile(n.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	m := drainReport.FindSubmatch(after[len(before):])
	if m == nil {
		t.Fatalf("node %d logged no drain report before it stopped", id)
	}
	led, _ := strconv.Atoi(string(m[1]))
	moved, _ := strconv.Atoi(string(m[2]))
	left, _ := strconv.Atoi(string(m[3]))
	if led == 0 || moved != led || left != 0 {
		t.Errorf("node %d: drain report %s, want every partition it led (at least one) moved and none left", id, m[0])
	}
	return string(m[0])
}

// waitLeads waits until node id leads a partition of every topic, so
// that its drain has something to move: leader balance hands the
// restarted nodes' preferred partitions back.
func waitLeads(t *testing.T, c *chaos.Cluster, id int, topics map[string]topicConfigs) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("node %d to lead a partition of every topic", id), func(ctx context.Context) bool {
		s, err := nodeStatus(ctx, c, id)
		if err != nil {
			return false
		}
		leads := map[string]bool{}
		for _, p := range s.Partitions {
			if p.Role == "leader" {
				leads[p.Topic] = true
			}
		}
		for name := range topics {
			if !leads[name] {
				return false
			}
		}
		return true
	})
}

// waitWhole waits until every node is up and alive, and every node
// hosts each partition of topics with a leader known, the ISR ones with
// every replica back in the ISR: one more node may then stop without
// acks=all falling below min.insync.replicas.
func waitWhole(t *testing.T, c *chaos.Cluster, topics map[string]topicConfigs) {
	t.Helper()
	waitAllRegistered(t, c)
	waitFor(t, 60*time.Second, "every partition led and every ISR full", func(ctx context.Context) bool {
		for _, id := range c.NodeIDs() {
			s, err := nodeStatus(ctx, c, id)
			if err != nil {
				return false
			}
			hosted := 0
			for _, p := range s.Partitions {
				if _, ok := topics[p.Topic]; !ok {
					continue
				}
				hosted++
				if p.Leader == 0 || p.Mode == "isr" && len(p.ISR) < len(p.Replicas) {
					return false
				}
			}
			if hosted < len(topics)*int(rollingLoad.parts) {
				return false
			}
		}
		return true
	})
}
