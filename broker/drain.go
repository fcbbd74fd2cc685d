package broker

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/raftq/raftq/coordinator"
)

// Drain, before a node stops (raftq server on SIGTERM), hands every
// leadership it holds to other replicas while it still serves, so that a
// rolling restart reaches clients as latency, not errors: a produce that
// reaches a partition no longer led here is answered with the new leader.

// drainConcurrency bounds the leadership transfers under way at once.
const drainConcurrency = 8

// drainPoll is the pause between drain rounds while partitions are left:
// ISR partitions waiting for their new role from reconcile, raft ones
// for a successor or after a transfer that failed.
const drainPoll = 50 * time.Millisecond

// drainQuiet and drainLingerMax bound the drain's last step: the node
// serves on until neither the move of its leaderships nor its last
// produce request is drainQuiet old, for at most drainLingerMax. A
// client learns that a partition moved only when it next produces there,
// and franz-go's sticky partitioner moves on to another partition every
// 64 KiB: every 30 ms at 20k records/s of 100 B, every 300 ms at 2k/s,
// so that it takes seconds to touch all six partitions of a topic at the
// lower rate.
const (
	drainQuiet     = time.Second
	drainLingerMax = 5 * time.Second
)

// DrainReport is what Drain did.
type DrainReport struct {
	Led   int      // partitions this node led when the drain began
	Moved int      // of those, how many it no longer led at the end (an ISR one it alone was in sync for is leaderless then)
	Left  []uint64 // raft groups of the partitions it still led at the end
	// MetadataTo is the node group 0's leadership went to; 0 when this
	// node did not lead group 0 or could not hand it over.
	MetadataTo uint64
	// Lingered is how long the node served on for clients still sending
	// it produce requests.
	Lingered time.Duration
	Took     time.Duration
}

// Drain moves this node's leaderships elsewhere, in four steps, and
// returns once none of those left can move (none is left, or nobody
// eligible can take them) and clients have stopped sending to it, or
// when ctx ends, logging what it did:
//  1. it proposes its controlled shutdown to group 0
//     (coordinator.Controller.ControlledShutdown): the ISR partitions it
//     leads elect new leaders from their ISR less this node, which leaves
//     every ISR, so that acks=all on them stops waiting for it, and no
//     leader balance hands it a partition back;
//  2. it transfers each raft partition it leads (data or
//     __consumer_offsets) to the eligible voter whose log holds the most
//     (successor), drainConcurrency at a time, in rounds until none is
//     led here, since an election may bring one back; meanwhile the ISR
//     replicas learn their new role from reconcile;
//  3. group 0's leadership goes to another voter, since the steps
//     before proposed through it;
//  4. last, it serves on while clients still send it produce requests
//     (lingerForClients), so that they learn where their partitions went
//     from the answers rather than from a closed connection.
//
// The node keeps serving throughout; Close follows.
func (n *Node) Drain(ctx context.Context) DrainReport {
	start := time.Now()
	rep := n.movePartitions(ctx)
	to, err := n.handOffMetadata(ctx)
	if err != nil {
		n.log.Warn("metadata leadership not handed over", "to", to, "err", err)
	} else {
		rep.MetadataTo = to
	}
	var moved time.Time // clients may still send to what moved from here
	if rep.Moved > 0 {
		moved = time.Now()
	}
	rep.Lingered = n.lingerForClients(ctx, moved)
	rep.Took = time.Since(start)
	n.logDrain(rep)
	return rep
}

// movePartitions runs the drain's first two steps and reports what moved.
func (n *Node) movePartitions(ctx context.Context) DrainReport {
	before := n.ledGroups()
	err := n.ctl.ControlledShutdown(ctx)
	if err != nil {
		n.log.Warn("controlled shutdown not committed; ISR partitions stay led here", "err", err)
	}
	n.moveLeaders(ctx, err == nil)
	rep := DrainReport{Led: len(before), Left: n.ledGroups()}
	for _, g := range before {
		if !slices.Contains(rep.Left, g) {
			rep.Moved++
		}
	}
	return rep
}

func (n *Node) logDrain(rep DrainReport) {
	args := []any{"led", rep.Led, "moved", rep.Moved, "left", len(rep.Left), "metadata_to", rep.MetadataTo,
		"lingered", rep.Lingered.Round(time.Millisecond), "took", rep.Took.Round(time.Millisecond)}
	if len(rep.Left) > 0 {
		n.log.Warn("leadership drain ended with partitions still led here (no eligible replica to take them, or the timeout ran out)",
			append(args, "left_groups", rep.Left)...)
		return
	}
	n.log.Info("leadership drained", args...)
}

// ledGroups lists the raft groups of the partitions this node leads.
func (n *Node) ledGroups() []uint64 {
	var out []uint64
	for _, r := range n.replicaList() {
		if r.lead.Leadership().IsLeader {
			out = append(out, r.gid)
		}
	}
	slices.Sort(out)
	return out
}

