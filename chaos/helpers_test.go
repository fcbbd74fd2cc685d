package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the node program: with helperEnv set it runs
// a tiny server instead of the tests.
const helperEnv = "CHAOS_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "echo":
		os.Exit(runEcho(os.Args[1:]))
	case "harness":
		os.Exit(runHarness(os.Args[1:]))
	}
	fmt.Fprintln(os.Stderr, "unknown helper")
	os.Exit(2)
}

// echoArgs is the ArgsFunc of the echo node: its own addresses and data
// dir.
func echoArgs(n Node, all []Node) []string {
	return []string{n.KafkaAddr(), n.PeerAddr(), n.AdminAddr(), n.DataDir}
}

// runEcho serves a line protocol on the kafka and peer addresses and
// /v1/status on the admin address:
//
//	echo X        -> X
//	dial H:P      -> ok | fail: ...   (dial from this node's own address)
//	pid           -> the process id
//	exit          -> exits with status 3 (a crash)
//
// On start it appends "S" to <data>/log and fsyncs, then appends "U"
// without fsync: lose-unfsynced tests look for the difference.
func runEcho(args []string) int {
	kafka, peer, admin, data := args[0], args[1], args[2], args[3]
	if err := writeMarks(filepath.Join(data, "log")); err != nil {
		fmt.Fprintln(os.Stderr, "marks:", err)
		return 1
	}
	host, _, _ := net.SplitHostPort(kafka)
	for _, addr := range []string{kafka, peer} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			return 1
		}
		go serveLines(l, host)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/status", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"pid": os.Getpid()})
	})
	if err := http.ListenAndServe(admin, mux); err != nil {
		fmt.Fprintln(os.Stderr, "admin:", err)
	}
	return 1
}

func writeMarks(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString("S"); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	_, err = f.WriteString("U")
	return err
}

func serveLines(l net.Listener, host string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				fmt.Fprintln(c, answer(sc.Text(), host))
			}
		}()
	}
}

func answer(line, host string) string {
	cmd, arg, _ := strings.Cut(line, " ")
	switch cmd {
	case "echo":
		return arg
	case "pid":
		return fmt.Sprint(os.Getpid())
	case "exit":
		os.Exit(3)
	case "dial":
		if err := probe(host, arg); err != nil {
			return "fail: " + err.Error()
		}
		return "ok"
	}
	return "unknown command"
}

// probe connects from host to addr and round-trips one echo; a drop rule
// on either direction makes it time out.
func probe(host, addr string) error {
	d := net.Dialer{Timeout: probeTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := fmt.Fprintln(c, "echo hi"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "hi\n" {
		return fmt.Errorf("answer %q", line)
	}
	return nil
}

// probeTimeout bounds a probe that is expected to fail. Loopback answers
// in microseconds, so a reachable pair never comes near it.
const probeTimeout = 400 * time.Millisecond

// ask sends one command to node n's kafka address from the harness.
func ask(ctx context.Context, c *Cluster, n Node, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := c.DialContext(ctx, "tcp", n.KafkaAddr())
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	if _, err := fmt.Fprintln(conn, cmd); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// selfBinary is the absolute path of the test binary.
func selfBinary(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// echoConfig is a cluster of n echo nodes.
func echoConfig(t testing.TB, n int) Config {
	cfg := DefaultConfig()
	cfg.Binary = selfBinary(t)
	cfg.Nodes = n
	cfg.Dir = t.TempDir()
	cfg.Args = echoArgs
	cfg.Env = []string{helperEnv + "=echo"}
	cfg.Ready = HTTPReady("/v1/status")
	cfg.StartTimeout = 20 * time.Second
	return cfg
}

// runHarness builds a namespace+lazyfs cluster of two echo nodes, prints
// its namespace, mounts and node pids as JSON, and waits to be killed.
func runHarness(args []string) int {
	self, _ := os.Executable()
	cfg := DefaultConfig()
	cfg.Binary, cfg.Nodes, cfg.Dir, cfg.Args = self, 2, args[0], echoArgs
	cfg.Env = []string{helperEnv + "=echo"}
	cfg.Namespace, cfg.LazyFS = true, true
	cfg.Ready = HTTPReady("/v1/status")
	c, err := New(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := c.StartAll(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := harnessReport{Namespace: c.Namespace().Name()}
	for _, n := range c.Nodes() {
		out.PIDs = append(out.PIDs, c.PID(n.ID))
		out.Mounts = append(out.Mounts, n.DataDir)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	select {}
}

type harnessReport struct {
	Namespace string
	Mounts    []string
	PIDs      []int
}
