package main

import (
	"strings"
	"testing"

	"github.com/raftq/raftq/broker"
)

func TestNodeLine(t *testing.T) {
	b := broker.BrokerStatus{ID: 2, KafkaAddr: "k:2", AdminAddr: "a:2", Alive: true}
	up := &broker.Status{Fsync: "always", WAL: "shared", Partitions: make([]broker.PartitionStatus, 4)}
	for _, c := range []struct {
		name     string
		alive    bool
		draining bool
		s        *broker.Status
		want     string
	}{
		{"up", true, false, up, "2 k:2 a:2 true true always shared 4"},
		{"in controlled shutdown", true, true, up, "2 k:2 a:2 draining true always shared 4"},
		{"stopped after its drain", false, true, nil, "2 k:2 a:2 false false - - -"},
		// Killed: the metadata still says alive until heartbeats time out.
		{"killed, not yet marked dead", true, false, nil, "2 k:2 a:2 unknown false - - -"},
		{"dead", false, false, nil, "2 k:2 a:2 false false - - -"},
		{"marked dead but answering", false, false, up, "2 k:2 a:2 false true always shared 4"},
	} {
		b.Alive, b.ShuttingDown = c.alive, c.draining
		if got := strings.Join(strings.Split(nodeLine(b, c.s), "\t"), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestPartitionLine(t *testing.T) {
	rep := func(role string, term uint64, hw int64) broker.PartitionStatus {
		return broker.PartitionStatus{Topic: "t", GroupStatus: broker.GroupStatus{Role: role, Term: term, Leader: 1},
			Replicas: []uint64{1, 2, 3}, HighWatermark: hw}
	}
	k := partKey{"t", 0}
	for _, c := range []struct {
		name string
		reps map[uint64]broker.PartitionStatus
		want string
	}{
		{"steady", map[uint64]broker.PartitionStatus{1: rep("leader", 5, 10), 2: rep("follower", 5, 10), 3: rep("follower", 5, 7)},
			"t 0 1 5 10 0 1:0 2:0 3:3 "},
		// Just elected after a kill: the new leader has not yet committed
		// in its term, so its high watermark trails a follower's, and
		// node 3 (killed) answers nothing.
		{"new leader behind a follower", map[uint64]broker.PartitionStatus{1: rep("leader", 6, 8), 2: rep("follower", 6, 10)},
			"t 0 1 6 8 0 1:0 2:unknown 3:unknown "},
		// A follower that has not heard of the new term.
		{"follower in an older term", map[uint64]broker.PartitionStatus{1: rep("leader", 6, 10), 2: rep("follower", 5, 9), 3: rep("follower", 6, 9)},
			"t 0 1 6 10 0 1:0 2:unknown 3:1 "},
		// The leader read is older than a follower that has seen a newer term.
		{"follower in a newer term", map[uint64]broker.PartitionStatus{1: rep("leader", 6, 10), 2: rep("candidate", 7, 10), 3: rep("follower", 6, 10)},
			"t 0 1 6 10 0 1:0 2:unknown 3:0 "},
		{"no leader", map[uint64]broker.PartitionStatus{2: rep("follower", 6, 10)}, "t 0 none - - - -"},
	} {
		if got := strings.Join(strings.Split(partitionLine(k, c.reps), "\t"), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestISRPartitionLine(t *testing.T) {
	rep := func(role string, epoch int32, isr []uint64, followers ...broker.FollowerLag) broker.PartitionStatus {
		return broker.PartitionStatus{Topic: "t", GroupStatus: broker.GroupStatus{Mode: "isr", Role: role, Term: uint64(epoch),
			Leader: 1, LeaderEpoch: epoch, ISR: isr, ELR: nil, Followers: followers}, Replicas: []uint64{1, 2, 3}, HighWatermark: 10}
	}
	k := partKey{"t", 0}
	for _, c := range []struct {
		name string
		reps map[uint64]broker.PartitionStatus
		want string
	}{
		{"steady", map[uint64]broker.PartitionStatus{
			1: rep("leader", 3, []uint64{1, 2}, broker.FollowerLag{ID: 2, Lag: 0, SinceCaughtUpMs: 20, InISR: true},
				broker.FollowerLag{ID: 3, Lag: 120, SinceCaughtUpMs: 31000}),
			2: rep("follower", 3, []uint64{1, 2})},
			"t 0 1 3 10 0 [1 2] [] 2:0/0s 3:120/31s"},
		{"a follower before its first fetch", map[uint64]broker.PartitionStatus{
			1: rep("leader", 3, []uint64{1}, broker.FollowerLag{ID: 2, Lag: -1, SinceCaughtUpMs: -1})},
			"t 0 1 3 10 0 [1] [] 2:unknown"},
		{"the leader did not answer", map[uint64]broker.PartitionStatus{2: rep("follower", 4, []uint64{2, 3})},
			"t 0 none 4 - - [2 3] [] -"},
	} {
		if got := strings.Join(strings.Split(isrPartitionLine(k, c.reps), "\t"), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
