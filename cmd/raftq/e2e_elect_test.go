package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/chaos"
)

// Leader elections and maintenance mode end to end: raftq partition
// elect and kadm's ElectLeaders against raftq server processes, and
// raftq cluster maintenance.

// leadsNothing reports whether node id's status shows it leading no
// partition and not group 0.
func leadsNothing(ctx context.Context, c *chaos.Cluster, id int) bool {
	s, err := nodeStatus(ctx, c, id)
	if err != nil {
		return false
	}
	parts, meta := leaderships(&s)
	return parts == 0 && !meta
}

// preferredOf returns the partitions of topic whose first replica is
// node id, from node id's status.
func preferredOf(t *testing.T, c *chaos.Cluster, id int, topic string) []int32 {
	t.Helper()
	var out []int32
	waitFor(t, 30*time.Second, fmt.Sprintf("node %d's replicas of %s", id, topic), func(ctx context.Context) bool {
		s, err := nodeStatus(ctx, c, id)
		if err != nil {
			return false
		}
		out = out[:0]
		for _, p := range s.Partitions {
			if p.Topic == topic && len(p.Replicas) > 0 && p.Replicas[0] == uint64(id) {
				out = append(out, p.Partition)
			}
		}
		return len(out) > 0
	})
	return out
}

// waitLed waits until node id leads each of topic's partitions ps, by
// its own status, and the ISR ones' ISRs hold every replica.
func waitLed(t *testing.T, c *chaos.Cluster, id int, topic string, ps []int32) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("node %d to lead %s %v", id, topic, ps), func(ctx context.Context) bool {
		s, err := nodeStatus(ctx, c, id)
		if err != nil {
			return false
		}
		for _, p := range ps {
			i := slices.IndexFunc(s.Partitions, func(x broker.PartitionStatus) bool { return x.Topic == topic && x.Partition == p })
			if i < 0 || s.Partitions[i].Role != "leader" {
				return false
			}
		}
		return true
	})
}

// waitInSync waits until every ISR of topic, as node from's metadata
// answers it, holds all of its replicas.
func waitInSync(t *testing.T, c *chaos.Cluster, from int, topic string) {
	t.Helper()
	adm := kadm.NewClient(nodeClient(t, c, from))
	waitFor(t, 60*time.Second, topic+"'s ISRs to hold every replica", func(ctx context.Context) bool {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil || tds[topic].Err != nil {
			return false
		}
		for _, p := range tds[topic].Partitions {
			if len(p.ISR) != len(p.Replicas) {
				return false
			}
		}
		return true
	})
}

