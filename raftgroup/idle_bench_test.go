package raftgroup

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleGroups reports (does not assert) the CPU that 1,000 idle
// groups cost a node, with and without quiescence: three Hosts in this
// process, each running every group, on the in-memory FAKE network and
// FAKE storage (the disk is not what is measured), 100 ms ticks. After
// every group has a leader (and, with quiescence, has quiesced), process
// CPU time is read with getrusage over a fixed 5 s of real time and
// divided by three nodes.
//
//	go test ./raftgroup -run '^$' -bench BenchmarkIdleGroups -benchtime 1x
func BenchmarkIdleGroups(b *testing.B) {
	for _, quiesce := range []bool{false, true} {
		b.Run(fmt.Sprintf("groups=1000/quiesce=%v", quiesce), func(b *testing.B) {
			benchIdle(b, 1000, quiesce)
		})
	}
}

func benchIdle(b *testing.B, groups int, quiesce bool) {
	c := newCluster(b, 3, nil, func(cfg *Config) {
		cfg.TickInterval = 100 * time.Millisecond
		cfg.NewStorage = func(uint64, string) (Storage, error) { return &memStorage{}, nil }
		if !quiesce {
			cfg.QuiesceAfterTicks = 0
		}
	})
	for id := uint64(1); id <= 3; id++ {
		for gid := uint64(1); gid <= uint64(groups); gid++ {
			c.createGroup(id, gid, GroupConfig{ID: gid, Peers: []uint64{1, 2, 3}})
		}
	}
	settled := func() bool {
		for id := uint64(1); id <= 3; id++ {
			for _, g := range c.host(id).Groups() {
				s := g.Status()
				if s.Leader == 0 || quiesce && !s.Quiesced {
					return false
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !settled() {
		if time.Now().After(deadline) {
			b.Fatal("groups did not settle")
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.ResetTimer()
	const window = 5 * time.Second
	var total time.Duration
	for range b.N {
		before := cpuTime()
		time.Sleep(window) // the measurement period itself
		total += cpuTime() - before
	}
	perNode := total.Seconds() * 1000 / float64(b.N) / window.Seconds() / 3
	b.ReportMetric(perNode, "cpu-ms/s/node")
	b.ReportMetric(perNode/10, "cpu-%/node")
	var quiesced int
	for _, g := range c.host(1).Groups() {
		if g.Status().Quiesced {
			quiesced++
		}
	}
	b.ReportMetric(float64(quiesced), "quiesced-groups/node1")
}
