//go:build unix

package broker

import "golang.org/x/sys/unix"

// volumeBytes returns the size and the space left to unprivileged users
// of the file system holding dir, or -1 and -1 if unknown.
func volumeBytes(dir string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
