package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftq/raftq/chaos/internal/testenv"
)

const helperEnv = "NETNS_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "hold" {
		// Create a namespace, say its name, and wait to be killed.
		n, err := New(context.Background(), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(n.Name())
		select {}
	}
	os.Exit(m.Run())
}

func newTestNS(t testing.TB) *Namespace {
	t.Helper()
	testenv.Require(t, Available())
	n, err := New(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return n
}

// echoOn listens on addr inside n and echoes one line per connection.
func echoOn(t testing.TB, n *Namespace, addr string) {
	t.Helper()
	l, err := n.Listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte(line))
			}()
		}
	}()
}

// talks reports whether a connection from `from` to addr round-trips a
// line within the timeout.
func talks(n *Namespace, from netip.Addr, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := n.DialFrom(ctx, from, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

var (
	a = netip.MustParseAddr("127.0.0.2")
	b = netip.MustParseAddr("127.0.0.3")
)

func TestNamespace_DropIsDirectionalAndHealRestores(t *testing.T) {
	n := newTestNS(t)
	echoOn(t, n, "127.0.0.2:7000")
	echoOn(t, n, "127.0.0.3:7000")
	if !talks(n, a, "127.0.0.3:7000", 5*time.Second) || !talks(n, b, "127.0.0.2:7000", 5*time.Second) {
		t.Fatal("nodes cannot talk before any rule")
	}
	if err := n.Drop(context.Background(), []Rule{{From: a, To: b}}); err != nil {
		t.Fatal(err)
	}
	if talks(n, a, "127.0.0.3:7000", 300*time.Millisecond) {
		t.Error("a reached b through a drop rule")
	}
	// b -> a: the SYN passes, but a's SYN-ACK (from a to b) is dropped.
	if talks(n, b, "127.0.0.2:7000", 300*time.Millisecond) {
		t.Error("b got a reply from a through a drop rule on a->b")
	}
	if !talks(n, HarnessAddr, "127.0.0.3:7000", 5*time.Second) {
		t.Error("the harness lost b: partitions must not touch client traffic")
	}
	if got := n.Rules(); len(got) != 1 || got[0] != (Rule{From: a, To: b}) {
		t.Errorf("Rules() = %v", got)
	}
	if err := n.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !talks(n, a, "127.0.0.3:7000", 5*time.Second) {
		t.Error("a cannot reach b after heal")
	}
	listing, err := n.Listing(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(listing, "DROP") {
		t.Errorf("drop rules left after heal:\n%s", listing)
	}
}

func TestNamespace_GuardRejectsUnboundPeerDials(t *testing.T) {
	n := newTestNS(t)
	echoOn(t, n, "127.0.0.2:7001")
	if err := n.Guard(context.Background(), []netip.AddrPort{netip.MustParseAddrPort("127.0.0.2:7001")}); err != nil {
		t.Fatal(err)
	}
	_, err := n.DialContext(context.Background(), "tcp", "127.0.0.2:7001")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial from the harness address to a guarded port: %v, want connection refused", err)
	}
	if !talks(n, b, "127.0.0.2:7001", 5*time.Second) {
		t.Error("a node with a bound source address was rejected by the guard")
	}
}

func TestNamespace_RefusesAddressesOutsideLoopback(t *testing.T) {
	n := newTestNS(t)
	for _, addr := range []string{"10.0.0.1:80", "example.com:80", "192.168.1.1:9092"} {
		if _, err := n.DialContext(context.Background(), "tcp", addr); !errors.Is(err, ErrOutsideLoopback) {
			t.Errorf("dial %s: %v, want ErrOutsideLoopback", addr, err)
		}
	}
	err := n.Drop(context.Background(), []Rule{{From: a, To: netip.MustParseAddr("10.1.1.1")}})
	if !errors.Is(err, ErrOutsideLoopback) {
		t.Errorf("drop rule to 10.1.1.1: %v, want ErrOutsideLoopback", err)
	}
}

// TestNamespace_ThreadsLeaveTheNamespace hammers Do from many goroutines
// and then checks that every OS thread of the process is back in the
// host namespace.
func TestNamespace_ThreadsLeaveTheNamespace(t *testing.T) {
	n := newTestNS(t)
	echoOn(t, n, "127.0.0.2:7002")
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !talks(n, a, "127.0.0.2:7002", 5*time.Second) {
				t.Error("dial inside the namespace failed")
			}
		}()
	}
	wg.Wait()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		ns, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net")
		if err == nil && ns != host {
			t.Errorf("thread %s is in %s, not the host namespace %s", task.Name(), ns, host)
		}
	}
}

func TestNamespace_CloseKillsProcessesAndDeletes(t *testing.T) {
	testenv.Require(t, Available())
	n, err := New(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		n.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Close kills what is inside; wait until `ip netns exec` has entered.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(pids(t, n.Name()), fmt.Sprint(cmd.Process.Pid)) {
		if time.Now().After(deadline) {
			t.Fatal("process never showed up in the namespace")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("process inside the namespace survived Close")
	}
	if listed(t, n.Name()) {
		t.Fatalf("namespace %s still listed after Close", n.Name())
	}
}

func TestCleanupStale_RemovesNamespaceOfDeadProcess(t *testing.T) {
	testenv.Require(t, Available())
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=hold")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name, err := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatalf("helper said nothing: %v", err)
	}
	name = strings.TrimSpace(name)
	if !listed(t, name) {
		t.Fatalf("helper's namespace %s not listed", name)
	}
	removed, err := CleanupStale(context.Background(), cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if listed(t, name) {
		t.Fatalf("stale namespace %s survived CleanupStale (removed %v)", name, removed)
	}
}

func listed(t testing.TB, name string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range parseList(string(out)) {
		if n == name {
			return true
		}
	}
	return false
}

func TestOwnerPID(t *testing.T) {
	for name, want := range map[string]int{"raftq-123-abcdef": 123, "raftq-x-1": 0, "other-1-2": 0, "raftq-7": 0} {
		got, ok := ownerPID(name)
		if ok != (want != 0) || got != want {
			t.Errorf("ownerPID(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}

func pids(t testing.TB, name string) string {
	t.Helper()
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	return string(out)
}

func TestAvailable_SaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := Available()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "apt-get install iproute2 iptables") {
		t.Fatalf("Available() without tools = %v", err)
	}
}
