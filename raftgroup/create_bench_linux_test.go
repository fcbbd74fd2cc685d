package raftgroup

import (
	"io/fs"
	"syscall"
)

// allocated is the space a file takes on disk (st_blocks), which counts
// preallocation that the file's size may not.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}
