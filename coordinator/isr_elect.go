package coordinator

import "slices"

// isrRules is what an ISR partition's change depends on besides the
// partition itself: which brokers may lead, and the topic's and cluster's
// election settings. Built from a State, it makes every change a pure
// function of state and command, as apply must be.
type isrRules struct {
	acceptable func(id uint64) bool // registered, eligible, not excluded
	elr        bool                 // KIP-966 eligible leader replicas
	minISR     int
	unclean    bool // unclean.leader.election.enable
	// maintenance is the broker in maintenance mode (0: none): a clean
	// election picks it only when no other replica may lead cleanly.
	maintenance uint64
}

// rules returns the rules for t's partitions, treating excluded (0: none)
// as unable to lead: a broker being fenced.
func (s *State) rules(t *Topic, excluded uint64) isrRules {
	return isrRules{
		acceptable: func(id uint64) bool {
			b, ok := s.Brokers[id]
			return ok && b.Eligible() && id != excluded
		},
		elr:         s.EligibleLeaderReplicas,
		minISR:      int(t.ConfigInt("min.insync.replicas")),
		unclean:     t.Config("unclean.leader.election.enable") == "true",
		maintenance: s.InMaintenance(),
	}
}

// isrChange is one requested change of an ISR partition.
type isrChange struct {
	setISR          bool
	isr             []uint64 // the target ISR, with setISR
	setRecovering   bool
	recovering      bool   // the leader's recovery state, with setRecovering
	uncleanShutdown uint64 // a replica that lost unflushed data (0: none)
	// lostData is a replica whose log lost durable records (0: none): it
	// leaves even as the last ISR member and is not the last known leader.
	lostData uint64
	// restartedLeader is a replica that restarted and may have lost
	// what it held, as one whose log says so has (0: none): it is no
	// longer the last known leader, so that a partition left without
	// ISR and ELR goes to unclean recovery (isr_recover.go), which
	// compares every replica's log, rather than to it.
	restartedLeader uint64
	preferred       bool // elect the first replica if it can lead
	unclean         bool // allow an unclean election whatever the topic says (ElectLeaders.Unclean)
}

// electionKind says where a leader came from; ELR and unclean leaders
// reset the ISR to themselves.
type electionKind int

const (
	electedNone electionKind = iota
	electedISR
	electedELR
	electedUnclean // unclean, or the last known leader
)

// build applies c to p after Kafka's PartitionChangeBuilder.build: target
// ISR, then ELR, then an election, then the last known leader, then the
// epochs. It never changes p's slices.
func (r isrRules) build(p Partition, c isrChange) Partition {
	r.unclean = r.unclean || c.unclean
	target := p.ISR
	if c.setISR {
		target = c.isr
	}
	elr := r.targetELR(p, target, c.uncleanShutdown)
	n := p
	if c.setRecovering {
		n.Recovering = c.recovering
	}
	leader, kind := r.elect(p, target, elr, c.preferred)
	n.Leader = leader
	switch kind {
	case electedELR:
		target, elr = []uint64{leader}, without(elr, leader)
	case electedUnclean:
		// As Kafka: the ISR is forced to the new leader, which may lack
		// acknowledged records.
		target, elr, n.Recovering = []uint64{leader}, nil, true
	}
	n.ISR = target
	if len(target) == 0 && !r.elr && c.lostData == 0 {
		n.ISR = p.ISR // without ELR the last member stays in the ISR
	}
	n.ELR = elr
	if !r.elr {
		n.ELR = nil
	}
	n.LastKnownLeader = r.lastKnownLeader(p, n)
	if lkl := n.LastKnownLeader; lkl != 0 && (lkl == c.lostData || lkl == c.restartedLeader) {
		n.LastKnownLeader = 0
	}
	n.LogEnds = r.keptLogEnds(n)
	bumpEpochs(p, &n)
	return n
}

// targetELR recomputes the ELR after Kafka's maybePopulateTargetElr: with
// the ISR at min.insync.replicas or above the HW moves again, so nobody
// outside the ISR is sure to hold every committed record; below it, the
// members leaving the ISR join the ELR, unless they lost unflushed data.
func (r isrRules) targetELR(p Partition, target []uint64, uncleanShutdown uint64) []uint64 {
	if !r.elr || len(target) >= r.minISR {
		return nil
	}
	var out []uint64
	for _, id := range p.Replicas {
		was := slices.Contains(p.ELR, id) || slices.Contains(p.ISR, id)
		if was && !slices.Contains(target, id) && id != uncleanShutdown {
			out = append(out, id)
		}
	}
	return out
}

