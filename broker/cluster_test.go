package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/raftgroup"
)

// testCluster is n broker nodes in this process over real loopback TCP
// and real WALs, for the broker's own tests. The end-to-end tests against
// the built binary live in cmd/raftq.
type testCluster struct {
	t     testing.TB
	nodes map[uint64]*Node
	cfgs  map[uint64]Config
}

var usedPorts = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// freeAddr picks a loopback port below the kernel's ephemeral range
// (32768 and up here), so that no outgoing connection can take it between
// this check and the node's bind.
// Ports are never handed out twice in one test process.
func freeAddr(t testing.TB) string {
	t.Helper()
	usedPorts.Lock()
	defer usedPorts.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if usedPorts.m[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			usedPorts.m[port] = true
			return addr
		}
	}
	t.Fatal("no free loopback port in 20000-32000")
	return ""
}

func newTestCluster(t testing.TB, n int, mod func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, nodes: map[uint64]*Node{}, cfgs: map[uint64]Config{}}
	root := t.TempDir()
	cluster := map[uint64]string{}
	for i := 1; i <= n; i++ {
		cluster[uint64(i)] = freeAddr(t)
	}
	for i := 1; i <= n; i++ {
		cfg := DefaultConfig()
		cfg.NodeID, cfg.ClusterID = uint64(i), "test"
		cfg.DataDir = filepath.Join(root, fmt.Sprintf("n%d", i))
		cfg.KafkaAddr, cfg.PeerAddr, cfg.AdminAddr = freeAddr(t), cluster[uint64(i)], freeAddr(t)
		cfg.InitialCluster = cluster
		cfg.TickInterval = 20 * time.Millisecond
		cfg.WALSegmentBytes = 1 << 20
		cfg.DefaultReplicationFactor = int16(min(n, 3))
		if mod != nil {
			mod(&cfg)
		}
		c.cfgs[cfg.NodeID] = cfg
	}
	t.Cleanup(c.close)
	for id := range c.cfgs {
		c.start(id)
	}
	c.waitBrokers(n)
	return c
}

func (c *testCluster) start(id uint64) {
	c.t.Helper()
	n, err := New(c.cfgs[id])
	if err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	c.nodes[id] = n
}

func (c *testCluster) stop(id uint64) {
	if n := c.nodes[id]; n != nil {
		n.Close()
		delete(c.nodes, id)
	}
}

func (c *testCluster) close() {
	for id := range c.nodes {
		c.stop(id)
	}
}

func (c *testCluster) seeds() []string {
	var out []string
	for _, cfg := range c.cfgs {
		out = append(out, cfg.KafkaAddr)
	}
	return out
}

func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *testCluster) waitBrokers(n int) {
	c.t.Helper()
	eventually(c.t, "every node sees every broker alive", func() bool {
		for _, node := range c.nodes {
			alive := 0
			for _, b := range node.Metadata().Brokers {
				if b.Alive {
					alive++
				}
			}
			if alive < n {
				return false
			}
		}
		return true
	})
}

// eventually polls cond until it holds or 30 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var _ = raftgroup.ErrNotLeader
