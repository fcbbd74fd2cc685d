package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/chaos"
)

// impostorHost is the loopback address the duplicate node binds: chaos
// nodes use 127.0.0.<id+1>, so this one is nobody's.
const impostorHost = "127.0.0.200"

// testDuplicateNodeID starts a second process claiming node 2's id, with
// its own addresses and data dir, as an operator's copy-paste slip would.
// Its peers must refuse it in the handshake (and say so in their logs),
// and it must not disturb the cluster: the real node 2 keeps its
// connections and its replicas, and the cluster keeps serving.
func testDuplicateNodeID(t *testing.T, bi *badInput) {
	const dup = 2
	c := bi.c
	termsBefore := groupTerms(t, c)
	imp := startImpostor(t, c, dup)
	waitRefused(t, c, imp, dup, "duplicate node id")
	// Meanwhile the cluster serves: bi.stillServes runs after this case.
	// It must not have lost or replaced the real node 2 anywhere: every
	// node still sees three live brokers, node 2 still at its own address.
	waitAllRegistered(t, c)
	real2, _ := c.Node(dup)
	for id, s := range statuses(t, c) {
		for _, b := range s.Brokers {
			if b.ID == dup && b.KafkaAddr != real2.KafkaAddr() {
				t.Errorf("node %d has broker %d at %s, want %s: the impostor registered", id, dup, b.KafkaAddr, real2.KafkaAddr())
			}
		}
	}
	// No election was forced on any group by the impostor's votes.
	if after := groupTerms(t, c); !termsEqual(termsBefore, after) {
		t.Errorf("raft terms moved while the impostor ran: before %v, after %v", termsBefore, after)
	}
	// Refused is all that should happen to the impostor: it must not
	// have crashed either.
	select {
	case <-imp.done:
		t.Errorf("the impostor exited on its own (%v); log tail:\n%s", imp.err, tail(imp.log(), 3000))
	default:
	}
	imp.stop(t)
}

// testWipedNodeRejoins kills node 2 and starts, in its place, a process
// with node 2's id and an empty data dir, as after a lost disk. With the
// real node down nothing is live to clash with, so only the incarnation
// in node.json tells them apart: the peers must refuse it (it lost the
// raft logs and votes node 2 gave), and the real node 2 must rejoin.
func testWipedNodeRejoins(t *testing.T, bi *badInput) {
	const wiped = 2
	c := bi.c
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Kill(ctx, wiped); err != nil {
		t.Fatal(err)
	}
	imp := startImpostor(t, c, wiped)
	waitRefused(t, c, imp, wiped, "registered from data directory incarnation")
	imp.stop(t)
	if err := c.Start(ctx, wiped); err != nil {
		t.Fatal(err)
	}
	waitAllRegistered(t, c)
}

// waitRefused waits until node 3, which the impostor dials (the lower id
// dials), has refused it for reason and logged why, and the impostor has
// learnt it too.
func waitRefused(t *testing.T, c *chaos.Cluster, imp *impostor, claimed int, reason string) {
	t.Helper()
	refusal := []byte(reason)
	waitFor(t, 30*time.Second, "node 3 to refuse the impostor", func(context.Context) bool {
		n, _ := c.Node(3)
		b, _ := os.ReadFile(n.LogPath)
		return bytes.Contains(b, refusal) && bytes.Contains(b, []byte("claimed_node="+fmt.Sprint(claimed)))
	})
	waitFor(t, 30*time.Second, "the impostor to log its refusal", func(context.Context) bool {
		return bytes.Contains(imp.log(), refusal)
	})
}

// statuses reads every node's /v1/status.
func statuses(t *testing.T, c *chaos.Cluster) map[int]broker.Status {
	t.Helper()
	out := map[int]broker.Status{}
	for _, id := range c.NodeIDs() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := nodeStatus(ctx, c, id)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		out[id] = s
	}
	return out
}

// groupTerms maps "node/group" to its raft term, over every node.
func groupTerms(t *testing.T, c *chaos.Cluster) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for id, s := range statuses(t, c) {
		out[fmt.Sprintf("%d/0", id)] = s.Metadata.Term
		for _, p := range s.Partitions {
			out[fmt.Sprintf("%d/%d", id, p.Group)] = p.Term
		}
	}
	return out
}

func termsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// impostor is a raftq server process started outside the chaos cluster.
type impostor struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, once done
}

func (p *impostor) log() []byte {
	b, _ := os.ReadFile(p.logPath)
	return b
}

func (p *impostor) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startImpostor runs `raftq server --node-id id` on impostorHost with the
// cluster's initial-cluster list, in which its own peer address replaces
// the real node's.
func startImpostor(t *testing.T, c *chaos.Cluster, id int) *impostor {
	t.Helper()
	ports := make([]string, 3) // kafka, peer, admin: free now (the usual race applies)
	for i := range ports {
		l, err := net.Listen("tcp", impostorHost+":0")
		if err != nil {
			t.Fatalf("bind %s: %v", impostorHost, err)
		}
		ports[i] = l.Addr().String()
		l.Close()
	}
	var peers []string
	for _, n := range c.Nodes() {
		addr := n.PeerAddr()
		if n.ID == id {
			addr = ports[1]
		}
		peers = append(peers, fmt.Sprintf("%d=%s", n.ID, addr))
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "impostor.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"server", "--node-id", fmt.Sprint(id), "--cluster-id", "e2e",
		"--data-dir", filepath.Join(dir, "data"), "--kafka-addr", ports[0], "--peer-addr", ports[1],
		"--admin-addr", ports[2], "--initial-cluster", strings.Join(peers, ","), "--fsync", "always",
		"--tick-interval", "50ms", "--log-level", "info"}
	cmd := exec.Command(raftqBinary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	imp := &impostor{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	return launchImpostor(t, imp, logf)
}

func launchImpostor(t *testing.T, imp *impostor, logf *os.File) *impostor {
	t.Helper()
	if err := imp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		imp.err = imp.cmd.Wait()
		logf.Close()
		close(imp.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- impostor log (tail) ----\n%s", tail(imp.log(), 4000))
		}
		imp.stop(t)
	})
	return imp
}
