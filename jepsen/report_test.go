package jepsen

import (
	"encoding/json"
	"image"
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportHistory is a small synthetic run: two partitions, a fault, one
// partition that loses an acknowledged write.
func reportHistory() History {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.nemesis(FStart, "partition")
	b.send(1, 1, "x", OK, 0)
	b.send(0, 0, "b", Info, NoOffset)
	b.send(1, 1, "y", OK, 1) // lost below
	b.nemesis(FStop, "partition")
	b.assign(2, seek(0, 0), seek(1, 0))
	b.poll(2, part(0, 2, 0, "a", 1, "b"), part(1, 2, 0, "x"))
	b.send(1, 1, "z", Fail, NoOffset)
	b.final(3, 0, OK, 2, 0, "a", 1, "b")
	b.final(3, 1, OK, 2, 0, "x", 1, "w")
	return b.h
}

func TestWriteReport_ProducesFilesPlotsAndVisualization(t *testing.T) {
	h := reportHistory()
	res := check(t, h)
	if res.Valid {
		t.Fatalf("the history loses y; got %s", res.Summary())
	}
	dir := t.TempDir()
	if err := writeRunReport(dir, h, res); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{LatencyPlot, ThroughputPlot, UnseenPlot} {
		assertPNG(t, filepath.Join(dir, name))
	}

	back, err := os.Open(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if got, err := ReadHistory(back); err != nil || len(got) != len(h) {
		t.Fatalf("history.jsonl: %d ops, err %v", len(got), err)
	}

	var decoded Results
	raw, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	if decoded.Valid || len(decoded.Checkers) != len(PlainCheckerNames) || decoded.Checker(CheckLostWrite).Count != 1 {
		t.Fatalf("results.json: %+v", decoded)
	}

	var vis string
	for _, p := range decoded.Linearizability {
		if p.Partition == 1 {
			vis = p.Visualization
		}
	}
	if vis == "" {
		t.Fatalf("no visualization for the failing partition: %+v", decoded.Linearizability)
	}
	if fi, err := os.Stat(filepath.Join(dir, vis)); err != nil || fi.Size() < 1000 {
		t.Fatalf("visualization %s: %v", vis, err)
	}

	index, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Verdict", "fail", LatencyPlot, ThroughputPlot, UnseenPlot, vis, "lost-write", `send of &#34;y&#34; acknowledged at offset 1`, "partition", ResultsFile, HistoryFile, "Measures", "acknowledged=", "failover (s)"} {
		if !strings.Contains(string(index), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

func TestRecheck_RewritesTheReportFromHistory(t *testing.T) {
	h := reportHistory()
	dir := t.TempDir()
	if err := writeRunReport(dir, h, check(t, h)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ResultsFile)); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultCheckConfig()
	cfg.Allowed = []string{CheckLostWrite, CheckUnseen, CheckInconsistent, CheckLinearizable, CheckG1a}
	res, err := Recheck(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid {
		t.Fatalf("with every failing checker allowed: %s", res.Summary())
	}
	if _, err := os.Stat(filepath.Join(dir, ResultsFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Recheck(t.TempDir(), cfg); err == nil {
		t.Fatal("recheck of an empty dir succeeded")
	}
}

func TestWriteReport_EmptyishHistory(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	res := check(t, b.h)
	dir := t.TempDir()
	if err := writeRunReport(dir, b.h, res); err != nil {
		t.Fatal(err)
	}
	assertPNG(t, filepath.Join(dir, LatencyPlot))
}

func assertPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, format, err := image.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := img.Bounds()
	if format != "png" || b.Dx() < 400 || b.Dy() < 200 {
		t.Fatalf("%s: %s %dx%d", path, format, b.Dx(), b.Dy())
	}
	// A blank canvas would be one colour; a plot has axes, text and data.
	colours := map[[4]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if len(colours) < 3 {
		t.Fatalf("%s has %d colours: blank", path, len(colours))
	}
}

func TestNemesisIntervals(t *testing.T) {
	ivs := nemesisIntervals(reportHistory())
	if len(ivs) != 1 || ivs[0].Name != "partition" || ivs[0].End <= ivs[0].Start {
		t.Fatalf("intervals %+v", ivs)
	}
	b := &hb{}
	b.nemesis(FStart, "kill") // never stopped: runs to the end
	b.send(0, 0, "a", OK, 0)
	ivs = nemesisIntervals(b.h)
	if len(ivs) != 1 || ivs[0].End != secs(b.h[len(b.h)-1].Time) {
		t.Fatalf("intervals %+v", ivs)
	}
}

// writeRunReport leaves dir as Run does: history.jsonl, then the report.
func writeRunReport(dir string, h History, res *Results) error {
	err := writeFile(filepath.Join(dir, HistoryFile), func(w io.Writer) error { return writeJSONL(w, h) })
	if err != nil {
		return err
	}
	return writeReport(dir, h, res)
}
