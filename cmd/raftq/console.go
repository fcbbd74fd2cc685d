package main

import (
	"log/slog"
	"net/http"

	"github.com/spf13/pflag"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/console"
)

// consoleFlags are the web console's flags, for server and dev.
type consoleFlags struct{ reportsDir string }

func bindConsoleFlags(fs *pflag.FlagSet) *consoleFlags {
	c := &consoleFlags{}
	fs.StringVar(&c.reportsDir, "reports-dir", "", "directory of raftq jepsen reports (one subdirectory per run, as jepsen-reports/) that the web console lists and links")
	return c
}

// hook is broker.Config.Console: the console at / on the node's admin
// port, reading the node's addresses once it listens.
func (c *consoleFlags) hook(logger *slog.Logger) func(*broker.Node) http.Handler {
	return func(n *broker.Node) http.Handler {
		cfg := console.DefaultConfig()
		cfg.Addrs = func() (string, string) {
			k, _, a := n.Addrs()
			return k, a
		}
		cfg.ReportsDir, cfg.Logger = c.reportsDir, logger.With("component", "console")
		cfg.AdminTLS = n.AdminClientTLS()
		con, err := console.New(cfg)
		if err != nil { // the embedded templates did not parse: a bug
			logger.Error("web console", "err", err)
			return http.NotFoundHandler()
		}
		return con
	}
}
