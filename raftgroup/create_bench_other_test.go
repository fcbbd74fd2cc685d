//go:build !linux

package raftgroup

import "io/fs"

// allocated is the file's size where st_blocks is not at hand.
func allocated(info fs.FileInfo) int64 { return info.Size() }
