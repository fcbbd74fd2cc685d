package main

import (
	"fmt"

	"github.com/raftq/raftq/broker"
)

// metadataMembers is the line of cluster status that names group 0's
// voters and learners, as the node asked sees them, and the old voters
// while a joint configuration change is under way.
func metadataMembers(s broker.Status) string {
	line := fmt.Sprintf("metadata voters %s  learners %s", ids(s.Metadata.Voters), ids(s.Metadata.Learner))
	if len(s.Metadata.VotersOutgoing) > 0 {
		line += fmt.Sprintf("  (changing from voters %s)", ids(s.Metadata.VotersOutgoing))
	}
	return line
}