// TestE2E_PartitionElect moves leadership off node 1 twice with leader
// balance off: by a drained restart, then by maintenance on and off. It
// brings it back the first time with raftq partition elect naming the
// topics, the second with kadm's ElectLeaders for every partition, on a
// raft and an ISR topic. An unclean election of a raft partition is
// refused, saying why, and a bad argument is a usage error.
func TestE2E_PartitionElect(t *testing.T) {
	c := e2eCluster(t, 3, "--leader-balance-interval", "0")
	bs := strings.Join(seeds(c), ",")
	n1, _ := c.Node(1)
	createTopic(t, c, "er", 3, 3, nil)
	createTopic(t, c, "ei", 3, 3, isrTopic.with(nil))
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		produceValues(t, cl, "er", p, "a")
		produceValues(t, cl, "ei", p, "a")
	}
	mine := map[string][]int32{"er": preferredOf(t, c, 1, "er"), "ei": preferredOf(t, c, 1, "ei")}
	for topic, ps := range mine {
		waitLed(t, c, 1, topic, ps)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Stop(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitAllRegistered(t, c)
	waitInSync(t, c, 2, "ei")
	// A restarted voter of an idle (quiesced) raft group may win its
	// election, so any partition may now need one: those whose leader
	// is not their first replica.
	needed := map[string][]int32{}
	for _, topic := range []string{"er", "ei"} {
		for p := range int32(3) {
			if l := partitionLeader(t, c, topic, p); l != firstReplica(t, c, topic, p) {
				needed[topic] = append(needed[topic], p)
			}
		}
	}
	if len(needed["er"]) == 0 || len(needed["ei"]) == 0 {
		t.Fatalf("after node 1's drained restart, partitions %v are off their first replica: want some of each topic", needed)
	}
	out := cli(t, 0, "", "partition", "elect", "er", "ei", "-b", bs)
	t.Logf("raftq partition elect er ei:\n%s", out.stdout)
	for _, topic := range []string{"er", "ei"} {
		for p := range int32(3) {
			want := "ELECTION_NOT_NEEDED:"
			if slices.Contains(needed[topic], p) {
				want = "elected"
			}
			if got, _ := electResultOf(out.stdout, topic, p); !strings.HasPrefix(got, want) {
				t.Errorf("partition elect: %s-%d %q, want %q:\n%s", topic, p, got, want, out.stdout)
			}
		}
	}
	for topic, ps := range mine {
		waitLed(t, c, 1, topic, ps)
	}

	cli(t, 0, "", "cluster", "maintenance", "1", "on", "--wait", "--admin", n1.AdminAddr())
	cli(t, 0, "", "cluster", "maintenance", "1", "off", "--admin", n1.AdminAddr())
	if !leadsNothingNow(t, c, 1) {
		t.Fatal("node 1 leads again right after maintenance off, with leader balance off")
	}
	res, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatalf("kadm ElectLeaders for every partition: %v", err)
	}
	for topic, ps := range mine {
		for _, p := range ps {
			if r, ok := res[topic][p]; !ok || r.Err != nil {
				t.Errorf("kadm ElectLeaders %s-%d: %+v (in the answer: %v), want elected", topic, p, r, ok)
			}
		}
	}
	if r, ok := res["er"][otherPartition(mine["er"])]; ok {
		t.Errorf("kadm ElectLeaders for every partition answered one that needed no election: %+v", r)
	}
	for topic, ps := range mine {
		waitLed(t, c, 1, topic, ps)
	}

	out = cli(t, 1, "", "partition", "elect", "--type", "unclean", "er/0", "-b", bs)
	if !strings.Contains(out.stdout, "INVALID_REQUEST") || !strings.Contains(out.stdout, "raft never elects uncleanly") {
		t.Errorf("unclean election of a raft partition:\n%s\nwant INVALID_REQUEST saying raft never elects uncleanly", out.stdout)
	}
	out = cli(t, 1, "", "partition", "elect", "nope/0", "-b", bs)
	if !strings.Contains(out.stdout, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("election of an unknown topic:\n%s\nwant UNKNOWN_TOPIC_OR_PARTITION", out.stdout)
	}
	cli(t, 2, "", "partition", "elect", "--type", "dirty", "er/0", "-b", bs)
	cli(t, 2, "", "partition", "elect", "er/x", "-b", bs)
	cli(t, 2, "", "partition", "elect", "--all", "er", "-b", bs)
	for _, topic := range []string{"er", "ei"} {
		for p := range int32(3) {
			produceValues(t, cl, topic, p, "b")
			got, _ := readPartition(t, c, topic, p)
			checkLog(t, fmt.Sprintf("%s-%d", topic, p), got, []string{"a", "b"}, allAcked([]string{"a", "b"}))
		}
	}
	checkNoCrashes(t, c)
}

// firstReplica is topic-p's first replica, from node 1's status.
func firstReplica(t *testing.T, c *chaos.Cluster, topic string, p int32) int {
	t.Helper()
	var first int
	waitFor(t, 30*time.Second, fmt.Sprintf("the replicas of %s-%d", topic, p), func(ctx context.Context) bool {
		s, err := nodeStatus(ctx, c, 1)
		if err != nil {
			return false
		}
		i := slices.IndexFunc(s.Partitions, func(x broker.PartitionStatus) bool { return x.Topic == topic && x.Partition == p })
		if i < 0 || len(s.Partitions[i].Replicas) == 0 {
			return false
		}
		first = int(s.Partitions[i].Replicas[0])
		return true
	})
	return first
}

