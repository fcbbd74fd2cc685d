package console

import (
	"net/http"
	"runtime"
	"runtime/debug"
)

// buildVersion names the running binary: its module version, VCS
// revision (with +dirty for a modified tree) and Go version.
func buildVersion() string {
	v := "raftq"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v + " " + runtime.Version()
	}
	if bi.Main.Version != "" {
		v += " " + bi.Main.Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return v + " " + bi.GoVersion
}

func (c *Console) serveVersion(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(c.cfg.Version + "\n"))
}
