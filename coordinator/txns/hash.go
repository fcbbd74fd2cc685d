package txns

import "github.com/raftq/raftq/coordinator/groups"

// PartitionFor returns the __transaction_state partition of a
// transactional id among n, as Kafka computes it
// (Utils.abs(transactionalId.hashCode()) % n): the formula that places
// consumer groups, shared with groups.PartitionFor rather than copied.
func PartitionFor(transactionalID string, n int32) int32 {
	return groups.PartitionFor(transactionalID, n)
}
