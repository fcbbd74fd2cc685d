package lazyfs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// backingStat is what lazyfs needs to know of a backing inode.
type backingStat struct {
	st  syscall.Stat_t
	gen uint64 // birth time, so a reused inode number is a new inode to go-fuse
}

// lstatPath stats path without following a final symlink.
func lstatPath(path string) (backingStat, error) {
	return statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW)
}

// statFd stats an open backing file.
func statFd(fd int) (backingStat, error) {
	return statx(fd, "", unix.AT_EMPTY_PATH)
}

func statx(dirfd int, path string, flags int) (backingStat, error) {
	var x unix.Statx_t
	if err := unix.Statx(dirfd, path, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return backingStat{}, err
	}
	var b backingStat
	b.st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	b.st.Ino = x.Ino
	b.st.Nlink = uint64(x.Nlink)
	b.st.Mode = uint32(x.Mode)
	b.st.Uid, b.st.Gid = x.Uid, x.Gid
	b.st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	b.st.Size = int64(x.Size)
	b.st.Blksize = int64(x.Blksize)
	b.st.Blocks = int64(x.Blocks)
	b.st.Atim = syscall.NsecToTimespec(x.Atime.Sec*1e9 + int64(x.Atime.Nsec))
	b.st.Mtim = syscall.NsecToTimespec(x.Mtime.Sec*1e9 + int64(x.Mtime.Nsec))
	b.st.Ctim = syscall.NsecToTimespec(x.Ctime.Sec*1e9 + int64(x.Ctime.Nsec))
	b.gen = 1
	if x.Mask&unix.STATX_BTIME != 0 {
		b.gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return b, nil
}

func (b backingStat) isRegular() bool { return b.st.Mode&syscall.S_IFMT == syscall.S_IFREG }

func (b backingStat) stable() fs.StableAttr {
	return fs.StableAttr{Mode: b.st.Mode & syscall.S_IFMT, Ino: b.st.Ino, Gen: b.gen}
}

// fill writes the attributes a client sees: the backing inode's, with the
// lazy size when the file has a state.
func (b backingStat) fill(out *fuse.Attr, s *fileState) {
	out.FromStat(&b.st)
	if s == nil {
		return
	}
	s.mu.Lock()
	out.Size = uint64(s.size)
	s.mu.Unlock()
	out.Blocks = max(out.Blocks, (out.Size+511)/512)
}
