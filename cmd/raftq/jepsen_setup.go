package main

import "github.com/raftq/raftq/jepsen"

// jepsenDurability names a jepsen run's effective durability in the
// bench's terms (durability): the nodes' --fsync for a raft topic, the
// flush configs (-c) for an isr one, so that every verdict carries the
// policy it was reached under beside the run's setup (jepsen.Setup).
func jepsenDurability(c jepsen.RaftqConfig) string {
	return durability(c.Run.Workload.TopicConfigs, c.Fsync)
}
