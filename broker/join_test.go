package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// joinConfig is a config for node id joining c through seeds, in a data
// dir of its own (dir: t.TempDir() when empty).
func (c *testCluster) joinConfig(id uint64, dir string, seeds ...string) Config {
	cfg := c.cfgs[1]
	cfg.NodeID, cfg.ClusterID, cfg.InitialCluster, cfg.Seeds = id, "", nil, seeds
	if dir == "" {
		dir = filepath.Join(c.t.TempDir(), fmt.Sprintf("n%d", id))
	}
	cfg.DataDir = dir
	cfg.KafkaAddr, cfg.PeerAddr, cfg.AdminAddr = freeAddr(c.t), freeAddr(c.t), freeAddr(c.t)
	cfg.JoinTimeout = 20 * time.Second
	return cfg
}

// join starts node id with cfg, a joining node's.
func (c *testCluster) join(cfg Config) {
	c.t.Helper()
	c.cfgs[cfg.NodeID] = cfg
	c.start(cfg.NodeID)
}

// peerOf is node id's peer address.
func (c *testCluster) peerOf(id uint64) string { return c.cfgs[id].PeerAddr }

// waitVoters waits until every running node's group 0 has voters and
// learners as given, out of any joint configuration.
func (c *testCluster) waitVoters(voters, learners []uint64) {
	c.t.Helper()
	eventually(c.t, fmt.Sprintf("metadata voters %v, learners %v on every node", voters, learners), func() bool {
		for _, n := range c.nodes {
			s := n.ctl.Status()
			if !slices.Equal(s.Voters, voters) || !slices.Equal(s.Learners, learners) || len(s.VotersOutgoing) > 0 {
				return false
			}
		}
		return true
	})
}

// createOn creates a topic and returns the replicas of its partitions.
func (c *testCluster) createTopic(name string, parts int32, rf int16) [][]uint64 {
	c.t.Helper()
	adm := kadm.NewClient(c.client())
	res, err := adm.CreateTopic(testCtx(c.t), parts, rf, nil, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", name, err)
	}
	var out [][]uint64
	eventually(c.t, "topic "+name+" in the metadata", func() bool {
		tp, ok := c.nodes[1].Metadata().Topics[name]
		if !ok {
			return false
		}
		out = nil
		for _, p := range tp.Partitions {
			out = append(out, p.Replicas)
		}
		return true
	})
	return out
}

// Two nodes join a 3-node cluster through --seeds, one after the other,
// without a restart of anyone: each learns the cluster id from its seed,
// registers, becomes a peer of every node and a learner of group 0, gets
// replicas of a topic created next; with the fifth, group 0 has five
// voters. A joined node then restarts from its data dir, with seeds that
// no longer answer.
func TestJoin_GrowsTheCluster(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.waitVoters([]uint64{1, 2, 3}, nil)
	for _, id := range []uint64{4, 5} {
		c.join(c.joinConfig(id, "", "127.0.0.1:1", c.peerOf(id-2))) // a dead seed first: the next is tried
		c.waitBrokers(int(id))
		if got := c.nodes[id].cfg.ClusterID; got != "test" {
			t.Errorf("node %d joined cluster %q", id, got)
		}
		for other, n := range c.nodes {
			if _, ok := n.peer.PeerStats(id); other != id && !ok {
				t.Errorf("node %d's transport does not know node %d", other, id)
			}
		}
		assign := c.createTopic(fmt.Sprintf("after-%d", id), int32(id), 3)
		if !slices.ContainsFunc(assign, func(r []uint64) bool { return slices.Contains(r, id) }) {
			t.Errorf("no partition of a topic created after node %d joined is on it: %v", id, assign)
		}
		if id == 4 {
			c.waitVoters([]uint64{1, 2, 3}, []uint64{4})
		}
	}
	c.waitVoters([]uint64{1, 2, 3, 4, 5}, nil)

	// node 5 restarts from its data: it needs neither seeds nor anyone's
	// help to find its peers (they come from the metadata it replays).
	cfg := c.cfgs[5]
	c.stop(5)
	cfg.Seeds = []string{"127.0.0.1:1"}
	c.cfgs[5] = cfg
	c.start(5)
	c.waitBrokers(5)
	c.waitVoters([]uint64{1, 2, 3, 4, 5}, nil)
}

// A join through a seed of another cluster, under a node id already
// registered from another data dir, or through seeds that never answer
// fails with an error that says so, and leaves the cluster as it was.
func TestJoin_BadInput(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.waitVoters([]uint64{1, 2, 3}, nil)
	before := c.nodes[1].Metadata()
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"another cluster", func(cfg *Config) { cfg.ClusterID = "other" }, `asks to join cluster "other"`},
		{"a registered id", func(cfg *Config) { cfg.NodeID = 2 }, "node id 2 is registered from another data directory"},
		{"dead seeds", func(cfg *Config) { cfg.Seeds, cfg.JoinTimeout = []string{"127.0.0.1:1", "127.0.0.1:2"}, time.Second },
			"no seed answered within 1s; tried 127.0.0.1:1 ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := c.joinConfig(9, "", c.peerOf(1))
			tc.edit(&cfg)
			n, err := New(cfg)
			if err == nil {
				n.Close()
				t.Fatal("the join succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
			if _, ok, _ := readIdentity(cfg.DataDir); ok {
				t.Error("a refused join wrote node.json")
			}
		})
	}
	after := c.nodes[1].Metadata()
	if len(after.Admitted) != 0 || len(after.Brokers) != len(before.Brokers) {
		t.Errorf("refused joins changed the metadata: admitted %v, brokers %v", after.Admitted, after.BrokerIDs())
	}
	for _, n := range c.nodes {
		if got := n.ctl.Status().Members(); !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Errorf("node %d: group 0 members %v after refused joins", n.ID(), got)
		}
	}
	// Seeds with an initial cluster: a configuration error.
	cfg := c.joinConfig(9, "", c.peerOf(1))
	cfg.InitialCluster = map[uint64]string{9: cfg.PeerAddr}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("seeds and an initial cluster: %v", err)
	}
}

// A node that crashed between learning the cluster id and its admission
// (node.json marked joining) asks again with the same incarnation at its
// next start, and is admitted: a retried join is harmless.
func TestJoin_RetriedAfterACrash(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cfg := c.joinConfig(4, "", c.peerOf(1))
	n := &Node{cfg: cfg, log: c.nodes[1].log}
	plan, err := n.planJoin()
	if err != nil {
		t.Fatal(err)
	}
	id, ok, err := readIdentity(cfg.DataDir)
	if err != nil || !ok || !id.Joining || id.ClusterID != "test" || id.Incarnation != plan.incarnation {
		t.Fatalf("node.json after the probe: %+v %v %v", id, ok, err)
	}
	// Admitted once already (a seed committed it, its answer was lost).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.nodes[1].admit(ctx, 4, "127.0.0.1:1", id.Incarnation); err != nil {
		t.Fatal(err)
	}
	c.join(cfg)
	c.waitBrokers(4)
	id, _, _ = readIdentity(cfg.DataDir)
	if id.Joining || id.Incarnation != plan.incarnation {
		t.Errorf("node.json after the join: %+v", id)
	}
	if got := c.nodes[2].Metadata().Admitted[4].PeerAddr; got != c.nodes[4].peerAdvert() {
		t.Errorf("admitted address %q, want the rejoin's %q", got, c.nodes[4].peerAdvert())
	}
}
