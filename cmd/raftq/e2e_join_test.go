package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/chaos"
)

// growArgs starts nodes 1..initial from --initial-cluster (of those
// nodes only) and has every later node join with --seeds, through the
// node just before it: node 4 through node 3, node 5 through node 4,
// which joined itself.
func growArgs(initial int, extra ...string) chaos.ArgsFunc {
	first := chaos.ServerArgs("e2e", "always", extra...)
	return func(n chaos.Node, all []chaos.Node) []string {
		if n.ID <= initial {
			return first(n, all[:initial])
		}
		args := []string{"server", "--node-id", fmt.Sprint(n.ID), "--data-dir", n.DataDir,
			"--kafka-addr", n.KafkaAddr(), "--peer-addr", n.PeerAddr(), "--admin-addr", n.AdminAddr(),
			"--seeds", all[n.ID-2].PeerAddr(), "--fsync", "always"}
		return append(args, extra...)
	}
}

// growCluster prepares n node slots and starts the first initial of
// them; the others join when the test starts them.
func growCluster(t *testing.T, n, initial int) *chaos.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end cluster tests run real processes; skipped with -short")
	}
	cfg := chaos.DefaultConfig()
	cfg.Binary, cfg.Nodes, cfg.Dir = raftqBinary, n, t.TempDir()
	cfg.Args = growArgs(initial, "--tick-interval", "50ms", "--log-level", "info")
	cfg.Ready = chaos.HTTPReady("/v1/status")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := chaos.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, node := range c.Nodes() {
				if b, err := os.ReadFile(node.LogPath); err == nil {
					t.Logf("---- node %d log (tail) ----\n%s", node.ID, tail(b, 4000))
				}
			}
		}
		c.Close()
	})
	ids := make([]int, initial)
	for i := range ids {
		ids[i] = i + 1
	}
	if err := c.EnsureRunning(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	waitAlive(t, c, ids)
	return c
}

// waitAlive waits until every node of ids sees every node of ids alive.
func waitAlive(t *testing.T, c *chaos.Cluster, ids []int) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("nodes %v registered and alive everywhere", ids), func(ctx context.Context) bool {
		for _, id := range ids {
			s, err := nodeStatus(ctx, c, id)
			if err != nil {
				return false
			}
			for _, want := range ids {
				if !slices.ContainsFunc(s.Brokers, func(b broker.BrokerStatus) bool { return b.ID == uint64(want) && b.Alive }) {
					return false
				}
			}
		}
		return true
	})
}

// waitMetadataVoters waits until every node of ids reports group 0 with
// voters and learners as given, out of any joint configuration.
func waitMetadataVoters(t *testing.T, c *chaos.Cluster, ids []int, voters, learners []uint64) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("metadata voters %v learners %v", voters, learners), func(ctx context.Context) bool {
		for _, id := range ids {
			s, err := nodeStatus(ctx, c, id)
			if err != nil || !slices.Equal(s.Metadata.Voters, voters) || !slices.Equal(s.Metadata.Learner, learners) || len(s.Metadata.VotersOutgoing) > 0 {
				return false
			}
		}
		return true
	})
}

