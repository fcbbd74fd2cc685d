package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// Small segments: these tests open many WALs, and a restart test must
	// cross segment boundaries.
	SetWALSegmentSize(256 << 10)
	os.Exit(m.Run())
}

// eventually polls cond until it holds, failing the test after a generous
// deadline (the race detector on two shared cores is slow).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("RAFTGROUP_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// cluster is an in-process cluster of Hosts with real WALs in t.TempDir,
// connected by the memNet fake.
type cluster struct {
	t      testing.TB
	net    *memNet
	root   string
	mode   storageMode
	mod    func(*Config)
	mu     sync.Mutex
	hosts  map[uint64]*Host
	sms    map[uint64]map[uint64]*kvSM // node -> group -> sm
	fatals []error
}

func newCluster(t testing.TB, nodes int, groups []uint64, mod func(*Config)) *cluster {
	return newClusterIn(t, storageMode{}, nodes, groups, mod)
}

// newClusterIn is newCluster with its hosts storing groups in mode m.
func newClusterIn(t testing.TB, m storageMode, nodes int, groups []uint64, mod func(*Config)) *cluster {
	c := &cluster{t: t, net: newMemNet(), root: t.TempDir(), mode: m, mod: mod,
		hosts: map[uint64]*Host{}, sms: map[uint64]map[uint64]*kvSM{}}
	t.Cleanup(c.shutdown)
	var peers []uint64
	for id := uint64(1); id <= uint64(nodes); id++ {
		peers = append(peers, id)
	}
	for _, id := range peers {
		c.start(id)
		for _, gid := range groups {
			c.createGroup(id, gid, GroupConfig{ID: gid, Peers: peers})
		}
	}
	return c
}

func (c *cluster) config(id uint64) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.DataDir = filepath.Join(c.root, fmt.Sprintf("node%d", id))
	cfg.Transport = c.net.transport(id)
	cfg.TickInterval = 10 * time.Millisecond
	cfg.Logger = testLogger(c.t)
	cfg.Fatal = func(err error) {
		c.mu.Lock()
		c.fatals = append(c.fatals, err)
		c.mu.Unlock()
	}
	c.mode.apply(&cfg)
	if c.mod != nil {
		c.mod(&cfg)
	}
	return cfg
}

func (c *cluster) start(id uint64) *Host {
	c.t.Helper()
	h, err := NewHost(c.config(id))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.mode.sharedWAL && h.nodeLog == nil && h.cfg.NewStorage == nil {
		c.t.Fatal("SharedWAL run without a node wal")
	}
	c.mu.Lock()
	c.hosts[id] = h
	if c.sms[id] == nil {
		c.sms[id] = map[uint64]*kvSM{}
	}
	c.mu.Unlock()
	c.net.attach(id, h)
	return h
}

// createGroup creates (or reopens) a group on node id with a fresh,
// in-memory state machine, which a restart rebuilds from the WAL.
func (c *cluster) createGroup(id, gid uint64, gc GroupConfig) *Group {
	c.t.Helper()
	sm := newKVSM()
	gc.StateMachine = sm
	g, err := c.host(id).CreateGroup(gc)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.sms[id][gid] = sm
	c.mu.Unlock()
	return g
}

func (c *cluster) host(id uint64) *Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hosts[id]
}

func (c *cluster) sm(id, gid uint64) *kvSM {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sms[id][gid]
}

// stop closes node id's host, as a crash after its last fsync would.
func (c *cluster) stop(id uint64) {
	c.t.Helper()
	c.net.detach(id)
	c.mu.Lock()
	h := c.hosts[id]
	delete(c.hosts, id)
	c.mu.Unlock()
	if err := h.Close(); err != nil {
		c.t.Fatal(err)
	}
}

// restart starts node id again and reopens groups from its WAL.
func (c *cluster) restart(id uint64, groups ...uint64) {
	c.t.Helper()
	c.start(id)
	for _, gid := range groups {
		c.createGroup(id, gid, GroupConfig{ID: gid, Join: true})
	}
}

func (c *cluster) shutdown() {
	c.mu.Lock()
	hosts := c.hosts
	c.hosts = map[uint64]*Host{}
	c.mu.Unlock()
	for _, h := range hosts {
		h.Close()
	}
	c.net.close()
}

// leader waits until exactly one live node leads gid, and every live
// member agrees on it, and returns that node's group.
func (c *cluster) leader(gid uint64) *Group {
	c.t.Helper()
	var lead *Group
	eventually(c.t, fmt.Sprintf("a leader of group %d", gid), func() bool {
		lead = nil
		var leaders, agree, n int
		var term uint64
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, h := range c.hosts {
			g := h.Group(gid)
			if g == nil || !containsID(g.Status().Members(), g.node) {
				continue // not (yet) a member
			}
			s := g.Status()
			n++
			if s.IsLeader() {
				leaders++
				lead, term = g, s.Term
			}
		}
		if leaders != 1 {
			return false
		}
		for _, h := range c.hosts {
			if g := h.Group(gid); g != nil && containsID(g.Status().Members(), g.node) {
				if s := g.Status(); s.Leader == lead.node && s.Term == term {
					agree++
				}
			}
		}
		return agree == n
	})
	return lead
}

func (c *cluster) propose(g *Group, data string) Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		p, err := g.Propose(ctx, []byte(data))
		if err == nil {
			var res Result
			res, err = p.Wait(ctx)
			if err == nil {
				return res
			}
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrProposalDropped) && !errors.Is(err, ErrProposalLost) {
			c.t.Fatalf("propose %q: %v", data, err)
		}
		g = c.leader(g.id)
	}
}

// converged waits until every live replica of gid has applied want (the
// non-empty payloads, in order).
func (c *cluster) converged(gid uint64, want []string, nodes ...uint64) {
	c.t.Helper()
	for _, id := range nodes {
		eventually(c.t, fmt.Sprintf("node %d to apply %d entries of group %d", id, len(want), gid), func() bool {
			sm := c.sm(id, gid)
			return sm != nil && slices.Equal(sm.data(), want)
		})
	}
}

func (c *cluster) fatalErrors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.fatals)
}

func seq(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}
