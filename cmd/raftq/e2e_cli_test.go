package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/logging"
)

// TestE2E_Dev runs the built `raftq dev` as a child process, produces and
// consumes through the cluster it prints, stops it with SIGINT, and wants
// exit status 0 and its temporary data dir gone.
func TestE2E_Dev(t *testing.T) {
	d := startDev(t)
	dataDir := bannerField(t, d.banner, `data in (\S+) \(removed on exit\)`)
	bootstrap := strings.Split(bannerField(t, d.banner, `bootstrap servers\s+(\S+)`), ",")
	if !strings.HasPrefix(dataDir, d.tmp) {
		t.Errorf("data dir %s is not under TMPDIR %s", dataDir, d.tmp)
	}
	if want := fmt.Sprintf("127.0.0.1:%d", d.base); !slices.Contains(bootstrap, want) {
		t.Errorf("bootstrap %v lacks %s", bootstrap, want)
	}
	if !strings.Contains(d.banner, "kcat -b") || !strings.Contains(d.banner, "raftq produce") {
		t.Errorf("the d.banner does not say how to produce and consume:\n%s", d.banner)
	}

	// Topics are created on first use in dev.
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("dev-smoke"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vals := seq("dev", 30)
	for _, v := range vals {
		cl.Produce(ctx, &kgo.Record{Topic: "dev-smoke", Value: []byte(v)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < len(vals) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(vals))
	if !slices.Equal(got, want) {
		t.Errorf("consumed %v, want %v", got, want)
	}
	cl.Close()

	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			t.Errorf("raftq dev exited with %v after SIGINT, want status 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("raftq dev still running 60s after SIGINT")
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("data dir %s still there after exit (%v)", dataDir, err)
	}
	if !strings.Contains(d.stderr.String(), "stopping raftq dev cluster") {
		t.Errorf("no stop message on stderr")
	}
}

// TestE2E_CLI runs the client subcommands (topic, produce, consume,
// cluster status) against three raftq processes and checks what they
// print and their exit statuses.
func TestE2E_CLI(t *testing.T) {
	c := e2eCluster(t, 3)
	bs := strings.Join(seeds(c), ",")
	n1, _ := c.Node(1)

	// SIGHUP, a supervisor's "reload", does not stop a node that has
	// nothing to reload.
	if err := syscall.Kill(c.PID(1), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the SIGHUP logged", func(context.Context) bool {
		b, err := os.ReadFile(n1.LogPath)
		return err == nil && strings.Contains(string(b), "SIGHUP: nothing to reload")
	})
	if !c.Running(1) {
		t.Fatal("node 1 stopped on SIGHUP")
	}

	out := cli(t, 0, "", "topic", "create", "cli", "-p", "3", "-r", "3", "-c", "retention.ms=3600000", "-b", bs)
	if want := "created topic cli: 3 partitions, replication factor 3"; !strings.Contains(out.stdout, want) {
		t.Errorf("topic create printed %q, want %q", out.stdout, want)
	}
	out = cli(t, 1, "", "topic", "create", "cli", "-b", bs)
	if !strings.Contains(out.stderr, "TOPIC_ALREADY_EXISTS") {
		t.Errorf("creating it twice: stderr %q, want TOPIC_ALREADY_EXISTS", out.stderr)
	}
	cli(t, 2, "", "topic", "create", "-b", bs)                        // no name
	cli(t, 2, "", "topic", "create", "x", "--no-such-flag", "-b", bs) // bad flag
	cli(t, 2, "", "topic", "frobnicate")
	for _, cmd := range []string{"topic", "group", "cluster"} {
		if out := cli(t, 0, "", cmd, "--help"); !strings.Contains(out.stderr, "subcommands: ") {
			t.Errorf("raftq %s --help: stderr %q, want the subcommands", cmd, out.stderr)
		}
	}

	out = cli(t, 0, "", "topic", "list", "-b", bs)
	if !hasRow(out.stdout, "cli", "3", "3") {
		t.Errorf("topic list:\n%s\nwants a row: cli 3 3", out.stdout)
	}

	out = cli(t, 0, "a\nb\nc\n", "produce", "cli", "--partition", "0", "-b", bs)
	if !strings.Contains(out.stderr, "produced 3 records") {
		t.Errorf("produce from stdin: stderr %q", out.stderr)
	}
	out = cli(t, 0, "", "produce", "cli", "--partition", "1", "--rate", "500", "--count", "40", "--size", "8", "-b", bs)
	if !strings.Contains(out.stderr, "produced 40 records, 0 failed") {
		t.Errorf("produce --rate: stderr %q", out.stderr)
	}
	cli(t, 2, "", "produce", "cli", "--acks", "2", "-b", bs)

	out = cli(t, 0, "", "consume", "cli", "--partition", "0", "-b", bs)
	if got := lines(out.stdout); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("consume --partition 0 printed %q", out.stdout)
	}
	out = cli(t, 0, "", "consume", "cli", "--partition", "0", "--from", "1", "--format", "full", "-b", bs)
	if !regexp.MustCompile(`^0\t1\tCreateTime:\d{13}\tNO_HEADERS\t\tb\n0\t2\tCreateTime:\d{13}\tNO_HEADERS\t\tc\n$`).MatchString(out.stdout) {
		t.Errorf("consume --from 1 --format full printed %q", out.stdout)
	}
	cli(t, 2, "", "consume", "cli", "--format", "json", "-b", bs)
	out = cli(t, 0, "", "consume", "cli", "-b", bs)
	if got := len(lines(out.stdout)); got != 43 {
		t.Errorf("consume of every partition printed %d records, want 43", got)
	}
	cli(t, 2, "", "consume", "cli", "--from", "yesterday", "-b", bs)
	testConsumeFollow(t, bs)

	out = cli(t, 0, "", "topic", "describe", "cli", "-b", bs)
	for _, want := range []string{"topic cli", "PARTITION", "retention.ms=3600000"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("topic describe lacks %q:\n%s", want, out.stdout)
		}
	}
	partRow := func(p, end int) *regexp.Regexp {
		return regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+[1-3]\s+\d+\s+\[[1-3] [1-3] [1-3]\]\s+\[\]\s+0\s+%d\s*$`, p, end))
	}
	if !partRow(0, 3).MatchString(out.stdout) || !partRow(1, 40).MatchString(out.stdout) {
		t.Errorf("topic describe: want partition 0 ending at 3 and partition 1 at 40:\n%s", out.stdout)
	}
	testConsumeEdges(t, c, bs)
	testTopicAlter(t, bs)

	testClusterStatus(t, c, n1)

	out = cli(t, 0, "", "topic", "delete", "cli", "-b", bs)
	if !strings.Contains(out.stdout, "deleted topic cli") {
		t.Errorf("topic delete printed %q", out.stdout)
	}
	waitFor(t, 30*time.Second, "the topic gone from topic list", func(context.Context) bool {
		return !hasRow(cli(t, 0, "", "topic", "list", "-b", bs).stdout, "cli", "3", "3")
	})
	cli(t, 1, "", "topic", "describe", "cli", "-b", bs)
	checkNoCrashes(t, c)
}

// testConsumeFollow starts `consume --follow --from end --max 1` and
// produces until it prints a record produced after it started.
func testConsumeFollow(t *testing.T, bs string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr logging.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr},
			[]string{"consume", "cli", "--partition", "2", "--from", "end", "--follow", "--max", "1", "-b", bs})
	}()
	for i := 0; ; i++ {
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("consume --follow exited %d: %s", code, stderr.String())
			}
			if got := strings.TrimSpace(stdout.String()); !strings.HasPrefix(got, "live-") {
				t.Errorf("consume --follow printed %q, want a live- record", got)
			}
			return
		case <-time.After(300 * time.Millisecond):
		}
		cli(t, 0, fmt.Sprintf("live-%d\n", i), "produce", "cli", "--partition", "2", "-b", bs)
	}
}

// testConsumeEdges reads where there is nothing to read: a partition the
// topic lacks, an offset past the end, and a partition emptied by
// DeleteRecords (its start and end both 40). Each must end by itself.
func testConsumeEdges(t *testing.T, c *chaos.Cluster, bs string) {
	t.Helper()
	out := cli(t, 1, "", "consume", "cli", "--partition", "9", "-b", bs)
	if !strings.Contains(out.stderr, "topic cli has no partition 9 (it has 3)") {
		t.Errorf("consume of a missing partition: stderr %q", out.stderr)
	}
	out = cli(t, 0, "", "consume", "cli", "--partition", "0", "--from", "99", "-b", bs)
	if out.stdout != "" || !strings.Contains(out.stderr, "partition 0 ends at 3; reading from the end, not 99") {
		t.Errorf("consume --from past the end: stdout %q, stderr %q; want nothing, and a note", out.stdout, out.stderr)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "cli", Partition: 1, At: 40})
	if drs, err := kadm.NewClient(e2eClient(t, c)).DeleteRecords(context.Background(), offs); err != nil || drs.Error() != nil {
		t.Fatalf("delete records: %v %v", err, drs.Error())
	}
	if out = cli(t, 0, "", "consume", "cli", "--partition", "1", "-b", bs); out.stdout != "" {
		t.Errorf("consume of an emptied partition printed %q", out.stdout)
	}
	out = cli(t, 0, "", "consume", "cli", "--partition", "1", "--from", "3", "-b", bs)
	if out.stdout != "" || !strings.Contains(out.stderr, "partition 1 starts at 40; reading from there, not 3") {
		t.Errorf("consume --from below the start: stdout %q, stderr %q", out.stdout, out.stderr)
	}
}

// testTopicAlter sets one config, returns another to its default and
// adds a partition, then reads the result back with describe.
func testTopicAlter(t *testing.T, bs string) {
	t.Helper()
	out := cli(t, 0, "", "topic", "alter", "cli", "-c", "segment.bytes=1048576", "--delete-config", "retention.ms", "-p", "4", "-b", bs)
	if !strings.Contains(out.stdout, "altered 2 configs of topic cli") || !strings.Contains(out.stdout, "topic cli now has 4 partitions") {
		t.Errorf("topic alter printed %q", out.stdout)
	}
	out = cli(t, 0, "", "topic", "describe", "cli", "-b", bs)
	for _, want := range []string{"segment.bytes=1048576 (DYNAMIC_TOPIC_CONFIG)", "retention.ms=604800000 (DEFAULT_CONFIG)"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("describe after alter lacks %q:\n%s", want, out.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^3\s`).MatchString(out.stdout) {
		t.Errorf("describe after alter lacks partition 3:\n%s", out.stdout)
	}
	cli(t, 2, "", "topic", "alter", "cli", "-b", bs)
	cli(t, 2, "", "topic", "alter", "cli", "-c", "retention.ms=1", "--delete-config", "retention.ms", "-b", bs)
	if out := cli(t, 1, "", "topic", "alter", "no-such-topic", "-c", "retention.ms=1", "-b", bs); !strings.Contains(out.stderr, `topic "no-such-topic" does not exist`) {
		t.Errorf("alter of a missing topic: stderr %q", out.stderr)
	}
	if out := cli(t, 1, "", "topic", "alter", "cli", "--delete-config", "foo.bar", "-b", bs); !strings.Contains(out.stderr, `Unknown topic config name: foo.bar`) {
		t.Errorf("deleting an unknown config: stderr %q", out.stderr)
	}
	// The broker's reason, not the error code's generic text.
	if out := cli(t, 1, "", "topic", "alter", "cli", "-p", "2", "-b", bs); !strings.Contains(out.stderr, "must exceed 4") {
		t.Errorf("lowering the partition count: stderr %q", out.stderr)
	}
	// ISR mode's configs: a raft topic says why it refuses them, and no
	// topic changes its mode.
	if out := cli(t, 1, "", "topic", "create", "nomin", "-c", "min.insync.replicas=2", "-b", bs); !strings.Contains(out.stderr, "a raft topic's acks=all waits for a majority of its replicas") {
		t.Errorf("min.insync.replicas on a raft topic: stderr %q", out.stderr)
	}
	if out := cli(t, 1, "", "topic", "alter", "cli", "-c", "replication.mode=isr", "-b", bs); !strings.Contains(out.stderr, "replication.mode cannot change after creation") {
		t.Errorf("altering replication.mode: stderr %q", out.stderr)
	}
}

