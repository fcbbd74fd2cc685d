package main

import (
	"strconv"

	"github.com/raftq/raftq/jepsen"
)

// jepsenSetup describes what a jepsen run ran against, in the bench's
// setup terms (benchSetup), so that a verdict carries the durability
// policy it was reached under: the nodes, their --fsync, the producers'
// acks and idempotence, the topic's partitions and replication factor,
// and the effective durability (durability) of a topic with
// topicConfigs, nil for the broker defaults (raft).
func jepsenSetup(c jepsen.RaftqConfig, topicConfigs map[string]string) map[string]string {
	w := c.Run.Workload
	setup := map[string]string{
		"nodes":                    strconv.Itoa(c.Nodes),
		"raftq.fsync":              c.Fsync,
		"acks":                     w.Acks,
		"idempotent":               strconv.FormatBool(w.Idempotent),
		"topic.partitions":         strconv.Itoa(int(w.Partitions)),
		"topic.replication.factor": strconv.Itoa(int(w.ReplicationFactor)),
	}
	mode := topicConfigs["replication.mode"]
	if mode == "" {
		mode = "raft"
	}
	cfgs := map[string]string{"replication.mode": mode}
	for k, v := range topicConfigs {
		cfgs[k] = v
	}
	for k, v := range topicReplication(cfgs) {
		setup[k] = v
	}
	setup["durability"] = durability(cfgs, c.Fsync)
	return setup
}