// leadsNothingNow reports, from one read of its status, whether node id
// leads nothing.
func leadsNothingNow(t *testing.T, c *chaos.Cluster, id int) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return leadsNothing(ctx, c, id)
}

// otherPartition is a partition of 0-2 that is not in ps.
func otherPartition(ps []int32) int32 {
	for p := range int32(3) {
		if !slices.Contains(ps, p) {
			return p
		}
	}
	return -1
}

// nodeClient is a client that bootstraps from node id alone.
func nodeClient(t *testing.T, c *chaos.Cluster, id int) *kgo.Client {
	t.Helper()
	n, err := c.Node(id)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.Dialer(c.DialContext))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// electResultOf is the RESULT column of partition elect's row for
// topic-p.
func electResultOf(stdout, topic string, p int32) (string, bool) {
	for _, l := range strings.Split(stdout, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == topic && f[1] == fmt.Sprint(p) {
			return strings.Join(f[2:], " "), true
		}
	}
	return "", false
}

// TestE2E_PartitionElectUnclean empties an ISR (eligible leader replicas
// on): node 3 stops, so the ISR of partition eu-0 on nodes 2 and 3 is
// node 2's alone; a record goes to node 2 only; node 2 stops too, and
// node 3 comes back to a leaderless partition whose ISR is empty. A
// preferred election cannot help (node 2 is gone); an unclean one elects
// node 3, which takes writes again, without the record only node 2 had.
func TestE2E_PartitionElectUnclean(t *testing.T) {
	c := e2eCluster(t, 3, "--leader-balance-interval", "0", "--eligible-leader-replicas")
	bs := strings.Join(seeds(c), ",")
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "eu", -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{2, 3}
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{a}
	for k, v := range map[string]string{"replication.mode": "isr", "min.insync.replicas": "1"} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, &v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create eu on [2 3]: %v %+v", err, resp)
	}
	produceValues(t, cl, "eu", 0, "on both")
	adm := kadm.NewClient(nodeClient(t, c, 1))
	eu := func(ctx context.Context) (kadm.PartitionDetail, bool) {
		tds, err := adm.ListTopics(ctx, "eu")
		if err != nil || tds["eu"].Err != nil {
			return kadm.PartitionDetail{}, false
		}
		p, ok := tds["eu"].Partitions[0]
		return p, ok
	}
	if err := c.Stop(ctx, 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "eu-0's ISR to be node 2's alone", func(ctx context.Context) bool {
		p, ok := eu(ctx)
		return ok && slices.Equal(p.ISR, []int32{2})
	})
	produceValues(t, cl, "eu", 0, "only on 2")
	if err := c.Stop(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "eu-0 leaderless with an empty ISR, node 3 registered again", func(ctx context.Context) bool {
		p, ok := eu(ctx)
		s, err := nodeStatus(ctx, c, 1)
		i := slices.IndexFunc(s.Brokers, func(b broker.BrokerStatus) bool { return b.ID == 3 })
		return ok && p.Leader == -1 && len(p.ISR) == 0 && err == nil && i >= 0 && s.Brokers[i].Alive && !s.Brokers[i].ShuttingDown
	})
	out := cli(t, 1, "", "partition", "elect", "eu/0", "-b", bs)
	if got, _ := electResultOf(out.stdout, "eu", 0); !strings.HasPrefix(got, "PREFERRED_LEADER_NOT_AVAILABLE") {
		t.Errorf("preferred election with node 2 gone: %q, want PREFERRED_LEADER_NOT_AVAILABLE:\n%s", got, out.stdout)
	}
	out = cli(t, 0, "", "partition", "elect", "--type", "unclean", "eu", "-b", bs)
	if got, _ := electResultOf(out.stdout, "eu", 0); got != "elected" {
		t.Errorf("unclean election: %q, want elected:\n%s", got, out.stdout)
	}
	waitFor(t, 10*time.Second, "node 1 to see node 3 lead eu-0", func(ctx context.Context) bool {
		p, ok := eu(ctx)
		return ok && p.Leader == 3
	})
	produceValues(t, cl, "eu", 0, "on 3")
	got, _ := readPartition(t, c, "eu", 0)
	if !slices.Contains(got, "on 3") || slices.Contains(got, "only on 2") {
		t.Errorf("eu-0 after the unclean election holds %q: want the record written to node 3, not the one only node 2 had", got)
	}
	checkNoCrashes(t, c)
}

