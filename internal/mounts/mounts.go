package mounts

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of the mount table.
type Mount struct {
	Point  string // where it is mounted, unescaped
	Dev    string // "major:minor"
	FSType string // e.g. "tmpfs", "fuse.lazyfs"
	Source string // what mount(2) was given as the source
}

// Table lists the mounts of this process's mount namespace.
func Table() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := Parse(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// Mounted reports whether something is mounted on point.
func Mounted(point string) (bool, error) {
	table, err := Table()
	if err != nil {
		return false, err
	}
	for _, m := range table {
		if m.Point == point {
			return true, nil
		}
	}
	return false, nil
}

// Parse reads one /proc/self/mountinfo line:
// "36 35 98:0 / /mnt rw,noatime master:1 - fuse.lazyfs raftq-lazyfs-42 rw,...".
// The optional fields before " - " vary in number; the mount point is the
// fifth field, the type and source the first two after the separator.
func Parse(line string) (Mount, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, false
	}
	f, g := strings.Fields(pre), strings.Fields(post)
	if len(f) < 5 || len(g) < 2 {
		return Mount{}, false
	}
	return Mount{Point: unescape(f[4]), Dev: f[2], FSType: g[0], Source: unescape(g[1])}, true
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