// TestE2E_GrowCluster grows a 3-node cluster to 5 with raftq server
// --seeds while a franz-go idempotent acks=all producer loads a topic:
// after each join the new node is alive everywhere, and a topic created
// then has a partition on it that serves; with the fifth node group 0
// has five voters, as cluster status and /v1/status say; a joined node
// restarts with its --seeds; every acknowledged record reads back once,
// in order, and the load's replicas hold the same bytes. Then each bad
// join fails with an error that says why, and changes nothing.
func TestE2E_GrowCluster(t *testing.T) {
	c := growCluster(t, 5, 3)
	const topic = "grow"
	createTopic(t, c, topic, 3, 3, nil)
	ld := startLoad(t, c, topic, failoverLoad{parts: 3, maxRecords: 1_000_000, loadTimeout: 90 * time.Second, rate: 300})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	up := []int{1, 2, 3}
	waitMetadataVoters(t, c, up, []uint64{1, 2, 3}, nil)
	for _, id := range []int{4, 5} {
		awaitLoad(t, ld, 3, 100)
		if err := c.Start(ctx, id); err != nil {
			t.Fatalf("join node %d: %v", id, err)
		}
		up = append(up, id)
		waitAlive(t, c, up)
		checkPlacedOn(t, c, fmt.Sprintf("after-%d", id), id)
		if id == 4 {
			waitMetadataVoters(t, c, up, []uint64{1, 2, 3}, []uint64{4})
		}
	}
	waitMetadataVoters(t, c, up, []uint64{1, 2, 3, 4, 5}, nil)
	n1, _ := c.Node(1)
	status := cli(t, 0, "", "cluster", "status", "--admin", n1.AdminAddr())
	if !strings.Contains(status.stdout, "metadata voters [1 2 3 4 5]  learners []") {
		t.Errorf("cluster status does not name five metadata voters:\n%s", status.stdout)
	}

	awaitLoad(t, ld, 3, 100)
	if err := c.Restart(ctx, 4); err != nil {
		t.Fatalf("restart joined node 4: %v", err)
	}
	waitAlive(t, c, up)
	awaitLoad(t, ld, 3, 100)

	sent, acked, failed := ld.stop(t)
	t.Logf("sent %d, acknowledged %d, failed %d", countAll(sent), len(acked), failed)
	if failed > 0 {
		t.Errorf("%d records failed while nodes joined", failed)
	}
	for p := range int32(3) {
		got, _ := readPartition(t, c, topic, p)
		checkLog(t, fmt.Sprintf("%s-%d", topic, p), got, sent[p], acked)
		waitReplicasEqual(t, c, topic, p, hostsOf(ctx, c, topic, p))
	}
	checkNoCrashes(t, c)
	t.Run("bad joins", func(t *testing.T) { testBadJoins(t, c) })
}

// awaitLoad waits until each of parts partitions has n more records
// acknowledged than now.
func awaitLoad(t *testing.T, ld *load, parts int32, n int) {
	t.Helper()
	for p := range parts {
		ld.awaitAcked(t, p, ld.ackedOn(p)+n)
	}
}

// checkPlacedOn creates a topic with as many partitions as nodes and
// checks that node id hosts a replica of one, which takes records and
// reads them back.
func checkPlacedOn(t *testing.T, c *chaos.Cluster, name string, id int) {
	t.Helper()
	createTopic(t, c, name, int32(id), 3, nil)
	var p int32 = -1
	waitFor(t, 30*time.Second, fmt.Sprintf("node %d to host a replica of %s", id, name), func(ctx context.Context) bool {
		s, err := nodeStatus(ctx, c, id)
		if err != nil {
			return false
		}
		for _, ps := range s.Partitions {
			if ps.Topic == name {
				p = ps.Partition
				return true
			}
		}
		return false
	})
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	values := seq(name, 20)
	produceValues(t, cl, name, p, values...)
	got, _ := readPartition(t, c, name, p)
	checkLog(t, fmt.Sprintf("%s-%d", name, p), got, values, allAcked(values))
}

// testBadJoins runs raftq server with each bad join and checks its
// error, then that the cluster's membership is as it was.
func testBadJoins(t *testing.T, c *chaos.Cluster) {
	n1, _ := c.Node(1)
	seed := n1.PeerAddr()
	server := func(id string, extra ...string) []string {
		return append([]string{"server", "--node-id", id, "--data-dir", filepath.Join(t.TempDir(), "data"),
			"--kafka-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--tick-interval", "50ms"}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"seeds with an initial cluster", server("9", "--seeds", seed, "--initial-cluster", "9=127.0.0.1:1"), 2,
			"--seeds and --initial-cluster are exclusive"},
		{"node id 0", server("0", "--seeds", seed), 2, "node id must be non-zero"},
		{"another cluster id", server("9", "--seeds", seed, "--cluster-id", "other"), 1,
			`node 9 asks to join cluster "other", this node is in "e2e"`},
		{"a node id registered from another data dir", server("2", "--seeds", seed), 1,
			"node id 2 is registered from another data directory"},
		{"unreachable seeds", server("9", "--seeds", "127.0.0.1:1,127.0.0.1:2", "--join-timeout", "2s"), 1,
			"join: no seed answered within 2s; tried 127.0.0.1:1 ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := cli(t, tc.code, "", tc.args...)
			if !strings.Contains(out.stderr, tc.want) {
				t.Errorf("stderr %q, want %q", out.stderr, tc.want)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := nodeStatus(ctx, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ids := s.Metadata.Voters; !slices.Equal(ids, []uint64{1, 2, 3, 4, 5}) || len(s.Metadata.Learner) > 0 || len(s.Brokers) != 5 {
		t.Errorf("after the bad joins: voters %v learners %v, %d brokers", ids, s.Metadata.Learner, len(s.Brokers))
	}
}
