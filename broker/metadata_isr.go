package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

// isrPartitionMetadata answers Metadata for an ISR partition from group
// 0's state, which is authoritative in ISR mode: the leader it elected
// and its leader epoch, the ISR it committed, and as offline the replicas
// of brokers it does not hold alive (or this node's, if it failed to open
// here). The ELR is not in Metadata, as in Kafka; /v1/status shows it.
func (n *Node) isrPartitionMetadata(st *coordinator.State, p *coordinator.Partition) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition = p.Index
	selfOffline := p.HasReplica(n.cfg.NodeID) && n.isOffline(p.Group)
	live := func(id uint64) bool {
		b, ok := st.Brokers[id]
		return ok && b.Alive && !(selfOffline && id == n.cfg.NodeID)
	}
	mp.Leader, mp.LeaderEpoch = -1, epochOf(p.LeaderTerm)
	if p.Leader != 0 && live(p.Leader) {
		mp.Leader = int32(p.Leader)
	} else {
		mp.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	for _, id := range p.Replicas {
		mp.Replicas = append(mp.Replicas, int32(id))
		if !live(id) {
			mp.OfflineReplicas = append(mp.OfflineReplicas, int32(id))
		}
	}
	mp.ISR = []int32{}
	for _, id := range p.ISR {
		mp.ISR = append(mp.ISR, int32(id))
	}
	return mp
}
