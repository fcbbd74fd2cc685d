package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Decommissioning empties a broker before it leaves for good
// (Redpanda's decommission, Kafka's kafka-reassign-partitions run for a
// broker): Decommission marks it, placement stops choosing it, and the
// metadata leader moves its replicas away a few partitions at a time
// (Controller.decommissionLoop), each an ordinary reassignment. Turning
// it off (recommission) cancels the moves still taking replicas off it.
// Once it holds nothing, RemoveBroker deletes its registration and bars
// its data directory's incarnation from registering again; a node
// started on an empty data directory may then take the id.

// Decommission starts (On) or cancels the decommissioning of broker ID.
type Decommission struct {
	ID uint64 `json:"id"`
	On bool   `json:"on"`
}

// RemoveBroker deletes broker ID, which must hold no replica: it was
// decommissioned, or lost everything it held.
type RemoveBroker struct {
	ID uint64 `json:"id"`
}

func (s *State) decommission(d *Decommission) Result {
	b, ok := s.Brokers[d.ID]
	if !ok {
		return Result{Err: cmdErr(kerr.BrokerNotAvailable, "broker %d is not registered", d.ID)}
	}
	if d.On && !b.Decommissioned {
		rest, need := s.keptBrokers(d.ID), s.maxReplicationFactor()
		if rest == 0 {
			return Result{Err: cmdErr(kerr.InvalidRequest, "broker %d is the last one not decommissioned", d.ID)}
		}
		if rest < need {
			return Result{Err: cmdErr(kerr.InvalidReplicationFactor,
				"decommissioning broker %d leaves %d brokers, and a topic has %d replicas per partition", d.ID, rest, need)}
		}
	}
	nb := *b
	nb.Decommissioned = d.On
	s.Brokers[d.ID] = &nb
	if !d.On {
		s.cancelMovesOff(d.ID)
	}
	return Result{}
}

// keptBrokers counts the brokers not decommissioned, other than id.
func (s *State) keptBrokers(id uint64) int {
	n := 0
	for bid, b := range s.Brokers {
		if bid != id && !b.Decommissioned {
			n++
		}
	}
	return n
}

func (s *State) maxReplicationFactor() int {
	most := 0
	for _, t := range s.Topics {
		for _, p := range t.Partitions {
			rf := len(p.Replicas)
			if p.Moving() {
				rf = len(p.Target) // Replicas holds the way back too
			}
			most = max(most, rf)
		}
	}
	return most
}

// cancelMovesOff cancels the moves taking a replica off broker id.
func (s *State) cancelMovesOff(id uint64) {
	for _, name := range s.TopicNames() {
		t := s.Topics[name]
		for _, p := range t.Partitions {
			if !p.Moving() || !slices.Contains(p.Original, id) || slices.Contains(p.Target, id) {
				continue
			}
			n, _ := cancelMove(p)
			if t.IsISR() {
				n = s.finishISRMove(t, s.bumpReplicaChange(p, n))
			}
			s.putPartition(t, n)
			t = s.Topics[name]
		}
	}
}

func (s *State) removeBroker(r *RemoveBroker) Result {
	b, ok := s.Brokers[r.ID]
	switch {
	case !ok:
		return Result{Err: cmdErr(kerr.BrokerNotAvailable, "broker %d is not registered", r.ID)}
	case len(s.PartitionsOf(r.ID)) > 0:
		return Result{Err: cmdErr(kerr.InvalidRequest, "broker %d still holds %d partition replicas: decommission it first", r.ID, len(s.PartitionsOf(r.ID)))}
	}
	delete(s.Brokers, r.ID)
	if _, ok := s.Admitted[r.ID]; ok {
		admitted := maps.Clone(s.Admitted) // replaced on write
		delete(admitted, r.ID)
		s.Admitted = admitted
	}
	if b.Incarnation != "" {
		s.RemovedIncarnations = append(slices.Clip(s.RemovedIncarnations), b.Incarnation)
	}
	s.Removed = slices.Sorted(slices.Values(append(slices.Clip(s.Removed), r.ID)))
	return Result{}
}

