package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos/internal/testenv"
	"github.com/raftq/raftq/chaos/lazyfs"
	"github.com/raftq/raftq/chaos/netns"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newCluster builds and starts a cluster and closes it when t ends.
func newCluster(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if cfg.Namespace {
		testenv.Require(t, netns.Available())
	}
	if cfg.LazyFS {
		testenv.Require(t, lazyfs.Available())
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if err := c.StartAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 is the state; a zombie is as good as dead.
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest[:1]
}

// reachable asks every node to dial every other node and returns which
// ordered pairs got an answer.
func reachable(t testing.TB, c *Cluster) map[[2]int]bool {
	t.Helper()
	var mu sync.Mutex
	out := map[[2]int]bool{}
	var wg sync.WaitGroup
	for _, from := range c.Nodes() {
		for _, to := range c.Nodes() {
			if from.ID == to.ID {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ans, err := ask(context.Background(), c, from, "dial "+to.PeerAddr())
				if err != nil {
					t.Errorf("harness lost node %d: %v", from.ID, err)
				}
				mu.Lock()
				out[[2]int{from.ID, to.ID}] = ans == "ok"
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return out
}

// checkGrudge verifies with real connections that exactly the pairs the
// grudge cuts are cut: i can talk to j iff neither direction drops.
func checkGrudge(t *testing.T, c *Cluster, g Grudge) {
	t.Helper()
	for pair, ok := range reachable(t, c) {
		i, j := pair[0], pair[1]
		want := !g.Drops(i, j) && !g.Drops(j, i)
		if ok != want {
			t.Errorf("grudge %s: node %d -> node %d talks = %v, want %v", g, i, j, ok, want)
		}
	}
}

func TestCluster_PartitionShapesCutExactlyTheirPairs(t *testing.T) {
	cfg := echoConfig(t, 5)
	cfg.Namespace = true
	c := newCluster(t, cfg)
	ctx := context.Background()
	for _, n := range c.Nodes() { // ip netns exec must exec in place: signals reach the node
		if ans, err := ask(ctx, c, n, "pid"); err != nil || ans != fmt.Sprint(c.PID(n.ID)) {
			t.Fatalf("node %d says pid %q (%v); the cluster signals %d", n.ID, ans, err, c.PID(n.ID))
		}
	}
	checkGrudge(t, c, Grudge{})
	ids := c.NodeIDs()
	rng := rand.New(rand.NewPCG(1, 2))
	bridge, err := Bridge(ids, rng)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := MajoritiesRing(ids, rng)
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string]Grudge{
		"majority-minority": MajorityMinority(ids, rng),
		"isolate":           Isolate(3, ids),
		"bridge":            bridge,
		"majorities-ring":   ring,
		"one-way":           {2: {1}}, // 2 drops what 1 sends: no connection either way
	}
	for name, g := range shapes {
		t.Run(name, func(t *testing.T) {
			if err := c.Partition(ctx, g); err != nil {
				t.Fatal(err)
			}
			checkGrudge(t, c, g)
			for _, n := range c.Nodes() { // clients from 127.0.0.1 always get through
				if ans, err := ask(ctx, c, n, "echo x"); err != nil || ans != "x" {
					t.Errorf("harness cannot reach node %d during %s: %q %v", n.ID, name, ans, err)
				}
			}
			if err := c.Heal(ctx); err != nil {
				t.Fatal(err)
			}
			checkGrudge(t, c, Grudge{})
		})
	}
}

func TestCluster_GuardRejectsPeerDialsFromHarnessAddress(t *testing.T) {
	cfg := echoConfig(t, 2)
	cfg.Namespace, cfg.GuardPeerPort = true, true
	c := newCluster(t, cfg)
	n, _ := c.Node(1)
	_, err := c.DialContext(context.Background(), "tcp", n.PeerAddr())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial peer port from 127.0.0.1: %v, want refused", err)
	}
	checkGrudge(t, c, Grudge{}) // nodes dial from their own address and pass
}

func TestCluster_KillPauseStopRestart(t *testing.T) {
	c := newCluster(t, echoConfig(t, 3))
	ctx := context.Background()
	n1, _ := c.Node(1)

	pid := c.PID(1)
	if err := c.Kill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if alive(pid) || c.Running(1) {
		t.Fatal("node 1 alive after Kill")
	}
	if err := c.EnsureRunning(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	if c.PID(1) == pid || !c.Running(1) {
		t.Fatal("node 1 not restarted with a new process")
	}
	if ans, err := ask(ctx, c, n1, "echo back"); err != nil || ans != "back" {
		t.Fatalf("restarted node 1: %q %v", ans, err)
	}

	if err := c.Pause(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := procState(c.PID(2)); got != "T" || !c.Paused(2) {
		t.Fatalf("paused node 2 in state %q", got)
	}
	n2, _ := c.Node(2)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := ask(short, c, n2, "echo x")
	cancel()
	if err == nil {
		t.Fatal("a paused node answered")
	}
	if err := c.Resume(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if ans, err := ask(ctx, c, n2, "echo y"); err != nil || ans != "y" {
		t.Fatalf("resumed node 2: %q %v", ans, err)
	}

	if err := c.Pause(ctx, 3); err != nil { // Stop must work on a paused node
		t.Fatal(err)
	}
	pid3 := c.PID(3)
	if err := c.Restart(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if alive(pid3) || c.PID(3) == pid3 {
		t.Fatal("Restart left the old process or made no new one")
	}
	if got := c.Crashes(); len(got) != 0 {
		t.Fatalf("cluster-caused exits recorded as crashes: %+v", got)
	}
}

func TestCluster_KillGroupsAndLeader(t *testing.T) {
	cfg := echoConfig(t, 5)
	leader := 4
	cfg.Leader = func(ctx context.Context, c *Cluster) (int, error) { return leader, nil }
	c := newCluster(t, cfg)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tgt := range []Target{TargetOne, TargetMinority, TargetMajority, TargetAll} {
		ids := Pick(tgt, c.NodeIDs(), rng)
		if err := c.Kill(ctx, ids...); err != nil {
			t.Fatal(err)
		}
		for _, id := range c.NodeIDs() {
			if got, want := c.Running(id), !contains(ids, id); got != want {
				t.Errorf("kill %s %v: node %d running = %v", tgt, ids, id, got)
			}
		}
		if err := c.StartAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	id, err := c.KillLeader(ctx)
	if err != nil || id != leader || c.Running(leader) {
		t.Fatalf("KillLeader = %d, %v; leader running = %v", id, err, c.Running(leader))
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestCluster_RecordsCrashes(t *testing.T) {
	c := newCluster(t, echoConfig(t, 1))
	n, _ := c.Node(1)
	ask(context.Background(), c, n, "exit")
	eventually(t, "the crash to be recorded", func() bool { return len(c.Crashes()) == 1 })
	if cr := c.Crashes()[0]; cr.Node != 1 || !strings.Contains(cr.Err, "exit status 3") {
		t.Fatalf("crash = %+v", cr)
	}
}

func TestCluster_LoseUnsyncedDropsWhatNodesDidNotFsync(t *testing.T) {
	cfg := echoConfig(t, 3)
	cfg.Namespace, cfg.LazyFS = true, true
	c := newCluster(t, cfg)
	ctx := context.Background()
	n, _ := c.Node(2)
	if got := readMarks(t, n); got != "SU" {
		t.Fatalf("marks while running: %q", got)
	}
	lost, err := c.LoseUnsynced(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lost[2].Files != 1 {
		t.Errorf("node 2 lost %+v, want 1 file", lost[2])
	}
	for _, id := range c.NodeIDs() {
		if c.Running(id) {
			t.Fatalf("node %d still running after LoseUnsynced", id)
		}
	}
	if got := readMarks(t, n); got != "S" {
		t.Fatalf("marks after loss: %q, want only the fsynced S", got)
	}
	if err := c.StartAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readMarks(t, n); got != "SSU" {
		t.Fatalf("marks after restart on the same mount: %q", got)
	}
}

// A power loss of one node takes back only that node's unsynced writes;
// the others run on with theirs, and a node merely killed (-9) keeps its
// unsynced writes too, since they sit in the page cache (the overlay).
func TestCluster_LoseUnsyncedNodesHitsOnlyItsTargets(t *testing.T) {
	cfg := echoConfig(t, 3)
	cfg.LazyFS = true
	c := newCluster(t, cfg)
	ctx := context.Background()
	lost, err := c.LoseUnsyncedNodes(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[2].Files != 1 || lost[2].Bytes == 0 {
		t.Errorf("lost %+v, want one file on node 2 only", lost)
	}
	if c.Running(2) || !c.Running(1) || !c.Running(3) {
		t.Fatalf("running: 1 %v, 2 %v, 3 %v; want only node 2 down", c.Running(1), c.Running(2), c.Running(3))
	}
	for id, want := range map[int]string{1: "SU", 2: "S", 3: "SU"} {
		n, _ := c.Node(id)
		if got := readMarks(t, n); got != want {
			t.Errorf("node %d marks after node 2's power loss: %q, want %q", id, got, want)
		}
	}
	if err := c.Kill(ctx, 3); err != nil {
		t.Fatal(err)
	}
	n3, _ := c.Node(3)
	if got := readMarks(t, n3); got != "SU" {
		t.Errorf("node 3 marks after kill -9: %q, want its unsynced U kept", got)
	}
	if err := c.EnsureRunning(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	n2, _ := c.Node(2)
	if got := readMarks(t, n2); got != "SSU" {
		t.Errorf("node 2 marks after restart: %q", got)
	}
}

// With the writeback model a node's write older than the age survives its
// power loss, which it does not in the worst case (above).
func TestCluster_LazyFSWritebackModelKeepsOldWrites(t *testing.T) {
	cfg := echoConfig(t, 1)
	cfg.LazyFS, cfg.LazyFSWritebackAge = true, 100*time.Millisecond
	c := newCluster(t, cfg)
	eventually(t, "the flusher to write the unsynced U back", func() bool { return c.FS(1).Stats().Writebacks > 0 })
	if _, err := c.LoseUnsyncedNodes(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	n, _ := c.Node(1)
	if got := readMarks(t, n); got != "SU" {
		t.Errorf("marks after the power loss: %q, want the written-back SU", got)
	}
}

// The executor's power loss of the leader hits the node the Leader func
// names when the fault starts, and its stop restarts that node only.
func TestExecutor_PowerLossOfTheLeaderOnRealNodes(t *testing.T) {
	cfg := echoConfig(t, 3)
	cfg.LazyFS = true
	cfg.Leader = func(context.Context, *Cluster) (int, error) { return 3, nil }
	c := newCluster(t, cfg)
	s := Schedule{Faults: []Fault{{ID: 0, Kind: KindLoseUnfsynced, Start: 0, Stop: 200 * time.Millisecond, Target: TargetLeader}}}
	marks := map[int]string{}
	obs := Observer{End: func(ev Event) {
		if ev.Phase != PhaseStart {
			return
		}
		for _, n := range c.Nodes() {
			marks[n.ID] = readMarks(t, n)
		}
		if !c.Running(1) || !c.Running(2) || c.Running(3) {
			t.Errorf("during the fault: running 1 %v 2 %v 3 %v, want node 3 down only", c.Running(1), c.Running(2), c.Running(3))
		}
	}}
	x := NewExecutor(c, s, time.Now(), obs)
	x.Play(context.Background())
	if want := map[int]string{1: "SU", 2: "SU", 3: "S"}; !reflect.DeepEqual(marks, want) {
		t.Errorf("marks during the power loss of the leader: %v, want %v", marks, want)
	}
	for _, id := range c.NodeIDs() {
		if !c.Running(id) {
			t.Errorf("node %d down after the fault's stop", id)
		}
	}
	if got := len(c.Crashes()); got != 0 {
		t.Errorf("%d crashes", got)
	}
}

func readMarks(t testing.TB, n Node) string {
	t.Helper()
	b, err := os.ReadFile(n.DataDir + "/log")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCluster_CloseLeavesNothing checks processes, namespace and mounts
// are all gone after Close.
func TestCluster_CloseLeavesNothing(t *testing.T) {
	testenv.Require(t, errors.Join(netns.Available(), lazyfs.Available()))
	cfg := echoConfig(t, 2)
	cfg.Namespace, cfg.LazyFS = true, true
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartAll(context.Background()); err != nil {
		c.Close()
		t.Fatal(err)
	}
	pids := []int{c.PID(1), c.PID(2)}
	name := c.Namespace().Name()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, pids, name, []string{cfg.Dir + "/node-1/data", cfg.Dir + "/node-2/data"})
}

func checkGone(t *testing.T, pids []int, ns string, mounts []string) {
	t.Helper()
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("node process %d alive", pid)
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), ns) {
		t.Errorf("namespace %s still listed", ns)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, m := range mounts {
		if strings.Contains(string(mi), " "+m+" ") {
			t.Errorf("mount %s still there", m)
		}
	}
}

// TestCluster_NoOrphansWhenHarnessDies kills -9 a harness process that
// runs a cluster: its nodes must die with it (parent-death signal), and
// CleanupStale must remove the namespace and mounts it left.
func TestCluster_NoOrphansWhenHarnessDies(t *testing.T) {
	testenv.Require(t, errors.Join(netns.Available(), lazyfs.Available()))
	cmd := exec.Command(selfBinary(t), t.TempDir())
	cmd.Env = append(os.Environ(), helperEnv+"=harness")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rep harnessReport
	err = json.NewDecoder(bufio.NewReader(out)).Decode(&rep)
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatalf("harness report: %v", err)
	}
	if len(rep.PIDs) != 2 || rep.PIDs[0] == 0 {
		t.Fatalf("harness report %+v", rep)
	}
	eventually(t, "nodes to die with their harness", func() bool { return !alive(rep.PIDs[0]) && !alive(rep.PIDs[1]) })
	if _, _, err := CleanupStale(context.Background(), cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	checkGone(t, rep.PIDs, rep.Namespace, rep.Mounts)
}
