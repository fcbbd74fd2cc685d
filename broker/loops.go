package broker

import (
	"context"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/internal/periodic"
)

// The control plane's loops (registration, reconcile, leadership hints,
// learners and liveness, leader balance) belong to coordinator.Controller;
// the node gives it its replicas (as coordinator.LocalReplica) and its
// reconcile step. The loops here act on the node's own replicas.

var _ coordinator.LocalReplica = (*replica)(nil)

// Group is the replica's raft group id.
func (r *replica) Group() uint64 { return r.gid }

// LeaderTerm reports whether this node leads the partition, and its
// leader epoch.
func (r *replica) LeaderTerm() (bool, uint64) {
	l := r.lead.Leadership()
	return l.IsLeader, uint64(l.Epoch)
}

// TransferLeadership hands the partition's leadership to node to.
func (r *replica) TransferLeadership(ctx context.Context, to uint64) error {
	return r.lead.TransferLeadership(ctx, to)
}

func (n *Node) localReplicas() []coordinator.LocalReplica {
	rs := n.replicaList()
	out := make([]coordinator.LocalReplica, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// retentionLoop has each partition leader apply retention: it moves the
// log start forward on every replica.
func (n *Node) retentionLoop(ctx context.Context) {
	periodic.Every(ctx, n.cfg.RetentionCheckInterval, func() {
		for _, r := range n.replicaList() {
			n.applyRetention(ctx, r)
		}
	})
}

func (n *Node) applyRetention(ctx context.Context, r *replica) {
	if r.data == nil || !r.data.repl.Leadership().IsLeader {
		return
	}
	repl := r.data.repl
	l := repl.Log()
	off := l.RetentionOffset()
	if off <= l.StartOffset() {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := repl.AdvanceStart(pctx, off)
	n.log.Info("retention", "topic", r.topic, "partition", r.index, "log_start", off, "err", err)
}
