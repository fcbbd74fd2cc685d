package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
)

// grpCLI runs "raftq group ARGS" against the cluster and returns stdout.
func grpCLI(t *testing.T, c *chaos.Cluster, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	full := append([]string{args[0], "--brokers", strings.Join(seeds(c), ",")}, args[1:]...)
	err := runGroup(grpCtx(t, 30*time.Second), e, full)
	return out.String(), err
}

// grpCLIChecks drives raftq group list, describe and reset-offsets on a
// topic that MixedClientsSharePartitions filled (20+10 records in each of
// 6 partitions).
func grpCLIChecks(t *testing.T, c *chaos.Cluster) {
	const topic, group = "grp-mixed", "cli"
	cl := e2eClient(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	ctx := grpCtx(t, 60*time.Second)
	got := 0
	for got < 180 && ctx.Err() == nil {
		got += len(cl.PollFetches(ctx).Records())
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := grpCLI(t, c, "list")
	if err != nil || !strings.Contains(out, "cli") || !strings.Contains(out, "Stable") {
		t.Fatalf("group list: %v\n%s", err, out)
	}
	out, err = grpCLI(t, c, "describe", group)
	if err != nil || !strings.Contains(out, "state Stable") || !strings.Contains(out, topic+"[0 1 2 3 4 5]") ||
		strings.Count(out, "\n"+topic+" ") != 6 || !strings.Contains(out, " 30 ") {
		t.Fatalf("group describe: %v\n%s", err, out)
	}
	t.Logf("raftq group describe %s:\n%s", group, out)
	if out, err := grpCLI(t, c, "describe", "no-such-group"); err == nil || !strings.Contains(err.Error(), "group no-such-group does not exist") {
		t.Fatalf("describe of a group that does not exist: %v\n%s", err, out)
	}
	if _, err := grpCLI(t, c, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute"); err == nil ||
		!strings.Contains(err.Error(), "Stable") {
		t.Fatalf("reset of an active group: %v, want a refusal naming its state", err)
	}
	cl.Close() // leaves the group: Empty
	adm := kadm.NewClient(e2eClient(t, c))
	committed := func() map[int32]int64 {
		offs, err := adm.FetchOffsets(grpCtx(t, 10*time.Second), group)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) { m[o.Partition] = o.At })
		return m
	}
	if out, err = grpCLI(t, c, "reset-offsets", group, "--topic", topic, "--to-offset", "7"); err != nil || !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?s)grp-mixed\s+0\s.*grp-mixed\s+1\s.*grp-mixed\s+2\s.*grp-mixed\s+3\s.*grp-mixed\s+4\s.*grp-mixed\s+5\s`).MatchString(out) {
		t.Errorf("dry run not in partition order:\n%s", out)
	}
	if m := committed(); m[0] != 30 {
		t.Fatalf("a dry run changed offsets: %v", m)
	}
	for _, tc := range []struct {
		flag []string
		want int64
	}{{[]string{"--to-offset", "7"}, 7}, {[]string{"--to-earliest"}, 0}, {[]string{"--to-latest"}, 30},
		{[]string{"--to-datetime", "2000-01-01T00:00:00Z"}, 0}} {
		args := append([]string{"reset-offsets", group, "--topic", topic, "--execute"}, tc.flag...)
		if out, err := grpCLI(t, c, args...); err != nil {
			t.Fatalf("%v: %v\n%s", tc.flag, err, out)
		}
		for p, o := range committed() {
			if o != tc.want {
				t.Fatalf("after %v: partition %d at %d, want %d", tc.flag, p, o, tc.want)
			}
		}
	}
}
