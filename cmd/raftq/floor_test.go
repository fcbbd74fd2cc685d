package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestFloor_ReportsEveryBatchCommittedAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	args := []string{"floor", "--data-dir", dir, "--rate", "12000", "--duration", "200ms", "--warmup", "50ms", "--json"}
	if code := run(context.Background(), e, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r floorResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v in %q", err, out.String())
	}
	if r.Batches != 200*6 || r.Committed != r.Batches {
		t.Fatalf("batches %d, committed %d: want %d of each", r.Batches, r.Committed, 200*6)
	}
	if r.P99ms <= 0 || len(r.Flushes) != 3 || r.Flushes[2] == 0 {
		t.Fatalf("p99 %g ms, flushes %v: want a latency and every node's flushes", r.P99ms, r.Flushes)
	}
	if r.Prealloc < r.Bytes[0] {
		t.Fatalf("preallocated %d bytes, node 1 wrote %d: the default must cover the run", r.Prealloc, r.Bytes[0])
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("left %d entries in --data-dir, want its own directory removed", len(left))
	}
}

func TestFloor_BadFlagsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--nodes", "2"},
		{"--rate", "0"},
		{"--duration", "0s"},
		{"--nodes", "0"},
		{"--record-size", "0"},
		{"--prealloc", "-5"},
		{"--rate", "NaN"},
	} {
		var errOut bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &errOut}
		if code := run(context.Background(), e, append([]string{"floor", "--data-dir", t.TempDir()}, args...)); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
}