// elect chooses p's leader after Kafka's electAnyLeader (or
// electPreferredLeader): the current leader if it is still valid, else the
// first valid replica in replica order (an ISR member, or an ELR member
// when the ISR is empty), else the last known leader, else with unclean
// election any acceptable replica, else none. A broker in maintenance
// is chosen only when no other replica can lead cleanly (an ISR or ELR
// member): the same election without it runs first. With nobody in
// maintenance the election is what it was before maintenance mode.
func (r isrRules) elect(p Partition, isr, elr []uint64, preferred bool) (uint64, electionKind) {
	if r.maintenance != 0 {
		others := r
		others.maintenance = 0
		others.acceptable = func(id uint64) bool { return id != r.maintenance && r.acceptable(id) }
		if leader, kind := others.elect(p, isr, elr, preferred); kind == electedISR || kind == electedELR {
			return leader, kind
		}
	}
	valid := func(id uint64) electionKind {
		switch {
		case !r.acceptable(id):
			return electedNone
		case slices.Contains(isr, id):
			return electedISR
		case len(isr) == 0 && slices.Contains(elr, id):
			return electedELR
		}
		return electedNone
	}
	if preferred {
		if k := valid(p.Replicas[0]); k != electedNone {
			return p.Replicas[0], k
		}
	}
	if k := valid(p.Leader); k != electedNone {
		return p.Leader, k
	}
	for _, id := range p.Replicas {
		if k := valid(id); k != electedNone {
			return id, k
		}
	}
	if r.canElectLastKnownLeader(p, isr, elr) {
		return p.LastKnownLeader, electedUnclean
	}
	if r.unclean && !preferred {
		for _, id := range p.Replicas {
			if r.acceptable(id) {
				return id, electedUnclean
			}
		}
	}
	return 0, electedNone
}

// canElectLastKnownLeader is KIP-966's fallback when every replica may
// have lost data: the last leader is as good a choice as any, "similar
// behavior prior to the 4.0". Unlike Kafka's code we require it alive: a
// dead leader serves nobody.
func (r isrRules) canElectLastKnownLeader(p Partition, isr, elr []uint64) bool {
	return r.elr && len(isr) == 0 && len(elr) == 0 && p.LastKnownLeader != 0 && r.acceptable(p.LastKnownLeader)
}

// lastKnownLeader follows Kafka's maybeUpdateLastKnownLeader: remembered
// when the ISR first becomes empty, cleared once there is a leader.
func (r isrRules) lastKnownLeader(p Partition, n Partition) uint64 {
	switch {
	case !r.elr:
		return 0
	case len(n.ISR) == 0 && len(p.ISR) > 0 && p.Leader != 0:
		return p.Leader
	case n.Leader != 0:
		return 0
	}
	return p.LastKnownLeader
}

// bumpEpochs advances n's epochs for what changed since p: a new leader
// (none counts) bumps the leader epoch, and any change the partition
// epoch, so that an AlterPartition based on p fails its compare-and-set.
func bumpEpochs(p Partition, n *Partition) {
	if n.Leader != p.Leader {
		n.LeaderTerm++
		n.PartitionEpoch++
		return
	}
	if !sameISRState(p, *n) {
		n.PartitionEpoch++
	}
}

// sameISRState reports whether a and b agree on every ISR mode field but
// the epochs.
func sameISRState(a, b Partition) bool {
	return a.Leader == b.Leader && slices.Equal(a.ISR, b.ISR) && slices.Equal(a.ELR, b.ELR) &&
		a.LastKnownLeader == b.LastKnownLeader && a.Recovering == b.Recovering
}

// without returns ids less id, as a new slice.
func without(ids []uint64, id uint64) []uint64 {
	var out []uint64
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// inReplicaOrder returns the members of ids that are replicas of p, in
// replica order, as a new slice.
func inReplicaOrder(p Partition, ids []uint64) []uint64 {
	var out []uint64
	for _, r := range p.Replicas {
		if slices.Contains(ids, r) {
			out = append(out, r)
		}
	}
	return out
}
