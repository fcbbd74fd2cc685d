package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/internal/logging"
)

// A bench or a generated load whose cluster stops answering ends once
// --drain-timeout has run out after the sending: it says how many records
// were left unanswered and exits 1. Before, it waited for ever while the
// client retried them, or while Produce blocked on a full buffer (the
// unlimited bench and the 200k/s load fill kgo's buffer long before the
// run ends). The cluster is kfake, franz-go's in-process fake broker,
// because this tests the client side alone.
func TestDrain_ClusterGoneEndsTheRun(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		wantOut string // on stdout, besides the error on stderr
	}{
		{"bench", []string{"bench", "--topic", "drain", "--replication-factor", "1", "--duration", "2s", "--rate", "2000", "--drain-timeout", "1s"}, "records still unanswered when the drain timed out"},
		{"bench-unlimited", []string{"bench", "--topic", "drain", "--replication-factor", "1", "--duration", "2s", "--drain-timeout", "1s"}, "records still unanswered when the drain timed out"},
		{"produce", []string{"produce", "--rate", "2000", "--duration", "2s", "--drain-timeout", "1s", "drain"}, ""},
		{"produce-buffer-full", []string{"produce", "--rate", "200000", "--duration", "2s", "--drain-timeout", "1s", "drain"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			brokers, gone := fakeThatDies(t, 1)
			e, stdout, stderr := bufferedEnv(strings.NewReader(""))
			args := append([]string{c.args[0], "--brokers", brokers}, c.args[1:]...)
			code := make(chan int, 1)
			go func() { code <- run(context.Background(), e, args) }()
			select {
			case <-gone:
			case got := <-code:
				t.Fatalf("exit %d before any Produce request; stderr: %s", got, stderr.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("no Produce request in 30 s; stderr: %s", stderr.String())
			}
			select {
			case got := <-code:
				if got != 1 || !strings.Contains(stderr.String(), "records still unanswered 1s after the last was sent") || !strings.Contains(stdout.String(), c.wantOut) {
					t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the unanswered records named", got, stdout.String(), stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("still running 30 s after its cluster went away")
			}
		})
	}
}

// With --json, every record a bench sent after its warm-up is counted
// once: acknowledged, failed or unanswered.
func TestDrain_BenchCountsEachRecordOnce(t *testing.T) {
	brokers, _ := fakeThatDies(t, 20)
	e, stdout, stderr := bufferedEnv(strings.NewReader(""))
	code := run(context.Background(), e, []string{"bench", "--brokers", brokers,
		"--topic", "drain", "--replication-factor", "1", "--records", "30000", "--rate", "30000", "--drain-timeout", "1s", "--json"})
	var res benchResult
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil || code != 1 {
		t.Fatalf("exit %d, stdout %q (%v), stderr %q; want 1 and a JSON result", code, stdout.String(), err, stderr.String())
	}
	if sum := res.Records + res.Failed + res.Unanswered; sum != 30000 || res.Records == 0 || res.Unanswered == 0 {
		t.Errorf("%d acknowledged + %d failed + %d unanswered = %d; want 30000, some acknowledged and some unanswered",
			res.Records, res.Failed, res.Unanswered, sum)
	}
}

// The first Ctrl-C or SIGTERM asks a command to wind up, which for a
// producer means waiting up to --drain-timeout for its answers (it says
// so). A second Ctrl-C kills it; a supervisor's repeated SIGTERM does not
// cut the wind-up short, and the producer exits 1 on its own, naming the
// records left unanswered. The producer's cluster goes away after its
// first Produce request, so its records stay unanswered.
func TestSignalsDuringTheDrain(t *testing.T) {
	for _, c := range []struct {
		name  string
		sig   syscall.Signal
		drain string
		ok    func(ee *exec.ExitError, stderr string) bool
	}{
		{"second-ctrl-c-kills", syscall.SIGINT, "1h", func(ee *exec.ExitError, _ string) bool {
			return ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT
		}},
		{"repeated-sigterm-drains", syscall.SIGTERM, "2s", func(ee *exec.ExitError, stderr string) bool {
			return ee.ExitCode() == 1 && strings.Contains(stderr, "records still unanswered 2s after")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, stderr, exited := startProducerWithoutCluster(t, c.drain)
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the drain's note", func(context.Context) bool {
				return strings.Contains(stderr.String(), "Ctrl-C again to quit")
			})
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || !c.ok(ee, stderr.String()) {
					t.Fatalf("exit %v after the second %v; stderr: %s", err, c.sig, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("still running 30 s after the second %v; stderr: %s", c.sig, stderr.String())
			}
		})
	}
}

