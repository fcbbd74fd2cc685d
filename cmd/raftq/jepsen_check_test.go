package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/raftq/raftq/jepsen"
)

// savedRun leaves a report directory as `raftq jepsen run` does, from a
// short run of the same jepsen.Run against kfake, franz-go's in-process
// fake broker, and returns it with the run's results.
func savedRun(t *testing.T) (string, *jepsen.Results) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := jepsen.DefaultConfig()
	w := &cfg.Workload
	w.Brokers, w.Topic, w.Partitions, w.ReplicationFactor = c.ListenAddrs(), "jepsen-check", 2, 1
	w.Producers, w.Consumers = 2, 1
	w.Rate, w.Burst = 300, 10
	w.Duration = time.Second
	w.FetchMaxWait = 50 * time.Millisecond
	cfg.ReportDir = filepath.Join(t.TempDir(), "report")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := jepsen.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != jepsen.VerdictOK || res.Stats.ByF[jepsen.FSend][jepsen.OK] == 0 {
		t.Fatalf("the saved run should pass with sends acknowledged: %s", res.Summary())
	}
	return cfg.ReportDir, res
}

// runCheck runs `raftq jepsen check args...` and returns its exit status
// and output.
func runCheck(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	code := run(context.Background(), e, append([]string{"jepsen", "check"}, args...))
	t.Logf("raftq jepsen check %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return code, stdout.String()
}

func readResults(t *testing.T, dir string) jepsen.Results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, jepsen.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var res jepsen.Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestJepsenCheck_GivesTheRunsVerdictAndRewritesTheReport(t *testing.T) {
	dir, want := savedRun(t)
	for _, name := range []string{jepsen.ResultsFile, jepsen.IndexFile, jepsen.LatencyPlot} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	code, out := runCheck(t, dir)
	if code != 0 {
		t.Fatalf("exit %d, want 0 for a passing run", code)
	}
	wantOut := "jepsen: " + want.Summary() + "\nreport: " + filepath.Join(dir, jepsen.IndexFile) + "\n" +
		"measures: " + want.Measures.String() + "\n"
	if out != wantOut {
		t.Errorf("output %q, want the run's %q", out, wantOut)
	}
	got := readResults(t, dir)
	if got.Verdict != want.Verdict || got.Valid != want.Valid || len(got.Checkers) != len(want.Checkers) {
		t.Fatalf("rechecked %s, the run had %s", got.Summary(), want.Summary())
	}
	for i, c := range got.Checkers {
		if w := want.Checkers[i]; c.Name != w.Name || c.Verdict != w.Verdict || c.Count != w.Count {
			t.Errorf("checker %s: %s %d, the run had %s %d", c.Name, c.Verdict, c.Count, w.Verdict, w.Count)
		}
	}
	for _, name := range []string{jepsen.IndexFile, jepsen.LatencyPlot} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("not rewritten: %v", err)
		}
	}
}

func TestJepsenCheck_FindsAWriteLostFromTheSavedHistory(t *testing.T) {
	dir, _ := savedRun(t)
	path := filepath.Join(dir, jepsen.HistoryFile)
	h := readHistoryFile(t, path)
	var lost *jepsen.SendValue
	for i := len(h) - 1; i >= 0 && lost == nil; i-- {
		if op := h[i]; op.F == jepsen.FSend && op.Type == jepsen.OK {
			lost = op.Send
		}
	}
	if lost == nil {
		t.Fatal("no acknowledged send in the saved history")
	}
	// Tamper: no read ever returned the last acknowledged write.
	removed := 0
	for i := range h {
		for j := range h[i].Reads {
			r := &h[i].Reads[j]
			n := len(r.Records)
			r.Records = slices.DeleteFunc(r.Records, func(rec jepsen.Record) bool { return rec.Value == lost.Value })
			removed += n - len(r.Records)
		}
	}
	if removed == 0 {
		t.Fatalf("no read returned %s: the saved run proves nothing", lost.Value)
	}
	writeHistoryFile(t, path, h)

	code, out := runCheck(t, dir)
	if code != 1 {
		t.Errorf("exit %d, want 1 for a lost write", code)
	}
	if !strings.HasPrefix(out, "jepsen: fail: ") || !strings.Contains(out, jepsen.CheckLostWrite+"=1") {
		t.Errorf("output %q does not report one lost write", out)
	}
	res := readResults(t, dir)
	c := res.Checker(jepsen.CheckLostWrite)
	if c == nil || c.Verdict != jepsen.VerdictFail || len(c.Examples) != 1 || c.Examples[0].Value != lost.Value {
		t.Fatalf("results.json lost-write: %+v, want %s at %s/%d offset %d", c, lost.Value, lost.Topic, lost.Partition, lost.Offset)
	}

	// The same loss allowed: reported, but the check passes.
	code, out = runCheck(t, "--allow", jepsen.CheckLostWrite+","+jepsen.CheckUnseen, dir)
	if code != 0 || !strings.Contains(out, jepsen.CheckLostWrite+"=1(allowed)") {
		t.Errorf("with lost-write allowed: exit %d, output %q", code, out)
	}
}

func TestJepsenCheck_BadInput(t *testing.T) {
	for _, args := range [][]string{{}, {"a", "b"}, {"--allow", "nothing", t.TempDir()}, {"--bogus", t.TempDir()}} {
		if code, _ := runCheck(t, args...); code != 2 {
			t.Errorf("raftq jepsen check %q: exit %d, want 2", args, code)
		}
	}
	if code, _ := runCheck(t, t.TempDir()); code != 1 {
		t.Errorf("a directory without a history: exit %d, want 1", code)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, jepsen.HistoryFile), []byte("{\"index\":5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := runCheck(t, dir); code != 1 {
		t.Errorf("a malformed history: exit %d, want 1", code)
	}
}

func readHistoryFile(t *testing.T, path string) jepsen.History {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := jepsen.ReadHistory(f)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func writeHistoryFile(t *testing.T, path string, h jepsen.History) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w) // one op a line, as the recorder writes them
	for i := range h {
		if err := enc.Encode(&h[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
