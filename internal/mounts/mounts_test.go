package mounts

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		line string
		want Mount
		ok   bool
	}{
		{`612 30 0:95 / /tmp/x\040y/mnt rw,nosuid,nodev,relatime - fuse.lazyfs raftq-lazyfs-4242 rw,user_id=0`,
			Mount{Point: "/tmp/x y/mnt", Dev: "0:95", FSType: "fuse.lazyfs", Source: "raftq-lazyfs-4242"}, true},
		{`36 35 98:0 / /mnt rw,noatime master:1 shared:2 - tmpfs raftq-test-tmpfs-7 rw,size=1024k`,
			Mount{Point: "/mnt", Dev: "98:0", FSType: "tmpfs", Source: "raftq-test-tmpfs-7"}, true},
		{`25 1 8:1 / / rw - ext4`, Mount{}, false},
		{`25 1 8:1 / / rw ext4 /dev/sda1 rw`, Mount{}, false},
		{``, Mount{}, false},
	} {
		got, ok := Parse(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// The table of a running process always holds its root, and a fresh
// directory is no mount point.
func TestMounted(t *testing.T) {
	for dir, want := range map[string]bool{"/": true, t.TempDir(): false} {
		if got, err := Mounted(dir); err != nil || got != want {
			t.Errorf("Mounted(%s) = %v, %v; want %v", dir, got, err, want)
		}
	}
}
