package broker

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/raftq/raftq/coordinator"
)

// reconcile keeps the local replicas equal to what the metadata places
// on this node: it opens the missing ones, removes those of deleted
// topics and brings open ones to their topic's configs and, for ISR
// partitions, to group 0's leader, epochs and ISR. The controller's
// reconcile loop calls it on every metadata change, and every few seconds
// to retry what failed.
func (n *Node) reconcile(s *coordinator.State) {
	want := map[uint64]coordinator.PartitionRef{}
	for _, ref := range s.PartitionsOf(n.cfg.NodeID) {
		want[ref.Partition.Group] = ref
	}
	for _, r := range n.replicaList() {
		if _, ok := want[r.gid]; !ok && r.gid < s.NextGroup {
			n.dropReplica(r)
		}
	}
	for gid, ref := range want {
		n.mu.Lock()
		r, have := n.replicas[gid]
		closed := n.closed
		n.mu.Unlock()
		if closed {
			continue
		}
		if have {
			n.applyTopicConfigs(r, ref.Topic)
			n.updateISR(r, s, ref)
			continue
		}
		r, err := n.openReplica(ref)
		if err != nil {
			n.log.Error("open partition replica", "topic", ref.Topic.Name, "partition", ref.Partition.Index, "err", err)
			n.noteOffline(gid, ref, err)
			continue
		}
		n.mu.Lock()
		n.replicas[gid] = r
		delete(n.offline, gid)
		n.mu.Unlock()
		n.updateISR(r, s, ref)
		n.log.Info("hosting partition", "topic", r.topic, "partition", r.index, "group", r.gid)
	}
	n.forgetOffline(want)
	n.sweepOrphans(s, want)
}

// OfflineReplica is a replica the metadata places on this node that it
// cannot open (a damaged log, a full disk): the node takes no part in the
// partition's raft group until a retry succeeds (reconcile retries every
// few seconds). Metadata reports it offline, /v1/status and cluster
// status name it with its error, and raftq_offline_replicas counts them.
type OfflineReplica struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Error     string    `json:"error"`
	Since     time.Time `json:"since"`
}

func (n *Node) noteOffline(gid uint64, ref coordinator.PartitionRef, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	since := time.Now()
	if o, ok := n.offline[gid]; ok {
		since = o.Since
	}
	n.offline[gid] = OfflineReplica{Topic: ref.Topic.Name, Partition: ref.Partition.Index, Error: err.Error(), Since: since}
}

// forgetOffline drops failures of replicas no longer placed here.
func (n *Node) forgetOffline(want map[uint64]coordinator.PartitionRef) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for gid := range n.offline {
		if _, ok := want[gid]; !ok {
			delete(n.offline, gid)
		}
	}
}

// isOffline reports whether this node failed to open its replica of gid.
func (n *Node) isOffline(gid uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.offline[gid]
	return ok
}

// offlineReplicas lists the replicas this node failed to open.
func (n *Node) offlineReplicas() []OfflineReplica {
	n.mu.Lock()
	out := make([]OfflineReplica, 0, len(n.offline))
	for _, o := range n.offline {
		out = append(out, o)
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out
}

// dropReplica removes a replica whose topic was deleted, with its data.
func (n *Node) dropReplica(r *replica) {
	n.mu.Lock()
	delete(n.replicas, r.gid)
	n.mu.Unlock()
	if err := n.closeReplica(r, true); err != nil {
		n.log.Warn("remove partition replica", "topic", r.topic, "partition", r.index, "err", err)
		return
	}
	n.log.Info("removed partition", "topic", r.topic, "partition", r.index, "group", r.gid)
}

// sweepOrphans removes data of groups that the metadata has deleted while
// this node was down: a group id below NextGroup that no partition uses
// any more was deleted for good (ids are never reused).
func (n *Node) sweepOrphans(s *coordinator.State, want map[uint64]coordinator.PartitionRef) {
	orphan := func(gid uint64) bool {
		_, ok := want[gid]
		return !ok && gid != coordinator.MetadataGroup && gid < s.NextGroup
	}
	logs, _ := os.ReadDir(filepath.Join(n.cfg.DataDir, "log"))
	for _, e := range logs {
		dir := filepath.Join(n.cfg.DataDir, "log", e.Name())
		if gid, ok := markerGroup(dir); ok && orphan(gid) && n.replicaByGroup(gid) == nil {
			n.log.Info("removing data of a deleted partition", "dir", dir, "group", gid)
			_ = os.RemoveAll(dir)
		}
	}
	rafts, _ := os.ReadDir(filepath.Join(n.cfg.DataDir, "raft"))
	for _, e := range rafts {
		gid, err := strconv.ParseUint(e.Name(), 10, 64)
		if err == nil && orphan(gid) && n.host.Group(gid) == nil {
			if err := n.host.DropGroupData(gid); err != nil {
				n.log.Warn("removing raft data of a deleted partition", "group", gid, "err", err)
			}
		}
	}
}

func (n *Node) replicaByGroup(gid uint64) *replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[gid]
}
