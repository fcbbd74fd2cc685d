package coordinator

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The rules of ISR mode (replication.mode=isr): group 0 is the only writer
// of each ISR partition's leader, leader epoch, ISR and ELR, as Kafka's
// KRaft controller is. Every function here touches ISR partitions only, so
// no entry of a log without one applies differently (doc.go, "Versions").

// initISR sets up t's partitions from index from on, just placed: every
// eligible replica (alive, not shutting down) is in sync (the log is
// empty) and the first of them leads. Kafka refuses the same way when no
// assigned replica is unfenced. Only the topic's own min.insync.replicas
// must fit its replication factor: a cluster default above it refuses
// acks=all writes instead, as in Kafka.
func (s *State) initISR(t *Topic, from int) error {
	if min, err := strconv.ParseInt(t.Configs["min.insync.replicas"], 10, 64); err == nil && min > int64(t.ReplicationFactor()) {
		return cmdErr(kerr.InvalidConfig, "min.insync.replicas %d exceeds the replication factor %d", min, t.ReplicationFactor())
	}
	for i := from; i < len(t.Partitions); i++ {
		p := &t.Partitions[i]
		for _, r := range p.Replicas {
			if s.Brokers[r].Eligible() {
				p.ISR = append(p.ISR, r)
			}
		}
		if len(p.ISR) == 0 {
			return cmdErr(kerr.InvalidReplicaAssignment, "partition %d: no replica of %v is alive to lead", i, p.Replicas)
		}
		p.Leader = firstLeader(p.ISR, s.InMaintenance())
	}
	return nil
}

// firstLeader is the first of isr that is not the broker in maintenance
// (0: none), or that broker when it is the only member.
func firstLeader(isr []uint64, maintenance uint64) uint64 {
	for _, id := range isr {
		if id != maintenance {
			return id
		}
	}
	return isr[0]
}

// forEachISR replaces each ISR partition by fn's result where fn reports a
// change, copying a topic once however many of its partitions change.
func (s *State) forEachISR(fn func(t *Topic, p Partition) (Partition, bool)) {
	for _, name := range s.TopicNames() {
		t := s.Topics[name]
		if !t.IsISR() {
			continue
		}
		var c *Topic
		for i, p := range t.Partitions {
			n, ok := fn(t, p)
			if !ok {
				continue
			}
			if c == nil {
				c = t.copy()
			}
			c.Partitions[i] = n
		}
		if c != nil {
			s.Topics[name] = c
		}
	}
}

// fenceISR takes broker id out of every ISR and elects where it led, as
// Kafka's handleBrokerFenced does: id stays only as an ISR's last member
// when ELR is off. With lostData (the broker restarted and may have lost
// its unflushed tail) it also leaves every ELR, as KIP-966's unclean
// shutdown does, and with forgetLeader it stops being any partition's
// last known leader (Broker.RestartForgetsLeader).
func (s *State) fenceISR(id uint64, lostData, forgetLeader bool) {
	s.forEachISR(func(t *Topic, p Partition) (Partition, bool) {
		if !slices.Contains(p.ISR, id) && !slices.Contains(p.ELR, id) && p.Leader != id && !reported(p, id) {
			return p, false
		}
		c := isrChange{setISR: true, isr: without(p.ISR, id)}
		if lostData {
			c.uncleanShutdown = id
		}
		if lostData && forgetLeader {
			c.restartedLeader = id
		}
		n := s.rules(t, id).build(p, c)
		return n, !samePartition(p, n)
	})
}

// unfenceISR elects a leader wherever broker id, now alive, may end a
// partition's leaderlessness (Kafka's handleBrokerUnfenced).
func (s *State) unfenceISR(id uint64) {
	s.forEachISR(func(t *Topic, p Partition) (Partition, bool) {
		if p.Leader != 0 || !p.HasReplica(id) {
			return p, false
		}
		n := s.rules(t, 0).build(p, isrChange{})
		return n, !samePartition(p, n)
	})
}

// reelectISR recomputes ELR and leader of t's partitions after a config
// change: min.insync.replicas moves the ELR threshold, and turning on
// unclean election may end a partition's leaderlessness (Kafka checks that
// periodically; apply does it at once).
func (s *State) reelectISR(t *Topic) {
	r := s.rules(t, 0)
	for i, p := range t.Partitions {
		t.Partitions[i] = r.build(p, isrChange{})
	}
}

func (s *State) alterPartition(a *AlterPartition) Result {
	if len(a.Items) == 0 {
		return Result{Err: cmdErr(kerr.InvalidRequest, "alter partition without items")}
	}
	res := Result{Items: make([]ItemResult, 0, len(a.Items))}
	for _, it := range a.Items {
		res.Items = append(res.Items, s.alterPartitionItem(it))
	}
	return res
}

