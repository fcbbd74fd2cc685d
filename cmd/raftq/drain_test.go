package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A bench or a generated load whose cluster stops answering ends once
// --drain-timeout has run out after the sending: it says how many records
// were left unanswered and exits 1. Before, it waited for ever while the
// client retried them. The cluster is kfake, franz-go's in-process fake
// broker, because this tests the client side alone.
func TestDrain_ClusterGoneEndsTheRun(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		wantOut string // on stdout, besides the error on stderr
	}{
		{"bench", []string{"bench", "--topic", "drain", "--replication-factor", "1", "--duration", "2s", "--rate", "2000", "--drain-timeout", "1s"}, "records still unanswered when the drain timed out"},
		{"produce", []string{"produce", "--rate", "2000", "--duration", "2s", "--drain-timeout", "1s", "drain"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "drain"))
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			produced := make(chan struct{})
			var once sync.Once
			fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				once.Do(func() { close(produced) })
				return nil, nil, false // kfake answers it as usual
			})
			stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
			e := &env{stdin: strings.NewReader(""), stdout: stdout, stderr: stderr}
			args := append([]string{c.args[0], "--brokers", strings.Join(fake.ListenAddrs(), ",")}, c.args[1:]...)
			code := make(chan int, 1)
			go func() { code <- run(context.Background(), e, args) }()
			select {
			case <-produced:
			case got := <-code:
				t.Fatalf("exit %d before any Produce request; stderr: %s", got, stderr.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("no Produce request in 30 s; stderr: %s", stderr.String())
			}
			fake.Close()
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

// The first Ctrl-C asks a command to wind up, which for a producer means
// waiting up to --drain-timeout for its answers; a second one kills it.
// The producer here has no cluster at all (port 1 refuses), so its records
// stay unanswered and only the second interrupt can end it in time.
func TestSecondInterruptKills(t *testing.T) {
	cmd := exec.Command(raftqBinary, "produce", "--brokers", "127.0.0.1:1", "--rate", "100", "--drain-timeout", "1h", "nowhere")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, 30*time.Second, "the first progress line", func(context.Context) bool {
		return strings.Contains(stderr.String(), "records")
	})
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
				t.Fatalf("exit %v; want death by the second SIGINT; stderr: %s", err, stderr.String())
			}
			return
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("still running 10 s into repeated interrupts; stderr: %s", stderr.String())
		case <-tick.C:
		}
	}
}
