package raftgroup

import "testing"

// On a host that never fsyncs, a group marked AlwaysFsync (the metadata
// group) still fsyncs its WAL; the others follow the host's policy.
func TestHost_AlwaysFsyncGroupOverridesFsyncNever(t *testing.T) {
	c := newCluster(t, 1, nil, func(cfg *Config) { cfg.Fsync = FsyncNever })
	meta := c.createGroup(1, 7, GroupConfig{ID: 7, Peers: []uint64{1}, AlwaysFsync: true})
	data := c.createGroup(1, 8, GroupConfig{ID: 8, Peers: []uint64{1}})
	for _, tc := range []struct {
		g    *Group
		want FsyncPolicy
	}{{meta, FsyncAlways}, {data, FsyncNever}} {
		ds, ok := tc.g.storage.(*DiskStorage)
		if !ok {
			t.Fatalf("group %d storage is %T, want *DiskStorage", tc.g.id, tc.g.storage)
		}
		if got := ds.fsync; got != tc.want {
			t.Errorf("group %d WAL fsync %s, want %s", tc.g.id, got, tc.want)
		}
	}
}
