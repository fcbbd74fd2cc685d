package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/chaos"
)

// raftqBinary is the raftq command built once for this package's
// end-to-end tests, which run it as real processes.
var raftqBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "raftq-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	raftqBinary = filepath.Join(dir, "raftq")
	build := exec.Command("go", "build", "-race", "-o", raftqBinary, ".")
	if !raceEnabled {
		build = exec.Command("go", "build", "-o", raftqBinary, ".")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build raftq:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// e2eCluster starts n raftq server processes on loopback (no network
// namespace) and stops them when the test ends.
func e2eCluster(t *testing.T, n int, extra ...string) *chaos.Cluster {
	t.Helper()
	return e2eClusterWith(t, n, nil, extra...)
}

// e2eClusterWith is e2eCluster with prepare, when not nil, run once the
// node dirs exist and before any node starts. Cleanups prepare registers
// run after the nodes have stopped.
func e2eClusterWith(t *testing.T, n int, prepare func(*chaos.Cluster), extra ...string) *chaos.Cluster {
	t.Helper()
	return e2eClusterNodeArgs(t, n, prepare, nil, extra...)
}

// e2eClusterNodeArgs is e2eClusterWith with nodeArgs, when not nil,
// adding each node's own flags.
func e2eClusterNodeArgs(t *testing.T, n int, prepare func(*chaos.Cluster), nodeArgs func(chaos.Node) []string, extra ...string) *chaos.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end cluster tests run real processes; skipped with -short")
	}
	cfg := chaos.DefaultConfig()
	cfg.Binary, cfg.Nodes, cfg.Dir = raftqBinary, n, t.TempDir()
	args := append([]string{"--tick-interval", "50ms", "--log-level", "info"}, extra...)
	cfg.Args = chaos.ServerArgs("e2e", "always", args...)
	if nodeArgs != nil {
		common := cfg.Args
		cfg.Args = func(node chaos.Node, all []chaos.Node) []string { return append(common(node, all), nodeArgs(node)...) }
	}
	cfg.Ready = chaos.HTTPReady("/v1/status")
	cfg.Leader = nil
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := chaos.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // should prepare fail; runs last
	if prepare != nil {
		prepare(c)
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
	if err := c.StartAll(ctx); err != nil {
		t.Fatal(err)
	}
	waitAllRegistered(t, c)
	return c
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func seeds(c *chaos.Cluster) []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.KafkaAddr())
	}
	return out
}

// e2eClient is a kgo client for the cluster, closed with the test.
func e2eClient(t *testing.T, c *chaos.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds(c)...), kgo.Dialer(c.DialContext)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// nodeStatus reads one node's /v1/status.
func nodeStatus(ctx context.Context, c *chaos.Cluster, id int) (broker.Status, error) {
	var s broker.Status
	n, err := c.Node(id)
	if err != nil {
		return s, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.AdminURL(n, "/v1/status"), nil)
	if err != nil {
		return s, err
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

func waitAllRegistered(t *testing.T, c *chaos.Cluster) {
	t.Helper()
	waitFor(t, 60*time.Second, "every node registered and alive", func(ctx context.Context) bool {
		for _, id := range c.NodeIDs() {
			s, err := nodeStatus(ctx, c, id)
			if err != nil {
				return false
			}
			alive := 0
			for _, b := range s.Brokers {
				if b.Alive {
					alive++
				}
			}
			if alive < len(c.NodeIDs()) {
				return false
			}
		}
		return true
	})
}

// partitionLeader returns the node leading topic/partition, per the nodes'
// own raft status.
func partitionLeader(t *testing.T, c *chaos.Cluster, topic string, p int32) int {
	t.Helper()
	leader := 0
	waitFor(t, 60*time.Second, fmt.Sprintf("a leader of %s-%d", topic, p), func(ctx context.Context) bool {
		for _, id := range c.NodeIDs() {
			if !c.Running(id) {
				continue
			}
			s, err := nodeStatus(ctx, c, id)
			if err != nil {
				continue
			}
			for _, ps := range s.Partitions {
				if ps.Topic == topic && ps.Partition == p && ps.Role == "leader" {
					leader = id
					return true
				}
			}
		}
		return false
	})
	return leader
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok := cond(ctx)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
