package broker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/raftq/raftq/coordinator"
)

// reconcileLoop keeps the local replicas equal to what the metadata
// places on this node: it opens the missing ones and removes those of
// deleted topics, whenever the metadata changes (and every few seconds, to
// retry what failed).
func (n *Node) reconcileLoop(ctx context.Context) {
	for {
		changed := n.meta.Changed()
		n.reconcile(n.meta.View())
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return
		}
	}
}

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
		if have && !closed {
			n.applyTopicConfigs(r, ref.Topic)
		}
		if have || closed {
			continue
		}
		r, err := n.openReplica(ref)
		if err != nil {
			n.log.Error("open partition replica", "topic", ref.Topic.Name, "partition", ref.Partition.Index, "err", err)
			continue
		}
		n.mu.Lock()
		n.replicas[gid] = r
		n.mu.Unlock()
		n.log.Info("hosting partition", "topic", r.topic, "partition", r.index, "group", r.gid)
	}
	n.sweepOrphans(s, want)
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