// A generated load whose brokers went away says so on its progress line,
// within a second or so of its last records.
func TestDrain_ProgressSaysNoBrokerReachable(t *testing.T) {
	brokers, gone := fakeThatDies(t, 1)
	e, _, stderr := bufferedEnv(strings.NewReader(""))
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), e, []string{"produce", "--brokers", brokers, "--rate", "100", "--duration", "8s", "--drain-timeout", "1s", "drain"})
	}()
	select {
	case <-gone:
	case <-time.After(30 * time.Second):
		t.Fatalf("no Produce request in 30 s; stderr: %s", stderr.String())
	}
	const want = "no broker reachable: unable to dial: dial tcp " // kfake's port, now closed
	// The progress line comes once a second, and names the dial error
	// once the client has tried to dial again (kgo backs off first); the
	// run lasts long enough for several lines after that.
	waitFor(t, 8*time.Second, "the progress line to say "+want, func(context.Context) bool {
		return strings.Contains(stderr.String(), want)
	})
	if got := <-code; got != 1 {
		t.Errorf("exit %d, want 1 (records unanswered); stderr %q", got, stderr.String())
	}
}

// fakeThatDies starts a one-broker kfake cluster with the topic "drain"
// and closes it as its n-th Produce request arrives (kfake answers that
// one as usual); gone is closed then. It returns the bootstrap address.
func fakeThatDies(t *testing.T, n int64) (brokers string, gone <-chan struct{}) {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "drain"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	dead := make(chan struct{})
	var produced atomic.Int64
	fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if produced.Add(1) == n {
			go func() { // not from kfake's own loop, which Close waits for
				fake.Close()
				close(dead)
			}()
		}
		return nil, nil, false
	})
	return strings.Join(fake.ListenAddrs(), ","), dead
}

// bufferedEnv is an env reading stdin and writing to buffers.
func bufferedEnv(stdin io.Reader) (e *env, stdout, stderr *logging.Buffer) {
	stdout, stderr = &logging.Buffer{}, &logging.Buffer{}
	return &env{stdin: stdin, stdout: stdout, stderr: stderr}, stdout, stderr
}

// startProducerWithoutCluster starts raftq produce at 100 records/s
// against a cluster that goes away at its first Produce request, and
// returns once its first progress line shows it sending.
func startProducerWithoutCluster(t *testing.T, drain string) (*exec.Cmd, *logging.Buffer, <-chan error) {
	t.Helper()
	brokers, _ := fakeThatDies(t, 1)
	cmd := exec.Command(raftqBinary, "produce", "--brokers", brokers, "--rate", "100", "--drain-timeout", drain, "drain")
	stderr := &logging.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor(t, 30*time.Second, "the first progress line", func(context.Context) bool {
		return strings.Contains(stderr.String(), "records")
	})
	return cmd, stderr, exited
}

// Ctrl-C ends a producer reading lines while it waits for the next one
// (a terminal's read never returns by itself): it drains what it sent and
// exits. The input here is a pipe nobody closes, and the cluster goes
// away once the producer has reached it, so the one line sent stays
// unanswered (exit 1).
func TestDrain_InterruptEndsWaitForInput(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "drain"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	pr, pw := io.Pipe()
	defer pw.Close()
	reads := make(chan struct{}, 16)
	e, _, stderr := bufferedEnv(readHook{pr, reads})
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, e, []string{"produce", "--brokers", strings.Join(fake.ListenAddrs(), ","), "--drain-timeout", "1s", "drain"})
	}()
	awaitRead := func() {
		select {
		case <-reads:
		case got := <-code:
			t.Fatalf("exit %d before reading its input; stderr %q", got, stderr.String())
		case <-time.After(30 * time.Second):
			t.Fatal("no read of the input in 30 s")
		}
	}
	awaitRead() // input is read once the producer has reached the cluster
	fake.Close()
	if _, err := io.WriteString(pw, "one\n"); err != nil {
		t.Fatal(err)
	}
	awaitRead() // the reader hands lines over unbuffered: the producer has the line
	cancel()
	select {
	case got := <-code:
		if got != 1 || !strings.Contains(stderr.String(), "1 records still unanswered") {
			t.Errorf("exit %d, stderr %q; want 1 and the record named unanswered", got, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting for input 30 s after Ctrl-C")
	}
}

// readHook tells reads each time a Read begins.
type readHook struct {
	r     io.Reader
	reads chan<- struct{}
}

func (h readHook) Read(p []byte) (int, error) {
	h.reads <- struct{}{}
	return h.r.Read(p)
}