func testClusterStatus(t *testing.T, c *chaos.Cluster, n1 chaos.Node) {
	t.Helper()
	leaders := map[int32]int{}
	for p := range int32(3) {
		leaders[p] = partitionLeader(t, c, "cli", p)
	}
	out := cli(t, 0, "", "cluster", "status", "--admin", "http://"+n1.AdminAddr()+"/")
	for _, n := range c.Nodes() {
		if !hasRow(out.stdout, fmt.Sprint(n.ID), n.KafkaAddr(), n.AdminAddr(), "true", "true", "always", "shared", "*") {
			t.Errorf("cluster status lacks node %d alive and reachable:\n%s", n.ID, out.stdout)
		}
	}
	for p, l := range leaders {
		if !hasRow(out.stdout, "cli", fmt.Sprint(p), fmt.Sprint(l), "*", "*", "*", "*", "*", "*") {
			t.Errorf("cluster status lacks cli-%d led by node %d:\n%s", p, l, out.stdout)
		}
	}
	out = cli(t, 0, "", "cluster", "status", "--json", "--admin", n1.AdminAddr())
	var statuses map[string]broker.Status
	if err := json.Unmarshal([]byte(out.stdout), &statuses); err != nil || len(statuses) != 3 {
		t.Errorf("cluster status --json: %d nodes, %v:\n%s", len(statuses), err, out.stdout)
	}
	cli(t, 1, "", "cluster", "status", "--admin", "127.0.0.1:1")
	if out := cli(t, 1, "", "cluster", "status", "--admin", n1.KafkaAddr()); !strings.Contains(out.stderr, "admin HTTP address?") {
		t.Errorf("cluster status pointed at a Kafka port: stderr %q, want a hint", out.stderr)
	}
	cli(t, 2, "", "cluster", "frob")
}

