package main

import (
	"testing"

	"github.com/raftq/raftq/jepsen"
)

// A jepsen run's setup names its durability: the nodes' --fsync for the
// default raft topic, the flush configs for an isr one.
func TestJepsenSetup(t *testing.T) {
	c := jepsen.DefaultRaftqConfig()
	c.Fsync = jepsen.FsyncNever
	c.Run.Workload.ReplicationFactor = 3
	got := jepsenSetup(c, nil)
	want := map[string]string{"nodes": "5", "raftq.fsync": "never", "acks": "all", "topic.replication.factor": "3",
		"topic.replication.mode": "raft", "durability": "raft:fsync-never"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("setup %s = %q, want %q (%v)", k, got[k], v, got)
		}
	}
	isr := jepsenSetup(c, map[string]string{"replication.mode": "isr", "min.insync.replicas": "2"})
	if isr["durability"] != "isr:flush-never(kafka-default)" || isr["topic.min.insync.replicas"] != "2" {
		t.Errorf("an isr run's setup %v", isr)
	}
}
