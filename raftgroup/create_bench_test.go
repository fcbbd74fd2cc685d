package raftgroup

import (
	"io/fs"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCreateGroups reports what creating raft groups costs one node
// on a real disk (a single-node host, so each group elects itself at
// once), per WAL layout: wall time per group until it leads, and the disk
// space its files take, preallocated WAL segments included (4 MiB, the
// broker's default).
//
//	go test ./raftgroup -run '^$' -bench BenchmarkCreateGroups -benchtime 200x
func BenchmarkCreateGroups(b *testing.B) {
	useWALSegmentSize(b, 4<<20)
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "wal=group", true: "wal=shared"}[shared]
		b.Run(name, func(b *testing.B) {
			c := newCluster(b, 1, nil, func(cfg *Config) { cfg.SharedWAL = shared })
			b.ResetTimer()
			start := time.Now()
			for gid := uint64(1); gid <= uint64(b.N); gid++ {
				g := c.createGroup(1, gid, GroupConfig{ID: gid, Peers: []uint64{1}})
				g.Campaign()
			}
			for gid := uint64(1); gid <= uint64(b.N); gid++ {
				eventually(b, "every group to lead", func() bool { return c.host(1).Group(gid).Status().IsLeader() })
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/group")
			b.ReportMetric(float64(diskBytes(b, c.host(1).cfg.DataDir))/float64(b.N)/(1<<20), "MiB-on-disk/group")
		})
	}
}

// diskBytes sums the blocks allocated to the files under dir.
func diskBytes(tb testing.TB, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += allocated(info)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return total
}
