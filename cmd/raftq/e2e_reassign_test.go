package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/raftq/raftq/chaos"
)

// reassignLoad is each topic's load while partitions move.
var reassignLoad = failoverLoad{parts: 4, maxRecords: 1 << 20, loadTimeout: 60 * time.Second, rate: 1000}

// TestE2E_Reassignment moves half the partitions of a raft topic and of
// an ISR topic (min.insync.replicas=2) to other nodes of a 5-node
// cluster of real processes while franz-go idempotent acks=all producers
// load them: through franz-go's kadm, sarama's ClusterAdmin and raftq
// partition move. No produce fails; afterwards each moved partition
// lives on its new replicas alone, whose segments hold the same bytes,
// and every acknowledged record reads back once, in send order.
func TestE2E_Reassignment(t *testing.T) {
	c := e2eCluster(t, 5, "--leader-balance-interval", "1s")
	topics := map[string]topicConfigs{"mv-raft": nil, "mv-isr": isrTopic}
	loads := map[string]*load{}
	for name, tc := range topics {
		createTopic(t, c, name, reassignLoad.parts, 3, tc.with(nil))
		loads[name] = startLoad(t, c, name, reassignLoad)
	}
	checkMode(t, c, "mv-isr", "isr")
	for _, ld := range loads {
		for p := range reassignLoad.parts {
			ld.awaitAcked(t, p, 200)
		}
	}
	adm := kadm.NewClient(e2eClient(t, c))
	targets := map[string]map[int32][]int32{}
	for name := range topics {
		targets[name] = map[int32][]int32{}
		for p := range reassignLoad.parts / 2 {
			targets[name][p] = moveTarget(t, adm, c, name, p, c.NodeIDs())
		}
	}
	var req kadm.AlterPartitionAssignmentsReq // the raft topic through kadm
	for p, to := range targets["mv-raft"] {
		req.Assign("mv-raft", p, to)
	}
	res, err := adm.AlterPartitionAssignments(context.Background(), req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("kadm AlterPartitionAssignments: %v", err)
	}
	sadm, err := sarama.NewClusterAdmin(seeds(c), saramaConfig(sarama.V2_8_0_0)) // ISR partition 0 through sarama
	if err != nil {
		t.Fatal(err)
	}
	defer sadm.Close()
	if err := sadm.AlterPartitionReassignments("mv-isr", [][]int32{targets["mv-isr"][0]}); err != nil {
		t.Fatalf("sarama AlterPartitionReassignments: %v", err)
	}
	to := targets["mv-isr"][1] // ISR partition 1 through the CLI
	out := cli(t, 0, "", "partition", "move", "mv-isr/1", "--replicas", brokerIDList(to), "--wait", "--brokers", strings.Join(seeds(c), ","))
	t.Logf("raftq partition move: %s", strings.TrimSpace(out.stdout))

	waitFor(t, 60*time.Second, "every move to end (sarama's ListPartitionReassignments)", func(context.Context) bool {
		for name := range topics {
			moving, err := sadm.ListPartitionReassignments(name, []int32{0, 1})
			if err != nil || len(moving[name]) > 0 {
				return false
			}
		}
		return true
	})
	if st := cli(t, 0, "", "partition", "status", "--brokers", strings.Join(seeds(c), ",")); !strings.Contains(st.stdout, "no partition is moving") {
		t.Errorf("raftq partition status after the moves:\n%s", st.stdout)
	}
	for _, ld := range loads { // the load goes on after the moves
		for p := range reassignLoad.parts {
			ld.awaitAcked(t, p, ld.ackedOn(p)+200)
		}
	}
	for name, ld := range loads {
		sent, acked, failed := ld.stop(t)
		t.Logf("%s: sent %d, acknowledged %d, failed %d; the longest a record waited: %s",
			name, countAll(sent), len(acked), failed, ld.longestWait().Round(time.Millisecond))
		if failed > 0 {
			t.Errorf("%s: %d records failed: a move must reach the client as latency only", name, failed)
		}
		for p := range reassignLoad.parts {
			got, _ := readPartition(t, c, name, p)
			checkLog(t, fmt.Sprintf("%s-%d", name, p), got, sent[p], acked)
		}
		for p, to := range targets[name] {
			checkMovedTo(t, c, name, p, to)
		}
	}
	checkNoCrashes(t, c)
}

// moveTarget picks a new replica list for topic-p among nodes: the first
// two that hold no replica of it, then its last replica, so that two of
// three replicas move, often the leader with them.
func moveTarget(t *testing.T, adm *kadm.Client, c *chaos.Cluster, topic string, p int32, nodes []int) []int32 {
	t.Helper()
	md, err := adm.Metadata(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	cur := md.Topics[topic].Partitions[p].Replicas
	var to []int32
	for _, id := range nodes {
		if !slices.Contains(cur, int32(id)) && len(to) < len(cur)-1 {
			to = append(to, int32(id))
		}
	}
	return append(to, cur[len(cur)-1])
}

// checkMovedTo checks that only the nodes of to host topic-p, and that
// their segments agree.
func checkMovedTo(t *testing.T, c *chaos.Cluster, topic string, p int32, to []int32) {
	t.Helper()
	want := make([]int, len(to))
	for i, id := range to {
		want[i] = int(id)
	}
	slices.Sort(want)
	waitFor(t, 30*time.Second, fmt.Sprintf("%s-%d hosted by %v alone", topic, p, want), func(ctx context.Context) bool {
		return slices.Equal(hostsOf(ctx, c, topic, p), want)
	})
	n := waitReplicasEqual(t, c, topic, p, want)
	t.Logf("%s-%d: on %v, %d bytes each", topic, p, want, n)
}

func brokerIDList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
