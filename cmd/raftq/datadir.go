package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"

	"github.com/raftq/raftq/broker"
)

// lockFileName is the file in a data dir whose lock says a raftq process
// is using the dir.
const lockFileName = "raftq.lock"

// lockDataDir takes dir's lock, so that a second raftq on a data dir in
// use fails at once and by name, rather than on whichever WAL lock it
// meets first or, worse, not at all. The lock (an OFD lock on Linux, flock
// elsewhere) belongs to the open file, so the kernel drops it when the
// process ends however it ends, and a second open in the same process
// conflicts too. The file holds the holder's pid for the message.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	name := filepath.Join(dir, lockFileName)
	l, err := fileutil.TryLockFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fileutil.ErrLocked) {
		return nil, heldError(dir, name)
	}
	if err != nil {
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	// The pid is only for the message: a failed write costs nothing else.
	if l.Truncate(0) == nil {
		_, _ = l.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { _ = l.Close() }, nil
}

func heldError(dir, name string) error {
	b, _ := os.ReadFile(name)
	if pid := strings.TrimSpace(string(b)); pid != "" {
		return fmt.Errorf("another raftq holds %s (pid %s)", dir, pid)
	}
	return fmt.Errorf("another raftq holds %s", dir)
}

// openNode starts a node on its data dir's lock. Its close stops the node,
// then lets the dir go.
func openNode(cfg broker.Config) (n *broker.Node, closeNode func() error, err error) {
	release, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	n, err = broker.New(cfg)
	if err != nil {
		release()
		return nil, nil, err
	}
	return n, func() error {
		defer release()
		return n.Close()
	}, nil
}
