package broker

import (
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// raftOf returns the raft group behind a hosted replica of a raft-mode
// partition, for tests that drive raft itself.
func raftOf(r *replica) *raftgroup.Group {
	if r.offsets != nil {
		return r.offsets.group.g
	}
	if r.txns != nil {
		return r.txns.group.g
	}
	return r.data.repl.(*raftReplication).g
}

// logOf returns a data partition replica's log.
func logOf(r *replica) *partition.Log { return r.data.repl.Log() }