// alterPartitionItem applies one item after Kafka's alterPartition: the
// new ISR goes through the same change builder as elections, so the ELR
// follows it.
func (s *State) alterPartitionItem(it AlterPartitionItem) ItemResult {
	ref, err := s.isrPartition(it.Group)
	if err != nil {
		return ItemResult{Group: it.Group, Err: err}
	}
	p := *ref.Partition
	switch {
	case it.LostData:
		return s.resignLostData(ref, p, it)
	case it.LogEnd != nil:
		return s.reportLogEnd(ref, p, it)
	}
	if err := s.checkAlter(p, it); err != nil {
		return ItemResult{Group: it.Group, Err: err}
	}
	ids := make([]uint64, len(it.ISR))
	for i, m := range it.ISR {
		ids[i] = m.ID
	}
	n := s.rules(ref.Topic, 0).build(p, isrChange{
		setISR: true, isr: inReplicaOrder(p, ids),
		setRecovering: true, recovering: it.LeaderRecovering,
	})
	n = s.finishISRMove(ref.Topic, n)
	s.putPartition(ref.Topic, n)
	if n.Leader != it.Leader {
		// Kafka's answer too: the change stands, the proposer must
		// learn the new leader before asking again.
		return ItemResult{Group: it.Group, Partition: n, Err: cmdErr(kerr.NewLeaderElected, "partition of group %d is now led by %d", it.Group, n.Leader)}
	}
	return ItemResult{Group: it.Group, Partition: n}
}

// resignLostData takes a leader whose log lost durable records at
// recovery out of the ISR (even as its last member, ELR or not), the ELR
// and the last known leader, and elects another replica if one may lead.
// Kafka elects such a replica when it is the last one standing (KIP-966),
// and its followers then truncate away the only copies of acknowledged
// records; here the partition stays leaderless instead, until a replica
// that kept them leads (or an unclean election, which says it may lose
// data). The replica must catch up from a new leader before it counts
// again.
func (s *State) resignLostData(ref PartitionRef, p Partition, it AlterPartitionItem) ItemResult {
	if err := checkAlterEpochs(p, it); err != nil {
		return ItemResult{Group: it.Group, Err: err}
	}
	n := s.rules(ref.Topic, it.Leader).build(p, isrChange{
		setISR: true, isr: without(p.ISR, it.Leader),
		uncleanShutdown: it.Leader, lostData: it.Leader,
	})
	s.putPartition(ref.Topic, n)
	return ItemResult{Group: it.Group, Partition: n}
}

// isrPartition finds the ISR partition of raft group g.
func (s *State) isrPartition(g uint64) (PartitionRef, error) {
	ref, ok := s.PartitionByGroup(g)
	if !ok {
		return ref, cmdErr(kerr.UnknownTopicOrPartition, "no partition has group %d", g)
	}
	if !ref.Topic.IsISR() {
		return ref, cmdErr(kerr.InvalidRequest, "partition of group %d is in raft mode: its raft group elects its leader and has no ISR", g)
	}
	return ref, nil
}

// checkAlter validates an item in the order of Kafka's
// validateAlterPartitionData, so that each failure gets Kafka's code.
func (s *State) checkAlter(p Partition, it AlterPartitionItem) error {
	if err := checkAlterEpochs(p, it); err != nil {
		return err
	}
	if err := checkAlterISR(p, it); err != nil {
		return err
	}
	for _, m := range it.ISR {
		b, ok := s.Brokers[m.ID]
		if !ok || !b.Eligible() || b.Epoch != m.BrokerEpoch {
			return cmdErr(kerr.IneligibleReplica, "replica %d is unregistered, fenced, shutting down or not at broker epoch %d", m.ID, m.BrokerEpoch)
		}
	}
	return nil
}

// checkAlterEpochs is the compare-and-set. Epochs above the partition's
// cannot come from this group 0's state; Kafka answers NOT_CONTROLLER so
// that the leader looks for the controller that issued them.
func checkAlterEpochs(p Partition, it AlterPartitionItem) error {
	le, pe := int64(it.LeaderEpoch), it.PartitionEpoch
	switch {
	case le > int64(p.LeaderTerm) || pe > p.PartitionEpoch:
		return cmdErr(kerr.NotController, "epochs %d/%d are ahead of the partition's %d/%d", le, pe, p.LeaderTerm, p.PartitionEpoch)
	case le < int64(p.LeaderTerm):
		return cmdErr(kerr.FencedLeaderEpoch, "leader epoch %d, the partition's is %d", le, p.LeaderTerm)
	case it.Leader != p.Leader:
		return cmdErr(kerr.InvalidRequest, "broker %d does not lead the partition (%d does)", it.Leader, p.Leader)
	case pe < p.PartitionEpoch:
		return cmdErr(kerr.InvalidUpdateVersion, "partition epoch %d, the partition's is %d", pe, p.PartitionEpoch)
	}
	return nil
}

