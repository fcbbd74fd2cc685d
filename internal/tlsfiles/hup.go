package tlsfiles

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// WatchInterval is how often WatchFilesAndHUP looks at the files.
const WatchInterval = 2 * time.Second

// WatchFilesAndHUP reloads s when its files change or the process gets
// SIGHUP, until ctx ends; see Watch. Every Store may watch at once: each
// registers its own channel, and each SIGHUP reaches all of them.
func (s *Store) WatchFilesAndHUP(ctx context.Context, report func(error)) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	defer signal.Stop(sig)
	hup := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				select {
				case hup <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	s.Watch(ctx, WatchInterval, hup, report)
}
