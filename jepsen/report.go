package jepsen

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Report file names inside a report directory.
const (
	HistoryFile    = "history.jsonl"
	ResultsFile    = "results.json"
	IndexFile      = "index.html"
	LatencyPlot    = "latency.png"
	ThroughputPlot = "throughput.png"
	UnseenPlot     = "unseen.png"
)

// writeReport writes the report of h and its results into dir, beside
// the history.jsonl it was read from or streamed to: results.json, the
// latency, throughput and unseen plots, porcupine's visualization of
// every partition found not linearizable, and index.html tying them
// together. It sets the Visualization file names in res.Linearizability.
func writeReport(dir string, h History, res *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report dir %s: %w", dir, err)
	}
	if err := writeVisualizations(dir, res); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, ResultsFile), res); err != nil {
		return err
	}
	for _, plot := range []func() error{
		func() error { return plotLatency(h, filepath.Join(dir, LatencyPlot)) },
		func() error { return plotThroughput(h, filepath.Join(dir, ThroughputPlot)) },
		func() error { return plotUnseen(h, res.Unseen, filepath.Join(dir, UnseenPlot)) },
	} {
		if err := plot(); err != nil {
			return err
		}
	}
	return writeIndex(filepath.Join(dir, IndexFile), h, res)
}

// writeFile creates path, lets fill write it, and syncs it.
func writeFile(path string, fill func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if err := fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

func writeJSON(path string, v any) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

func writeVisualizations(dir string, res *Results) error {
	for i := range res.Linearizability {
		pl := &res.Linearizability[i]
		lr := res.lin[TP{pl.Topic, pl.Partition}]
		if pl.Verdict != VerdictFail || lr == nil || !lr.hasInfo {
			continue
		}
		name := fmt.Sprintf("linearizability-%s-%d.html", safeName(pl.Topic), pl.Partition)
		if err := porcupineVisualize(lr, filepath.Join(dir, name)); err != nil {
			return err
		}
		pl.Visualization = name
	}
	return nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

type indexData struct {
	Res     *Results
	Summary string
	Failing []failingChecker
	Plots   []string
	ByF     []fRow
}

type failingChecker struct {
	CheckerResult
	Examples []example
}

// example is an anomaly with the history ops it cites, as JSON lines.
type example struct {
	Anomaly
	Ops []string
}

// maxOpJSON bounds each op shown in index.html; reads can be long.
const maxOpJSON = 600

func opJSON(h History, idx int64) string {
	if idx < 0 || idx >= int64(len(h)) {
		return fmt.Sprintf("op %d: not in history", idx)
	}
	b, err := json.Marshal(&h[idx])
	if err != nil {
		return err.Error()
	}
	if len(b) > maxOpJSON {
		return string(b[:maxOpJSON]) + " …"
	}
	return string(b)
}

type fRow struct {
	F                   F
	OK, Fail, Info, All int
}

func writeIndex(path string, h History, res *Results) error {
	d := indexData{Res: res, Summary: res.Summary(),
		Plots: []string{LatencyPlot, ThroughputPlot, UnseenPlot}}
	for _, c := range res.Checkers {
		if len(c.Examples) == 0 {
			continue
		}
		fc := failingChecker{CheckerResult: c}
		for _, an := range c.Examples {
			ex := example{Anomaly: an}
			for _, idx := range an.Ops {
				ex.Ops = append(ex.Ops, opJSON(h, idx))
			}
			fc.Examples = append(fc.Examples, ex)
		}
		d.Failing = append(d.Failing, fc)
	}
	for _, f := range sortedFs(res.Stats.ByF) {
		m := res.Stats.ByF[f]
		d.ByF = append(d.ByF, fRow{F: f, OK: m[OK], Fail: m[Fail], Info: m[Info], All: m[OK] + m[Fail] + m[Info]})
	}
	return writeFile(path, func(w io.Writer) error { return indexTmpl.Execute(w, d) })
}

var indexTmpl = template.Must(template.New("index").Funcs(template.FuncMap{
	"secs": func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"divf": func(ns int64) float64 { return float64(ns) / 1e9 },
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>raftq jepsen: {{.Res.Verdict}}</title>
<style>
body{font-family:sans-serif;margin:2em;max-width:1100px}
.ok{color:#1a7f37}.fail{color:#cf222e}.unknown{color:#9a6700}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
pre{background:#f6f8fa;padding:.5em;overflow-x:auto}img{max-width:100%}
</style></head><body>
<h1>Verdict: <span class="{{.Res.Verdict}}">{{.Res.Verdict}}</span></h1>
<p>{{.Summary}}</p>
<p>Files: <a href="results.json">results.json</a> · <a href="history.jsonl">history.jsonl</a></p>
<h2>Checkers</h2>
<table><tr><th>checker</th><th>verdict</th><th>anomalies</th><th>counts</th><th>note</th></tr>
{{range .Res.Checkers}}<tr><td>{{.Name}}</td><td class="{{.Verdict}}">{{.Verdict}}{{if .Allowed}} (allowed){{end}}</td><td>{{.Count}}</td><td>{{range $k, $v := .Counts}}{{$k}}: {{$v}}<br>{{end}}</td><td>{{.Note}}</td></tr>
{{end}}</table>
<h2>Operations</h2>
<table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th><th>total</th></tr>
{{range .ByF}}<tr><td>{{.F}}</td><td>{{.OK}}</td><td>{{.Fail}}</td><td>{{.Info}}</td><td>{{.All}}</td></tr>
{{end}}</table>
<p>{{printf "%.0f" .Res.Stats.OKSendsPerSec}} ok sends/s, {{printf "%.0f" .Res.Stats.OKOpsPerSec}} ok ops/s over {{printf "%.1f" (divf .Res.Stats.DurationNs)}} s.</p>
<h2>Measures</h2>
<p>{{.Res.Measures}}</p>
{{if .Res.Setup}}<p>setup: {{.Res.Setup}}</p>{{end}}
{{if .Res.Measures.Faults}}<h2>Faults</h2>
<table><tr><th>nemesis</th><th>from (s)</th><th>to (s)</th><th>availability</th><th>failover (s)</th><th>what it did</th></tr>
{{range .Res.Measures.Faults}}<tr><td>{{.Nemesis}}</td><td>{{secs (divf .StartNs)}}</td><td>{{secs (divf .EndNs)}}</td><td>{{printf "%.3f" .Availability.Value}} ({{.Availability.OK}}/{{.Availability.Attempted}})</td><td>{{if .NoFailover}}-{{else if lt .FailoverNs 0}}never{{else}}{{printf "%.3f" (divf .FailoverNs)}}{{end}}{{if .Overlapped}} (overlapped){{end}}</td><td>{{.Detail}}{{if .StopDetail}}<br>stop: {{.StopDetail}}{{end}}</td></tr>
{{end}}</table>{{end}}
<h2>Plots</h2>
{{range .Plots}}<p><img src="{{.}}" alt="{{.}}"></p>
{{end}}
{{if .Failing}}<h2>Anomalies</h2>
{{range .Failing}}<h3 class="{{.Verdict}}">{{.Name}}: {{.Count}}</h3>
{{range .Examples}}<p>{{.Detail}}</p>{{if .Ops}}<pre>{{range .Ops}}{{.}}
{{end}}</pre>{{end}}
{{end}}{{end}}{{end}}
{{if .Res.Linearizability}}<h2>Linearizability per partition</h2>
<table><tr><th>partition</th><th>verdict</th><th>ops</th><th>visualization</th></tr>
{{range .Res.Linearizability}}<tr><td>{{.Topic}}/{{.Partition}}</td><td class="{{.Verdict}}">{{.Verdict}}</td><td>{{.Ops}}</td><td>{{if .Visualization}}<a href="{{.Visualization}}">porcupine</a>{{end}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))

// Recheck reads the history.jsonl of a report directory (as Run leaves
// it, also after a run that died), checks it again with cfg and rewrites
// the rest of the report (results, plots, index) beside it. The history
// itself is left as it is. A history that does not decode is an error
// wrapping *DecodeError.
func Recheck(dir string, cfg CheckConfig) (*Results, error) {
	path := filepath.Join(dir, HistoryFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	h, err := ReadHistory(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	res, err := Check(h, cfg)
	if err != nil {
		return nil, err
	}
	res.Setup = PreviousSetup(dir)
	return res, writeReport(dir, h, res)
}

// PreviousSetup is the setup results.json in dir names, or nil: the
// history does not hold it, so a recheck carries it over.
func PreviousSetup(dir string) *Setup {
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		return nil
	}
	var old struct {
		Setup *Setup `json:"setup"`
	}
	if json.Unmarshal(b, &old) != nil {
		return nil
	}
	return old.Setup
}
