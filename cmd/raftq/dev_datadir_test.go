package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftq/raftq/internal/logging"
)

// raftq dev on a data dir that a 1-node dev made, started with --nodes 3,
// says so within a second, naming both counts and the way out, where it
// waited 30 s for two nodes that were never part of the cluster.
func TestDev_DataDirOfAnotherNodeCount(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev node; skipped with -short")
	}
	dir := filepath.Join(t.TempDir(), "dev")
	base, admin := freePortRuns(t)
	ports := []string{"--base-port", fmt.Sprint(base), "--admin-port", fmt.Sprint(admin)}
	runDevUntilBanner(t, append([]string{"dev", "--nodes", "1", "--data-dir", dir}, ports...))

	out := cliPromptly(t, 1, "", append([]string{"dev", "--nodes", "3", "--data-dir", dir}, ports...)...)
	want := fmt.Sprintf("data dir %s holds a 1-node dev cluster (node dirs [1]), not 3: run raftq dev --nodes 1 --data-dir %[1]s, or give another --data-dir (or remove this one) for 3 nodes", dir)
	if !strings.Contains(out.stderr, want) {
		t.Errorf("stderr %q, want %q", out.stderr, want)
	}
}

// The other way round, and a dir missing a node's dir in the middle.
func TestCheckDevNodes(t *testing.T) {
	for _, c := range []struct {
		made  []int
		nodes int
		want  string // "" for no error
	}{
		{nil, 3, ""},
		{[]int{1, 2, 3}, 3, ""},
		{[]int{1}, 1, ""},
		{[]int{1, 2, 3}, 1, "holds a 3-node dev cluster (node dirs [1 2 3]), not 1: run raftq dev --nodes 3 --data-dir"},
		{[]int{1, 2, 3}, 5, "holds a 3-node dev cluster (node dirs [1 2 3]), not 5: run raftq dev --nodes 3 --data-dir"},
		{[]int{1, 3}, 3, "holds 2 of the 3 node dirs of its dev cluster (node dirs [1 3]): a node cannot start again without its own"},
		{[]int{1, 3}, 5, "holds a 3-node dev cluster (node dirs [1 3]), not 5: run raftq dev --nodes 3"},
	} {
		dir := t.TempDir()
		for _, id := range c.made {
			nd := filepath.Join(dir, fmt.Sprintf("node%d", id))
			if err := os.MkdirAll(nd, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(nd, "node.json"), []byte(`{"cluster_id":"raftq-dev"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// A node dir without node.json never started: it counts for nothing.
		if err := os.MkdirAll(filepath.Join(dir, "node9"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := checkDevNodes(dir, c.nodes)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("made %v, --nodes %d: %v, want no error", c.made, c.nodes, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("made %v, --nodes %d: %v, want %q", c.made, c.nodes, err, c.want)
		}
	}
}

// runDevUntilBanner runs raftq dev in this process until it prints its
// banner, then stops it and waits for it to end.
func runDevUntilBanner(t *testing.T, args []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr logging.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, args) }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stdout.String(), "Ctrl-C stops the cluster") {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("raftq %s exited %d before its banner:\n%s", strings.Join(args, " "), code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("raftq %s: no banner after 60s:\n%s", strings.Join(args, " "), stderr.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("raftq %s exited %d after its stop:\n%s", strings.Join(args, " "), code, stderr.String())
	}
}
