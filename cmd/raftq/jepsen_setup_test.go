package main

import (
	"testing"

	"github.com/raftq/raftq/jepsen"
)

// A jepsen run names its durability: the nodes' --fsync for the default
// raft topic, the flush configs for an isr one.
func TestJepsenDurability(t *testing.T) {
	c := jepsen.DefaultRaftqConfig()
	c.Fsync = jepsen.FsyncNever
	if got := jepsenDurability(c); got != "raft:fsync-never" {
		t.Errorf("raft run: %q", got)
	}
	c.Run.Workload.TopicConfigs = map[string]string{"replication.mode": "isr", "min.insync.replicas": "2"}
	if got := jepsenDurability(c); got != "isr:flush-never(kafka-default)" {
		t.Errorf("isr run: %q", got)
	}
	c.Run.Workload.TopicConfigs["flush.messages"] = "1"
	if got := jepsenDurability(c); got != "isr:flush.messages=1" {
		t.Errorf("isr run with flush.messages=1: %q", got)
	}
}
