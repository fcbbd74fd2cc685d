package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// logHUPs keeps SIGHUP from stopping a server node until ctx ends: Go's
// default would kill the process, and a supervisor or an operator sends
// SIGHUP to mean "reload". A node with TLS files reloads them on it
// (broker/node_tls.go, listeners_tls.go, each watching on its own);
// this only says in the log what the signal did.
func logHUPs(ctx context.Context, logger *slog.Logger, reloads bool) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				if reloads {
					logger.Info("SIGHUP: reloading the TLS files")
				} else {
					logger.Info("SIGHUP: nothing to reload (the node has no TLS files); still serving")
				}
			}
		}
	}()
}