// TestE2E_ClusterMaintenance puts the metadata leader's node into
// maintenance with raftq cluster maintenance: it hands over every
// leadership and leader balance (every second) gives it none back, also
// after a restart; cluster status shows it; a second node, an unknown
// one and a bad argument are refused; off, leadership comes back.
func TestE2E_ClusterMaintenance(t *testing.T) {
	c := e2eCluster(t, 3, "--leader-balance-interval", "1s")
	createTopic(t, c, "mr", 3, 3, nil)
	createTopic(t, c, "mi", 3, 3, isrTopic.with(nil))
	var m int
	waitFor(t, 30*time.Second, "a metadata leader", func(ctx context.Context) bool {
		s, err := nodeStatus(ctx, c, 1)
		m = int(s.Metadata.Leader)
		return err == nil && m != 0
	})
	other := m%3 + 1
	on, _ := c.Node(other)
	admin := on.AdminAddr()
	out := cli(t, 0, "", "cluster", "maintenance", fmt.Sprint(m), "on", "--wait", "--admin", admin)
	if !strings.Contains(out.stdout, fmt.Sprintf("node %d: maintenance on", m)) || !strings.Contains(out.stdout, fmt.Sprintf("node %d leads nothing", m)) {
		t.Errorf("maintenance on --wait printed:\n%s", out.stdout)
	}
	out = cli(t, 1, "", "cluster", "maintenance", fmt.Sprint(other), "on", "--admin", admin)
	if !strings.Contains(out.stderr, "only one broker may be in maintenance") {
		t.Errorf("a second node into maintenance: stderr %q", out.stderr)
	}
	if out = cli(t, 1, "", "cluster", "maintenance", "9", "on", "--admin", admin); !strings.Contains(out.stderr, "not registered") {
		t.Errorf("an unknown node into maintenance: stderr %q", out.stderr)
	}
	cli(t, 2, "", "cluster", "maintenance", fmt.Sprint(m), "maybe", "--admin", admin)
	cli(t, 2, "", "cluster", "maintenance", "x", "on", "--admin", admin)

	checkStatusRow := func(when string) {
		t.Helper()
		out := cli(t, 0, "", "cluster", "status", "--admin", admin)
		if !hasRow(out.stdout, fmt.Sprint(m), "on", "0", "no") || !hasRow(out.stdout, fmt.Sprint(other), "off", "*", "*") {
			t.Errorf("cluster status %s: no row %d on 0 no, or %d off:\n%s", when, m, other, out.stdout)
		}
	}
	checkStatusRow("in maintenance")
	time.Sleep(3 * time.Second) // three leader-balance rounds
	checkStatusRow("three leader-balance rounds later")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Stop(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitAllRegistered(t, c)
	time.Sleep(3 * time.Second) // three leader-balance rounds, and the elections of the restart
	waitFor(t, 10*time.Second, fmt.Sprintf("node %d to lead nothing after its restart", m), func(ctx context.Context) bool { return leadsNothing(ctx, c, m) })
	checkStatusRow("after the node's restart")

	out = cli(t, 0, "", "cluster", "maintenance", fmt.Sprint(m), "off", "--admin", admin)
	if !strings.Contains(out.stdout, fmt.Sprintf("node %d: maintenance off", m)) {
		t.Errorf("maintenance off printed:\n%s", out.stdout)
	}
	waitLed(t, c, m, "mr", preferredOf(t, c, m, "mr"))
	waitLed(t, c, m, "mi", preferredOf(t, c, m, "mi"))
	checkNoCrashes(t, c)
}