type cliResult struct{ stdout, stderr string }

// cli runs the raftq command line in this process and wants exit status
// code.
func cli(t *testing.T, code int, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr logging.Buffer
	got := run(ctx, &env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr}, args)
	res := cliResult{stdout.String(), stderr.String()}
	if ctx.Err() != nil {
		t.Errorf("raftq %s did not end by itself within 60s", strings.Join(args, " "))
	}
	if got != code {
		t.Errorf("raftq %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, res.stdout, res.stderr)
	}
	return res
}

// hasRow reports whether some line of a table has exactly these fields
// ("*" matches any one field).
func hasRow(table string, fields ...string) bool {
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) != len(fields) {
			continue
		}
		ok := true
		for i := range f {
			if fields[i] != "*" && fields[i] != f[i] {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// readBanner reads raftq dev's stdout up to the line that ends its banner.
// devProcess is a `raftq dev` child process with a temporary data dir
// under tmp, started and past its banner.
type devProcess struct {
	cmd    *exec.Cmd
	tmp    string
	base   int
	banner string
	stderr *logging.Buffer
	exited chan error
}

func startDev(t *testing.T) *devProcess {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a real raftq dev process; skipped with -short")
	}
	base, admin := freePortRuns(t)
	d := &devProcess{tmp: t.TempDir(), base: base, stderr: &logging.Buffer{}, exited: make(chan error, 1)}
	d.cmd = exec.Command(raftqBinary, "dev", "--base-port", fmt.Sprint(base), "--admin-port", fmt.Sprint(admin))
	d.cmd.Env = append(os.Environ(), "TMPDIR="+d.tmp)
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("raftq dev stderr:\n%s", d.stderr.String())
		}
	})
	d.banner = readBanner(t, stdout)
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		d.exited <- d.cmd.Wait()
	}()
	return d
}

