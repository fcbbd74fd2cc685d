package console

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// reportView is one `raftq jepsen run` report directory.
type reportView struct {
	Name    string
	Verdict string // results.json's; empty when it has none
	ModTime time.Time
	Index   bool // it has index.html
}

// reports lists the report directories under ReportsDir, newest first.
func (c *Console) reports() ([]reportView, error) {
	if c.cfg.ReportsDir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(c.cfg.ReportsDir)
	if err != nil {
		return nil, err
	}
	var out []reportView
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(c.cfg.ReportsDir, e.Name())
		rv := reportView{Name: e.Name()}
		if fi, err := e.Info(); err == nil {
			rv.ModTime = fi.ModTime()
		}
		if _, err := os.Stat(filepath.Join(dir, "index.html")); err == nil {
			rv.Index = true
		}
		if b, err := os.ReadFile(filepath.Join(dir, "results.json")); err == nil {
			var res struct {
				Verdict string `json:"verdict"`
			}
			if json.Unmarshal(b, &res) == nil {
				rv.Verdict = res.Verdict
			}
		}
		if rv.Index || rv.Verdict != "" {
			out = append(out, rv)
		}
	}
	slices.SortFunc(out, func(a, b reportView) int { return b.ModTime.Compare(a.ModTime) })
	return out, nil
}

// reportFiles serves the files of ReportsDir under /reports/; http.Dir
// keeps a path inside it.
func (c *Console) reportFiles() http.Handler {
	if c.cfg.ReportsDir == "" {
		return http.NotFoundHandler()
	}
	return http.StripPrefix("/reports/", http.FileServer(http.Dir(c.cfg.ReportsDir)))
}