// moveLeaders runs hand-over rounds until none of the partitions this
// node leads can move or ctx ends: a raft partition moves while it has a
// successor, an ISR one (group 0 elects elsewhere) once the controlled
// shutdown is committed (isrMoves).
func (n *Node) moveLeaders(ctx context.Context, isrMoves bool) {
	for {
		if n.handOffRound(ctx, n.ledReplicas(), isrMoves) == 0 {
			return
		}
		select {
		case <-time.After(drainPoll):
		case <-ctx.Done():
			return
		}
	}
}

// ledReplicas lists the replicas this node leads.
func (n *Node) ledReplicas() []*replica {
	var led []*replica
	for _, r := range n.replicaList() {
		if r.lead.Leadership().IsLeader {
			led = append(led, r)
		}
	}
	return led
}

// handOffRound transfers each of led that has a successor, at most
// drainConcurrency at once, each attempt bounded by transferTimeout, and
// waits for them. A successor is one not in maintenance if any eligible
// one is. It
// returns how many of led may still move: those it transferred, and the
// ISR ones if isrMoves.
func (n *Node) handOffRound(ctx context.Context, led []*replica, isrMoves bool) (moving int) {
	st := n.meta.View()
	eligible := n.drainEligible(st)
	maintenance := st.InMaintenance()
	sem := make(chan struct{}, drainConcurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, r := range led {
		ref, ok := st.PartitionByGroup(r.gid)
		if ok && ref.Topic.IsISR() && isrMoves {
			moving++ // reconcile will pass group 0's new leader on
		}
		if !ok || ref.Topic.IsISR() {
			continue
		}
		candidates := slices.DeleteFunc(slices.Clone(ref.Partition.Replicas), func(id uint64) bool { return !eligible(id) })
		to := r.lead.successor(slices.DeleteFunc(slices.Clone(candidates), func(id uint64) bool { return id == maintenance }))
		if to == 0 {
			to = r.lead.successor(candidates)
		}
		if to == 0 {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return moving
		}
		moving++
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n.transferOnce(ctx, r, to)
		}()
	}
	return moving
}

func (n *Node) transferOnce(ctx context.Context, r *replica, to uint64) {
	tctx, cancel := context.WithTimeout(ctx, n.transferTimeout())
	defer cancel()
	if err := r.lead.TransferLeadership(tctx, to); err != nil {
		n.log.Debug("drain transfer", "topic", r.topic, "partition", r.index, "to", to, "err", err)
	}
}

// handOffMetadata hands group 0's leadership over if this node holds it,
// in up to three attempts (a transfer raft gave up, or one to a voter
// that has since gone, is tried again).
func (n *Node) handOffMetadata(ctx context.Context) (to uint64, err error) {
	for range 3 {
		tctx, cancel := context.WithTimeout(ctx, n.transferTimeout())
		to, err = n.ctl.HandOffMetadata(tctx, n.drainEligible(n.meta.View()))
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	return to, err
}

// lingerForClients serves on until neither a produce request nor moved
// (when leaderships moved from here; zero if none did) is drainQuiet
// old, at most drainLingerMax or until ctx ends, and returns how long it
// waited. A client learns that a partition moved from the answer to its
// next produce there (NOT_LEADER_OR_FOLLOWER with the new leader,
// KIP-951); a request that Close cut off instead, in flight or not yet
// read, or a first one to the closed node, is retried only after a
// metadata refresh, which franz-go spaces by its MetadataMinAge (5 s).
func (n *Node) lingerForClients(ctx context.Context, moved time.Time) time.Duration {
	start := time.Now()
	for {
		last := time.Unix(0, n.metrics.lastProduce.Load())
		if moved.After(last) {
			last = moved
		}
		quiet := time.Since(last)
		left := drainLingerMax - time.Since(start)
		if quiet >= drainQuiet || left <= 0 {
			return time.Since(start)
		}
		select {
		case <-time.After(min(drainQuiet-quiet, left)):
		case <-ctx.Done():
			return time.Since(start)
		}
	}
}

// transferTimeout bounds one leadership transfer: two election timeouts,
// since raft gives a transfer up after one.
func (n *Node) transferTimeout() time.Duration {
	return 2 * time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval
}

// drainEligible reports, in the metadata st, whether a node may take a
// leadership over from this draining one: another broker, alive and not
// in controlled shutdown itself, that this node hears from now.
func (n *Node) drainEligible(st *coordinator.State) func(id uint64) bool {
	peers := n.peer.Stats().Peers
	return func(id uint64) bool {
		b, ok := st.Brokers[id]
		return ok && id != n.cfg.NodeID && b.Eligible() && peers[id].Connected
	}
}