// A second Ctrl-C quits `raftq dev` at once, while its nodes are still
// stopping, and still removes the temporary data dir.
func TestE2E_DevSecondInterruptRemovesTempDir(t *testing.T) {
	d := startDev(t)
	dataDir := bannerField(t, d.banner, `data in (\S+) \(removed on exit\)`)
	for range 2 {
		if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-d.exited:
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 130) {
			t.Errorf("raftq dev after two SIGINTs: %v, want status 130 (or 0 if the first finished the stop)", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("raftq dev still running 60s after two SIGINTs")
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("data dir %s still there after a forced quit (%v)", dataDir, err)
	}
}

func readBanner(t *testing.T, r io.Reader) string {
	t.Helper()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
			if strings.Contains(sc.Text(), "Ctrl-C stops the cluster") {
				break
			}
		}
		close(lines)
	}()
	var b strings.Builder
	timeout := time.After(90 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return b.String()
			}
			b.WriteString(l + "\n")
		case <-timeout:
			t.Fatalf("raftq dev printed no banner within 90s; so far:\n%s", b.String())
		}
	}
}

func bannerField(t *testing.T, banner, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("banner lacks %s:\n%s", pattern, banner)
	}
	return m[1]
}

// freePortRuns finds a Kafka base port whose runs base..base+2 and
// base+100..base+102, and an admin run of three, are free now.
func freePortRuns(t *testing.T) (base, admin int) {
	t.Helper()
	free := func(start int) bool {
		for i := range 3 {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", start+i))
			if err != nil {
				return false
			}
			l.Close()
		}
		return true
	}
	for try := range 200 {
		base = 20000 + (os.Getpid()*7+try*131)%20000
		admin = base + 300
		if free(base) && free(base+100) && free(admin) {
			return base, admin
		}
	}
	t.Fatal("no free port runs for raftq dev")
	return 0, 0
}

// -b at a real node's admin or peer port fails within a second, naming
// the port for what it is, where the admin port hung 40 s and the peer
// port's handshake reply was read as "invalid large response size".
func TestE2E_CLIWrongPort(t *testing.T) {
	c := e2eCluster(t, 1)
	n1, _ := c.Node(1)
	out := cliPromptly(t, 1, "x\n", "produce", "t", "-b", n1.AdminAddr())
	if want := n1.AdminAddr() + " is a raftq admin port (node 1), not a Kafka one; the Kafka port is " + n1.KafkaAddr(); !strings.Contains(out.stderr, want) {
		t.Errorf("produce at the admin port: stderr %q, want %q", out.stderr, want)
	}
	out = cliPromptly(t, 1, "", "topic", "list", "-b", n1.PeerAddr())
	if want := n1.PeerAddr() + " is a raftq peer port (node 1), not a Kafka one; the Kafka port is the node's --kafka-addr"; !strings.Contains(out.stderr, want) {
		t.Errorf("topic list at the peer port: stderr %q, want %q", out.stderr, want)
	}
}
