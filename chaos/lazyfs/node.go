package lazyfs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a file or directory of the mount. Metadata operations go
// straight to the backing directory; file data goes through fileState.
type node struct {
	fs.Inode
	fsys *FS
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
)

// path is the node's backing path (meaningless once it is unlinked).
func (n *node) path() string {
	return filepath.Join(n.fsys.cfg.Backing, n.Path(nil))
}

func (n *node) child(name string) string { return filepath.Join(n.path(), name) }

// newChild registers the backing inode b under n.
func (n *node) newChild(ctx context.Context, b backingStat, out *fuse.EntryOut) *fs.Inode {
	var s *fileState
	if b.isRegular() {
		s = n.fsys.state(b.st.Ino)
	}
	b.fill(&out.Attr, s)
	return n.NewInode(ctx, &node{fsys: n.fsys}, b.stable())
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	b, err := lstatPath(n.child(name))
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return n.newChild(ctx, b, out), fs.OK
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		return h.getattr(out)
	}
	b, err := lstatPath(n.path())
	if err != nil {
		return fs.ToErrno(err)
	}
	var s *fileState
	if b.isRegular() {
		s = n.fsys.state(b.st.Ino)
	}
	b.fill(&out.Attr, s)
	return fs.OK
}

// Setattr applies mode, owner and times at once (metadata) and a size
// change to the lazy view (data).
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errno := n.setMeta(in); errno != fs.OK {
		return errno
	}
	if size, ok := in.GetSize(); ok {
		s, errno := n.stateFor(fh)
		if errno != fs.OK {
			return errno
		}
		s.mu.Lock()
		s.truncate(int64(size))
		s.mu.Unlock()
		if _, ok := fh.(*handle); !ok {
			n.fsys.settle(s)
		}
	}
	return n.Getattr(ctx, fh, out)
}

func (n *node) setMeta(in *fuse.SetAttrIn) syscall.Errno {
	p := n.path()
	if m, ok := in.GetMode(); ok {
		if err := syscall.Chmod(p, m); err != nil {
			return fs.ToErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		su, sg := -1, -1
		if uok {
			su = int(uid)
		}
		if gok {
			sg = int(gid)
		}
		if err := syscall.Lchown(p, su, sg); err != nil {
			return fs.ToErrno(err)
		}
	}
	return setTimes(p, in)
}

func setTimes(p string, in *fuse.SetAttrIn) syscall.Errno {
	atime, aok := in.GetATime()
	mtime, mok := in.GetMTime()
	if !aok && !mok {
		return fs.OK
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	if aok {
		ts[0] = unix.NsecToTimespec(atime.UnixNano())
	}
	if mok {
		ts[1] = unix.NsecToTimespec(mtime.UnixNano())
	}
	return fs.ToErrno(unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
}

// stateFor returns the state behind fh, or of the node's path when the
// kernel sent no handle (truncate(2) by name).
func (n *node) stateFor(fh fs.FileHandle) (*fileState, syscall.Errno) {
	if h, ok := fh.(*handle); ok {
		return h.s, fs.OK
	}
	f, ino, errno := openBacking(n.path(), 0, 0)
	if errno != fs.OK {
		return nil, errno
	}
	s, err := n.fsys.acquire(f, ino, false)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return s, fs.OK
}

// openBacking opens a backing file read-write whatever the client asked
// (the overlay reads pages to fill partial writes); O_TRUNC and O_APPEND
// are the overlay's business, so they never reach the backing file.
func openBacking(p string, flags uint32, mode uint32) (*os.File, uint64, syscall.Errno) {
	keep := int(flags) & (syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOFOLLOW)
	fd, err := syscall.Open(p, keep|syscall.O_RDWR|syscall.O_CLOEXEC, mode)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	b, err := statFd(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, 0, fs.ToErrno(err)
	}
	if !b.isRegular() {
		syscall.Close(fd)
		return nil, 0, syscall.EINVAL
	}
	return os.NewFile(uintptr(fd), p), b.st.Ino, fs.OK
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	f, ino, errno := openBacking(n.path(), flags, 0)
	if errno != fs.OK {
		return nil, 0, errno
	}
	h, errno := n.fsys.newHandle(f, ino, flags)
	return h, 0, errno
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := n.child(name)
	f, ino, errno := openBacking(p, flags|syscall.O_CREAT, mode)
	if errno != fs.OK {
		return nil, nil, 0, errno
	}
	b, err := statFd(int(f.Fd()))
	if err != nil {
		f.Close()
		return nil, nil, 0, fs.ToErrno(err)
	}
	h, errno := n.fsys.newHandle(f, ino, flags)
	if errno != fs.OK {
		return nil, nil, 0, errno
	}
	b.fill(&out.Attr, h.s)
	return n.NewInode(ctx, &node{fsys: n.fsys}, b.stable()), h, 0, fs.OK
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.child(name)
	if err := syscall.Mkdir(p, mode); err != nil {
		return nil, fs.ToErrno(err)
	}
	b, err := lstatPath(p)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return n.newChild(ctx, b, out), fs.OK
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return fs.ToErrno(syscall.Rmdir(n.child(name)))
}

// Unlink removes the name at once. Removing the last name of a file also
// drops its pending data once no handle is left.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	p := n.child(name)
	b, statErr := lstatPath(p)
	if err := syscall.Unlink(p); err != nil {
		return fs.ToErrno(err)
	}
	if statErr == nil && b.isRegular() && b.st.Nlink <= 1 {
		n.fsys.detach(b.st.Ino)
	}
	return fs.OK
}

// Rename moves the name at once; pending data moves with the inode, so a
// renamed file that was never fsynced is, after a power loss, present under
// its new name with its last fsynced content (possibly empty).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	from, to := n.child(name), np.child(newName)
	victim, statErr := lstatPath(to)
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, uint(flags)); err != nil {
		return fs.ToErrno(err)
	}
	replaced := statErr == nil && flags&unix.RENAME_EXCHANGE == 0
	if replaced && victim.isRegular() && victim.st.Nlink <= 1 {
		n.fsys.detach(victim.st.Ino)
	}
	return fs.OK
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return fs.NewLoopbackDirStream(n.path())
}

// Fsync commits a file's overlay. On a directory it commits nothing:
// metadata is synchronous. It is counted, and passed to the backing
// directory when SyncBacking is set.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		return h.fsync()
	}
	n.fsys.dirFsyncs.Add(1)
	if !n.fsys.cfg.SyncBacking {
		return fs.OK
	}
	d, err := os.Open(n.path())
	if err != nil {
		return fs.ToErrno(err)
	}
	defer d.Close()
	return fs.ToErrno(d.Sync())
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s syscall.Statfs_t
	if err := syscall.Statfs(n.path(), &s); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatfsT(&s)
	return fs.OK
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.child(name)
	if err := syscall.Symlink(target, p); err != nil {
		return nil, fs.ToErrno(err)
	}
	b, err := lstatPath(p)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return n.newChild(ctx, b, out), fs.OK
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	t, err := os.Readlink(n.path())
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return []byte(t), fs.OK
}
