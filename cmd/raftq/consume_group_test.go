package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/internal/logging"
)

// bgCLI is a raftq command running in this process until stopped.
type bgCLI struct {
	stdout, stderr logging.Buffer
	cancel         context.CancelFunc
	done           chan int
}

func startCLI(t *testing.T, args ...string) *bgCLI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &bgCLI{cancel: cancel, done: make(chan int, 1)}
	go func() {
		b.done <- run(ctx, &env{stdin: strings.NewReader(""), stdout: &b.stdout, stderr: &b.stderr}, args)
	}()
	t.Cleanup(func() { b.stop(t) })
	return b
}

// stop interrupts the command, as Ctrl-C does, and wants exit status 0.
func (b *bgCLI) stop(t *testing.T) {
	t.Helper()
	if b.cancel == nil {
		return
	}
	b.cancel()
	b.cancel = nil
	select {
	case code := <-b.done:
		if code != 0 {
			t.Errorf("exit %d after interrupt; stderr:\n%s", code, b.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Error("still running 30s after interrupt")
	}
}

// fullLines parses consume --format full output: value by partition.
func fullLines(t *testing.T, out string) map[int32][]string {
	t.Helper()
	got := map[int32][]string{}
	for _, l := range lines(out) {
		f := strings.Split(l, "\t")
		if len(f) != 6 {
			t.Fatalf("consume --format full line %q: %d fields, want 6", l, len(f))
		}
		var p int32
		fmt.Sscan(f[0], &p)
		got[p] = append(got[p], f[5])
	}
	return got
}

// Two `raftq consume --group` members share the topic's partitions, each
// printing only its own; the group commits what they printed, and a
// member started after both stopped reads only what came since, then
// ends by itself, as does one started after it.
func TestE2E_ConsumeGroup(t *testing.T) {
	c := e2eCluster(t, 1)
	bs := strings.Join(seeds(c), ",")
	const topic, group = "cg", "cg-members"
	createTopic(t, c, topic, 4, 1, nil)
	member := func() *bgCLI {
		return startCLI(t, "consume", topic, "--group", group, "--follow", "--format", "full", "-b", bs)
	}
	a, b := member(), member()
	adm := kadm.NewClient(e2eClient(t, c))
	waitFor(t, 60*time.Second, "two members holding two partitions each", func(ctx context.Context) bool {
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil || len(gs[group].Members) != 2 || gs[group].State != "Stable" {
			return false
		}
		for _, m := range gs[group].Members {
			ca, _ := m.Assigned.AsConsumer()
			if ca == nil || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 2 {
				return false
			}
		}
		return true
	})

	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[int32][]string{}
	for p := range int32(4) {
		want[p] = seq(fmt.Sprintf("p%d", p), 5)
		produceValues(t, cl, topic, p, want[p]...)
	}
	waitFor(t, 60*time.Second, "the members to print 20 records", func(context.Context) bool {
		return len(lines(a.stdout.String()))+len(lines(b.stdout.String())) >= 20
	})
	a.stop(t)
	b.stop(t)
	gotA, gotB := fullLines(t, a.stdout.String()), fullLines(t, b.stdout.String())
	if len(gotA) != 2 || len(gotB) != 2 {
		t.Errorf("partitions printed: member a %v, member b %v; want two each", gotA, gotB)
	}
	for p, vals := range want {
		_, inA := gotA[p]
		_, inB := gotB[p]
		if inA == inB {
			t.Errorf("partition %d printed by a: %v, by b: %v; want exactly one", p, inA, inB)
		}
		if got := append(gotA[p], gotB[p]...); !slices.Equal(got, vals) {
			t.Errorf("partition %d: printed %v, want %v", p, got, vals)
		}
	}

	// A new member resumes from the commits: it prints only the records
	// produced since, and without --follow stops once it has read them.
	produceValues(t, cl, topic, 2, "late-1", "late-2")
	out := cli(t, 0, "", "consume", topic, "--group", group, "-b", bs)
	if got, want := lines(out.stdout), []string{"late-1", "late-2"}; !slices.Equal(got, want) {
		t.Errorf("restarted member printed %q, want %q", got, want)
	}
	out = cli(t, 0, "", "consume", topic, "--group", group, "-b", bs)
	if out.stdout != "" {
		t.Errorf("member started with everything committed printed %q, want nothing", out.stdout)
	}
	checkGroupCommitted(t, c, group, topic, map[int32][]string{0: want[0], 1: want[1], 2: append(want[2], "late-1", "late-2"), 3: want[3]})

	cli(t, 2, "", "consume", topic, "--group", group, "--from", "3", "-b", bs)
}
