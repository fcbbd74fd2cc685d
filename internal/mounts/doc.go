// Package mounts reads this process's mount table (/proc/self/mountinfo),
// so that code which mounts things for tests (chaos/lazyfs's FUSE mounts,
// cmd/raftq's tmpfs mounts) can find what a killed run left behind.
//
//	Table() ([]Mount, error)       every mount, paths unescaped
//	Mounted(point) (bool, error)   whether anything is mounted there
//	Parse(line) (Mount, bool)      one mountinfo line
package mounts