// checkAlterISR checks the requested ISR's shape: distinct replicas, the
// leader among them, and a recovering leader alone.
func checkAlterISR(p Partition, it AlterPartitionItem) error {
	var ids []uint64
	for _, m := range it.ISR {
		if !p.HasReplica(m.ID) || slices.Contains(ids, m.ID) {
			return cmdErr(kerr.InvalidRequest, "ISR member %d is not a replica of %v, or repeated", m.ID, p.Replicas)
		}
		ids = append(ids, m.ID)
	}
	switch {
	case !slices.Contains(ids, p.Leader):
		return cmdErr(kerr.InvalidRequest, "the ISR %v must hold its leader %d", ids, p.Leader)
	case it.LeaderRecovering && len(ids) > 1:
		return cmdErr(kerr.InvalidRequest, "a recovering leader cannot have followers in its ISR %v", ids)
	case it.LeaderRecovering && !p.Recovering:
		return cmdErr(kerr.InvalidRequest, "a recovered leader cannot become recovering")
	}
	return nil
}

func (s *State) electLeaders(e *ElectLeaders) Result {
	switch {
	case len(e.Groups) == 0:
		return Result{Err: cmdErr(kerr.InvalidRequest, "elect leaders without groups")}
	case e.Preferred && e.Unclean:
		return Result{Err: cmdErr(kerr.InvalidRequest, "an election is preferred or unclean, not both")}
	}
	res := Result{Items: make([]ItemResult, 0, len(e.Groups))}
	for _, g := range e.Groups {
		res.Items = append(res.Items, s.electLeader(g, e.Preferred, e.Unclean))
	}
	return res
}

// electLeader runs one election with Kafka's ElectLeaders answers: nothing
// to do, or no replica able to lead, leaves the partition as it was. An
// unclean one may elect any eligible replica, as Kafka's does whatever
// the topic's unclean.leader.election.enable, but only where the
// partition has no leader (else nothing is needed).
func (s *State) electLeader(g uint64, preferred, unclean bool) ItemResult {
	ref, err := s.isrPartition(g)
	if err != nil {
		return ItemResult{Group: g, Err: err}
	}
	p := *ref.Partition
	if preferred && p.Leader == p.Replicas[0] || !preferred && p.Leader != 0 {
		return ItemResult{Group: g, Partition: p, Err: cmdErr(kerr.ElectionNotNeeded, "group %d is led by %d", g, p.Leader)}
	}
	n := s.rules(ref.Topic, 0).build(p, isrChange{preferred: preferred, unclean: unclean})
	switch {
	case preferred && n.Leader != p.Replicas[0]:
		return ItemResult{Group: g, Partition: p, Err: cmdErr(kerr.PreferredLeaderNotAvailable,
			"replica %d of group %d is not in the ISR, not alive, or in controlled shutdown or maintenance", p.Replicas[0], g)}
	case n.Leader == 0:
		return ItemResult{Group: g, Partition: p, Err: cmdErr(kerr.EligibleLeadersNotAvailable, "no replica of group %d may lead", g)}
	}
	s.putPartition(ref.Topic, n)
	return ItemResult{Group: g, Partition: n}
}

// updateFeatures switches ELR. Turning it on changes nothing at once: the
// ELR fills at the next ISR change, as in Kafka. Turning it off makes
// every ISR partition a pre-KIP-966 one again.
func (s *State) updateFeatures(u *UpdateFeatures) Result {
	was := s.EligibleLeaderReplicas
	s.EligibleLeaderReplicas = u.EligibleLeaderReplicas
	if was && !u.EligibleLeaderReplicas {
		s.forEachISR(func(t *Topic, p Partition) (Partition, bool) {
			n := s.rules(t, 0).build(dropELR(p), isrChange{})
			if n.PartitionEpoch == p.PartitionEpoch && !sameISRState(p, n) {
				n.PartitionEpoch++ // build saw only the change after dropELR's
			}
			return n, !samePartition(p, n)
		})
	}
	return Result{}
}

// dropELR clears p's ELR fields for ELR off. An empty ISR, which only ELR
// allows, gets its ELR back (they hold every committed record), else its
// last known leader, the member that pre-KIP-966 rules would have kept.
func dropELR(p Partition) Partition {
	if len(p.ISR) == 0 {
		switch {
		case len(p.ELR) > 0:
			p.ISR = p.ELR
		case p.LastKnownLeader != 0:
			p.ISR = []uint64{p.LastKnownLeader}
		}
	}
	p.ELR, p.LastKnownLeader = nil, 0
	return p
}

// putPartition stores n in a copy of its topic t.
func (s *State) putPartition(t *Topic, n Partition) {
	c := s.Topics[t.Name].copy()
	c.Partitions[n.Index] = n
	s.Topics[t.Name] = c
}

// samePartition reports whether a and b agree on every ISR mode field.
func samePartition(a, b Partition) bool {
	return sameISRState(a, b) && a.LeaderTerm == b.LeaderTerm && a.PartitionEpoch == b.PartitionEpoch && slices.Equal(a.LogEnds, b.LogEnds)
}
