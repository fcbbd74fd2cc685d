package floor

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
)

// node is one replica's log: a file and the goroutine that group-commits
// to it.
type node struct {
	f    *os.File
	kick chan struct{}

	mu    sync.Mutex // guards queue; a leaf lock
	queue []write

	// Owned by the flusher; read once it has stopped.
	off        int64 // bytes in the log
	flushes    int64
	flushNanos int64
}

// write is a queued append; done runs once it is on disk.
type write struct {
	data []byte
	done func()
}

// openNode creates the node's file in dir and fallocates prealloc bytes,
// as etcd's WAL does for a segment, so that appends do not grow the file.
func openNode(dir string, id int, prealloc int64) (*node, error) {
	path := filepath.Join(dir, fmt.Sprintf("node-%d.log", id))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if prealloc > 0 {
		if err := fileutil.Preallocate(f, prealloc, true); err != nil {
			f.Close()
			return nil, fmt.Errorf("fallocate %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("fsync %s: %w", path, err)
	}
	return &node{f: f, kick: make(chan struct{}, 1)}, nil
}

// append queues data; done runs on the flusher once data is durable.
func (n *node) append(data []byte, done func()) {
	n.mu.Lock()
	n.queue = append(n.queue, write{data, done})
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// run writes and fdatasyncs whatever is queued, one batch at a time,
// until stop closes or a write fails.
func (n *node) run(stop <-chan struct{}, fail func(error)) {
	var buf []byte
	for {
		select {
		case <-stop:
			return
		case <-n.kick:
		}
		n.mu.Lock()
		q := n.queue
		n.queue = nil
		n.mu.Unlock()
		if len(q) == 0 {
			continue
		}
		var err error
		if buf, err = n.flush(q, buf[:0]); err != nil {
			fail(err)
			return
		}
		for _, w := range q {
			w.done()
		}
	}
}

// flush writes q at the end of the log and fdatasyncs it, timing the two
// together.
func (n *node) flush(q []write, buf []byte) ([]byte, error) {
	for _, w := range q {
		buf = append(buf, w.data...)
	}
	began := time.Now()
	if _, err := n.f.WriteAt(buf, n.off); err != nil {
		return buf, fmt.Errorf("write %s: %w", n.f.Name(), err)
	}
	if err := fileutil.Fdatasync(n.f); err != nil {
		return buf, fmt.Errorf("fdatasync %s: %w", n.f.Name(), err)
	}
	n.off += int64(len(buf))
	n.flushes++
	n.flushNanos += int64(time.Since(began))
	return buf, nil
}

// close closes the node's file; its flusher must have stopped.
func (n *node) close() error { return n.f.Close() }
