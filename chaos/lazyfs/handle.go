package lazyfs

import (
	"context"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is one open file description; every handle of an inode shares
// its fileState.
type handle struct {
	fsys *FS
	s    *fileState
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// newHandle wraps backing file f (inode ino) for an open with flags.
func (fsys *FS) newHandle(f *os.File, ino uint64, flags uint32) (*handle, syscall.Errno) {
	s, err := fsys.acquire(f, ino, true)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		s.mu.Lock()
		s.truncate(0)
		s.mu.Unlock()
	}
	return &handle{fsys: fsys, s: s}, fs.OK
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	n, err := h.s.readAt(dest, off)
	if err != nil {
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:n]), fs.OK
}

// Write lands in the overlay only. While LoseUnsynced runs, writes are
// pages the kernel writes back from before the power loss: they are
// acknowledged and dropped.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.fsys.discarding.Load() {
		return uint32(len(data)), fs.OK
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if err := h.s.writeAt(data, off); err != nil {
		return 0, syscall.EIO
	}
	return uint32(len(data)), fs.OK
}

// fsync makes the file's current content durable (fsync and fdatasync
// alike: there is no separate metadata to skip).
func (h *handle) fsync() syscall.Errno {
	h.fsys.fsyncs.Add(1)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if err := h.s.commit(h.fsys.cfg.SyncBacking); err != nil {
		return syscall.EIO
	}
	return fs.OK
}

// Flush runs on every close(2); closing makes nothing durable.
func (h *handle) Flush(ctx context.Context) syscall.Errno { return fs.OK }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.fsys.release(h.s)
	return fs.OK
}

// Allocate supports what preallocating writers use: mode 0 extends the
// file with zeros (lazily, like a write), FALLOC_FL_KEEP_SIZE reserves
// nothing visible and is accepted. Other modes are not supported.
func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	switch mode {
	case 0:
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		if end := int64(off + size); end > h.s.size {
			h.s.truncate(end)
		}
		return fs.OK
	case unix.FALLOC_FL_KEEP_SIZE:
		return fs.OK
	default:
		return syscall.EOPNOTSUPP
	}
}

func (h *handle) getattr(out *fuse.AttrOut) syscall.Errno {
	b, err := statFd(int(h.s.f.Fd()))
	if err != nil {
		return fs.ToErrno(err)
	}
	b.fill(&out.Attr, h.s)
	return fs.OK
}