// DecommissionMove is the next move off a decommissioned broker of
// partition p: id replaced, in its place, by the eligible broker holding
// the fewest replicas (by load, replicaLoad's) that p lacks; ok is false
// when none is.
func (s *State) DecommissionMove(p *Partition, id uint64, load map[uint64]int) (target []uint64, ok bool) {
	var best uint64
	for _, bid := range s.BrokerIDs() {
		b := s.Brokers[bid]
		if !b.Eligible() || b.Decommissioned || p.HasReplica(bid) {
			continue
		}
		if best == 0 || load[bid] < load[best] {
			best = bid
		}
	}
	if best == 0 {
		return nil, false
	}
	target = slices.Clone(p.Replicas)
	target[slices.Index(target, id)] = best
	return target, true
}

// decommissionMoves bounds the moves off decommissioned brokers under way
// at once, so that their catch-up traffic does not swamp the cluster.
const decommissionMoves = 4

// moveOffDecommissioned starts moves of the replicas of decommissioned
// brokers, up to decommissionMoves under way (the metadata leader's
// housekeeping, after each apply's state).
func (c *Controller) moveOffDecommissioned(ctx context.Context) {
	s := c.cfg.Metadata.View()
	if b := s.Brokers[c.cfg.NodeID]; b != nil && b.Decommissioned {
		// Its vote goes too (changeVoters demotes a leaving voter), but
		// never the leader's: hand the leadership over first.
		hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		to, err := c.HandOffMetadata(hctx, func(id uint64) bool {
			b, ok := s.Brokers[id]
			return ok && b.Eligible() && !b.Decommissioned
		})
		cancel()
		c.log.Info("decommissioned: metadata leadership handed over", "to", to, "err", err)
	}
	var decommissioned []uint64
	for _, id := range s.BrokerIDs() {
		if s.Brokers[id].Decommissioned {
			decommissioned = append(decommissioned, id)
		}
	}
	if len(decommissioned) == 0 {
		return
	}
	var items []ReassignItem
	busy := 0
	load, _ := s.replicaLoad() // counted once a round, and as moves are chosen
	for _, id := range decommissioned {
		for _, ref := range s.PartitionsOf(id) {
			p := ref.Partition
			if p.Moving() {
				busy++
				continue
			}
			if len(items)+busy >= decommissionMoves {
				continue
			}
			if target, ok := s.DecommissionMove(p, id, load); ok {
				items = append(items, ReassignItem{Topic: ref.Topic.Name, Partition: p.Index, Replicas: target})
				load[target[slices.Index(p.Replicas, id)]]++
			}
		}
	}
	if len(items) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := c.Propose(pctx, &Command{ReassignPartitions: &ReassignPartitions{Items: items, AllowReplicationFactorChange: true}})
	for i, it := range items {
		var itErr error
		if err == nil && i < len(res.Items) {
			itErr = res.Items[i].Err
		}
		c.log.Info("decommission move", "topic", it.Topic, "partition", it.Partition, "to", it.Replicas, "err", errors.Join(err, itErr))
	}
}

// pruneRemoved takes a removed broker out of group 0's configuration, one
// change at a time (the metadata leader's housekeeping): a learner is
// removed; a voter first loses its vote (changeVoters counts it as
// leaving).
func (c *Controller) pruneRemoved(ctx context.Context) {
	st := c.group.Status()
	removed := c.cfg.Metadata.View().Removed
	for _, id := range slices.Concat(st.Learners, st.LearnersNext) {
		if !slices.Contains(removed, id) || len(st.VotersOutgoing) > 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)}}}
		p, err := c.group.ProposeConfChange(pctx, cc)
		if err == nil {
			_, err = p.Wait(pctx)
		}
		cancel()
		c.log.Info("removed broker leaves the metadata group", "id", id, "err", err)
		return
	}
}
