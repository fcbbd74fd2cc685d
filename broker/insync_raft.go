package broker

import (
	"slices"
	"time"

	"github.com/raftq/raftq/coordinator"
)

// Raft topics' ISR, as Metadata reports it. Raft needs no ISR, but Kafka
// tools read under-replication from it (kafka-topics
// --under-replicated-partitions, UnderReplicatedPartitions), so Metadata
// lists the replicas whose log is within ReplicaLagTimeMax of the
// leader's. Only the raft leader knows its followers' progress: the
// leader's node answers from it (raftgroup.Group.Progress, Kafka's
// lastCaughtUpTime rule), every other node from what the metadata says,
// every replica that is alive and not offline. The metric
// raftq_under_replicated_partitions{mode="raft"} counts the partitions led
// here that have a replica out of sync by the same rule (DESIGN.md,
// "Raft topics' ISR").

// laggingVoters is implemented by the raft replications: the replicas of
// a partition this node leads whose log has not held everything the
// leader's held for longer than lag. ok is false when this node does not
// lead the partition.
type laggingVoters interface {
	lagging(now time.Time, lag time.Duration) (ids map[uint64]bool, ok bool)
}

var (
	_ laggingVoters = (*raftGroup)(nil)
	_ laggingVoters = (*raftReplication)(nil)
)

// laggingReplicas returns the replicas of p that this node, leading p's
// raft group, sees lagging; nil when it sees none or does not lead p (an
// ISR-mode partition's ISR comes from group 0 instead).
func (n *Node) laggingReplicas(p *coordinator.Partition) map[uint64]bool {
	r := n.replicaByGroup(p.Group)
	if r == nil {
		if p.Moving() {
			return movingOutOfSync(p, nil, false, nil)
		}
		return nil
	}
	lv, ok := r.lead.(laggingVoters)
	if !ok {
		return nil
	}
	ids, leads := lv.lagging(time.Now(), n.cfg.ReplicaLagTimeMax)
	if p.Moving() {
		ids = movingOutOfSync(p, r, leads, ids)
	}
	return ids
}

// movingOutOfSync adds to ids the replicas of a moving partition that
// do not vote in its raft group, and so are not in sync: those the
// leader's configuration lacks or holds as learners, or, on another
// node, the replicas the move adds.
func movingOutOfSync(p *coordinator.Partition, r *replica, leads bool, ids map[uint64]bool) map[uint64]bool {
	out := map[uint64]bool{}
	for id := range ids {
		out[id] = true
	}
	outside := p.Adding()
	if leads {
		g := r.Raft()
		st := g.Status() // leads: a raft replica
		outside = nil
		for _, id := range p.Replicas {
			if !slices.Contains(st.Voters, id) && !slices.Contains(st.VotersOutgoing, id) {
				outside = append(outside, id)
			}
		}
	}
	for _, id := range outside {
		out[id] = true
	}
	return out
}

// underReplicatedRaft counts the raft partitions this node leads that
// have a replica out of sync: lagging by more than ReplicaLagTimeMax, or
// not alive in the metadata.
func (n *Node) underReplicatedRaft() int {
	st := n.meta.View()
	now := time.Now()
	count := 0
	for _, r := range n.replicaList() {
		lv, ok := r.lead.(laggingVoters)
		if !ok {
			continue
		}
		lagging, leads := lv.lagging(now, n.cfg.ReplicaLagTimeMax)
		ref, known := st.PartitionByGroup(r.gid)
		if !leads || !known {
			continue
		}
		if len(lagging) > 0 || !allAlive(st, ref.Partition.Replicas) {
			count++
		}
	}
	return count
}

func allAlive(st *coordinator.State, ids []uint64) bool {
	for _, id := range ids {
		if b, ok := st.Brokers[id]; !ok || !b.Alive {
			return false
		}
	}
	return true
}
