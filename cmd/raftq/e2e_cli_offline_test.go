package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestE2E_CLILeaderlessPartition: with the only replica of one partition
// down, topic describe still describes the topic (that partition with no
// leader and unknown offsets), consume reads a healthy partition as
// usual, and a whole-topic consume prints what it can read, names the
// partition it skipped and exits 1, where all of them failed before.
func TestE2E_CLILeaderlessPartition(t *testing.T) {
	c := e2eCluster(t, 3)
	bs := strings.Join(seeds(c), ",")
	cli(t, 0, "", "topic", "create", "solo", "-p", "3", "-r", "1", "-b", bs)
	for p := range 3 {
		cli(t, 0, fmt.Sprintf("v%d\n", p), "produce", "solo", "--partition", fmt.Sprint(p), "-b", bs)
	}
	const down = int32(2)
	victim := partitionLeader(t, c, "solo", down)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	var healthy int32 = -1
	for p := range int32(2) {
		if partitionLeader(t, c, "solo", p) != victim {
			healthy = p
		}
	}
	if healthy < 0 {
		t.Fatalf("node %d leads every partition of solo: placement should spread RF-1 partitions over the nodes", victim)
	}

	// The cluster notices the death within a few election timeouts.
	var out cliResult
	waitFor(t, 30*time.Second, fmt.Sprintf("describe to show partition %d leaderless", down), func(context.Context) bool {
		out = cli(t, 0, "", "topic", "describe", "solo", "-b", bs)
		return hasRow(out.stdout, fmt.Sprint(down), "none", "*", "*", fmt.Sprintf("[%d]", victim), "-", "-")
	})
	if !strings.Contains(out.stdout, fmt.Sprintf("partition %d: offsets unknown", down)) {
		t.Errorf("describe does not say why partition %d has no offsets:\n%s", down, out.stdout)
	}
	if !hasRow(out.stdout, fmt.Sprint(healthy), "*", "*", "*", "[]", "0", "1") {
		t.Errorf("describe lacks healthy partition %d from 0 to 1:\n%s", healthy, out.stdout)
	}
	out = cli(t, 0, "", "consume", "solo", "--partition", fmt.Sprint(healthy), "-b", bs)
	if got := lines(out.stdout); !slices.Equal(got, []string{fmt.Sprintf("v%d", healthy)}) {
		t.Errorf("consume of healthy partition %d printed %q", healthy, got)
	}
	out = cli(t, 1, "", "consume", "solo", "-b", bs)
	if got := lines(out.stdout); slices.Contains(got, fmt.Sprintf("v%d", down)) || !slices.Contains(got, fmt.Sprintf("v%d", healthy)) {
		t.Errorf("whole-topic consume printed %q", got)
	}
	if !strings.Contains(out.stderr, fmt.Sprintf("skipping partition %d of solo", down)) {
		t.Errorf("whole-topic consume did not name the partition it skipped: %q", out.stderr)
	}
}
