package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/raftq/raftq/chaos"
)

// lifecycleLoad is each topic's load while the cluster changes shape.
var lifecycleLoad = failoverLoad{parts: 4, maxRecords: 1 << 20, loadTimeout: 90 * time.Second, rate: 300}

// TestE2E_ClusterLifecycle changes a cluster of real processes from 3
// nodes to 5 and back to 3 while franz-go idempotent acks=all producers
// load a raft topic and an ISR topic (min.insync.replicas=2), as an
// operator would:
//  1. nodes 4 and 5 join with --seeds, and half the partitions move to
//     them (raftq partition move);
//  2. nodes 1 and 2 are decommissioned (raftq cluster decommission
//     --wait), stopped and removed: the cluster is 3, 4, 5, and group 0's
//     votes moved with the replicas;
//  3. node 3 loses its data directory: it is killed and its directory
//     deleted; node 6 joins, node 3 is decommissioned while dead (its
//     replicas are rebuilt on 6 from the surviving copies) and removed.
//
// No produce fails; after each step every partition lives on three live
// nodes, group 0's voters are three live ones and no removed node is left
// in it; at the end every acknowledged record reads back once, in send
// order, and every partition's replicas hold the same bytes.
func TestE2E_ClusterLifecycle(t *testing.T) {
	c := growCluster(t, 6, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topics := map[string]topicConfigs{"life-raft": nil, "life-isr": isrTopic}
	loads := map[string]*load{}
	for name, tc := range topics {
		createTopic(t, c, name, lifecycleLoad.parts, 3, tc.with(nil))
		loads[name] = startLoad(t, c, name, lifecycleLoad)
	}
	progress := func() {
		for _, ld := range loads {
			awaitLoad(t, ld, lifecycleLoad.parts, 50)
		}
	}
	up := []int{1, 2, 3}
	progress()

	// 1. Grow to 5 and move half the partitions onto the new nodes.
	for _, id := range []int{4, 5} {
		if err := c.Start(ctx, id); err != nil {
			t.Fatalf("join node %d: %v", id, err)
		}
		up = append(up, id)
		waitAlive(t, c, up)
	}
	adm := kadm.NewClient(e2eClient(t, c))
	for name := range topics {
		for p := range lifecycleLoad.parts / 2 {
			to := moveTarget(t, adm, c, name, p, up)
			cli(t, 0, "", "partition", "move", fmt.Sprintf("%s/%d", name, p), "--replicas", brokerIDList(to), "--wait", "--brokers", kafkaOf(c, up))
		}
	}
	checkShape(t, c, topics, up, false)
	progress()

	// 2. Shrink to 3: decommission, stop and remove nodes 1 and 2.
	for _, id := range []int{1, 2} {
		admin := adminOf(c, up[len(up)-1])
		out := cli(t, 0, "", "cluster", "decommission", fmt.Sprint(id), "--wait", "--admin", admin)
		t.Logf("decommission %d: %s", id, lastLine(out.stdout))
		if err := c.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		up = slices.DeleteFunc(up, func(x int) bool { return x == id })
		cli(t, 0, "", "cluster", "remove", fmt.Sprint(id), "--admin", admin)
		progress()
	}
	waitMetadataVoters(t, c, up, []uint64{3, 4, 5}, nil)
	checkShape(t, c, topics, up, false)

	// 3. Node 3 loses its disk; node 6 takes its place.
	n3, _ := c.Node(3)
	if err := c.Kill(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n3.DataDir); err != nil {
		t.Fatal(err)
	}
	up = []int{4, 5}
	if err := c.Start(ctx, 6); err != nil {
		t.Fatalf("join node 6: %v", err)
	}
	up = append(up, 6)
	waitAlive(t, c, up)
	admin := adminOf(c, 4)
	out := cli(t, 0, "", "cluster", "decommission", "3", "--wait", "--admin", admin)
	t.Logf("decommission dead node 3: %s", lastLine(out.stdout))
	cli(t, 0, "", "cluster", "remove", "3", "--admin", admin)
	waitMetadataVoters(t, c, up, []uint64{4, 5, 6}, nil)
	checkShape(t, c, topics, up, false)
	progress()

	for name, ld := range loads {
		sent, acked, failed := ld.stop(t)
		t.Logf("%s: sent %d, acknowledged %d, failed %d; the longest a record waited: %s",
			name, countAll(sent), len(acked), failed, ld.longestWait().Round(time.Millisecond))
		if failed > 0 {
			t.Errorf("%s: %d records failed while the cluster changed shape", name, failed)
		}
		for p := range lifecycleLoad.parts {
			got, _ := readPartition(t, c, name, p)
			checkLog(t, fmt.Sprintf("%s-%d", name, p), got, sent[p], acked)
		}
	}
	checkShape(t, c, topics, up, true)
	checkNoCrashes(t, c)
}

// checkShape checks that every partition of topics is hosted by three of
// the nodes in up alone; with sameBytes (the load stopped), that their
// segments hold the same bytes.
func checkShape(t *testing.T, c *chaos.Cluster, topics map[string]topicConfigs, up []int, sameBytes bool) {
	t.Helper()
	for name := range topics {
		for p := range lifecycleLoad.parts {
			var hosts []int
			waitFor(t, 60*time.Second, fmt.Sprintf("%s-%d on three of %v", name, p, up), func(ctx context.Context) bool {
				hosts = hostsOf(ctx, c, name, p)
				return len(hosts) == 3 && !slices.ContainsFunc(hosts, func(id int) bool { return !slices.Contains(up, id) })
			})
			if sameBytes {
				n := waitReplicasEqual(t, c, name, p, hosts)
				t.Logf("%s-%d: on %v, %d bytes each", name, p, hosts, n)
			}
		}
	}
}

func adminOf(c *chaos.Cluster, id int) string {
	n, _ := c.Node(id)
	return n.AdminAddr()
}

func kafkaOf(c *chaos.Cluster, ids []int) string {
	var out []string
	for _, id := range ids {
		n, _ := c.Node(id)
		out = append(out, n.KafkaAddr())
	}
	return strings.Join(out, ",")
}

func lastLine(s string) string {
	l := lines(s)
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}
