package chaos

import (
	"context"
	"errors"

	"github.com/raftq/raftq/chaos/lazyfs"
	"github.com/raftq/raftq/chaos/netns"
)

// CleanupStale removes what crashed runs left behind: namespaces named
// raftq-<pid>-* whose creator is dead (after killing the processes still
// in them) and lazyfs mounts whose server is dead (aborting their FUSE
// connection first). With owner > 0 only that dead process's leftovers
// are removed. Call it before a run; it never touches live runs.
func CleanupStale(ctx context.Context, owner int) (namespaces []string, mounts []string, err error) {
	namespaces, nerr := netns.CleanupStale(ctx, owner)
	ms, merr := lazyfs.CleanupStale(owner)
	for _, m := range ms {
		mounts = append(mounts, m.Mountpoint)
	}
	return namespaces, mounts, errors.Join(nerr, merr)
}
