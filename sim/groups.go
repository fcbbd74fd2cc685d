package sim

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/raftgroup"
)

func (r *machineReplica) applyOffsets(e raftgroup.Entry) (any, error) {
	key, c := commandKey(e.Data), (*groups.Command)(nil)
	if key == "commit" {
		c, _ = groups.DecodeCommand(e.Data) // only commits: decoding costs more than applying
	}
	reset := key == "delete_offsets" || key == "delete_groups" || key == "expire" || c != nil && isSimpleCommit(c.Commit)
	if r.s.cfg.CommitGoesBack {
		e.Data = r.commitGoesBack(e, c)
	}
	var v any = groups.Result{}
	if !r.s.cfg.SkipOffsetCommand || !skippedOnNode1(r.node, e) {
		var err error
		if v, err = r.offs.Apply(e); err != nil {
			return v, err
		}
	}
	p := pos{e.Index, e.Sub}
	r.s.mach.states.onApply(r.node, r.group, p, r.digest())
	r.s.mach.offsets.onApply(r.node, r.group, p, offsetsOf(r.offs), reset)
	return v, nil
}

// commitGoesBack is the planted CommitGoesBack bug: a member's commit at
// an index divisible by 3 stores each offset one below the one it
// replaces, as a stale commit applied after a newer one would. Every
// replica does the same, so their states agree.
func (r *machineReplica) commitGoesBack(e raftgroup.Entry, c *groups.Command) []byte {
	if c == nil || c.Commit == nil || isSimpleCommit(c.Commit) || e.Index%3 != 0 {
		return e.Data
	}
	for i, o := range c.Commit.Offsets {
		if cur, ok := r.offs.Offset(c.Commit.Group, o.TopicPartition); ok {
			c.Commit.Offsets[i].Offset = cur.Offset - 1
		}
	}
	b, err := c.Encode()
	if err != nil {
		return e.Data
	}
	return b
}

// groupLoad is the load of one offsets group: consumer groups whose
// coordinator is the group's leader. The simulator plays the coordinator
// (groups.Coordinator waits on its proposals, which one goroutine cannot)
// and proposes what it would, built from the leader's Machine: Barrier
// when a node starts leading, NewGeneration when a join phase ends,
// Assign for the leader's SyncGroup, Remove on LeaveGroup, Commit for
// OffsetCommit (checked with groups.CheckCommit first, as the coordinator
// does), DeleteOffsets, DeleteGroups and Expire. Heartbeats are soft
// state, no command. Transitions and commits of one consumer group are in
// flight together, so some are refused at apply, as in real use.
type groupLoad struct {
	group   uint64
	barrier uint64 // the highest term a Barrier was proposed in
	ctl     *raftgroup.Proposal
	cgs     []*consumerGroup
}

type consumerGroup struct {
	name           string
	next           map[groups.TopicPartition]int64 // the highest offset proposed
	members        int                             // member ids made
	change, commit *raftgroup.Proposal
}

// offsetPartitions are the partitions the consumer groups commit.
var offsetPartitions = []groups.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}, {Topic: "clicks", Partition: 0}}

func newGroupLoad(g uint64) *groupLoad {
	l := &groupLoad{group: g}
	for _, name := range []string{"cg-a", "cg-b"} {
		l.cgs = append(l.cgs, &consumerGroup{name: name, next: map[groups.TopicPartition]int64{}})
	}
	return l
}

func (s *Sim) offerGroups(l *groupLoad) {
	n, st := s.leaderOf(l.group)
	if n == nil {
		return
	}
	m := s.replica(n, l.group).offs
	switch {
	case st.Term > l.barrier && l.ctl == nil:
		l.barrier = st.Term
		l.ctl = s.proposeGroupCmd(n, l.group, &groups.Command{Barrier: &groups.Barrier{Term: st.Term}})
	case l.ctl == nil && s.rng.Float64() < s.cfg.ProposeRate/10:
		l.ctl = s.proposeGroupCmd(n, l.group, &groups.Command{Expire: &groups.Expire{NowMs: s.clock().UnixMilli(), RetentionMs: 2000}})
	}
	for _, cg := range l.cgs {
		if s.rng.Float64() >= s.cfg.ProposeRate {
			continue
		}
		g := m.Group(cg.name)
		if cg.commit == nil && s.rng.IntN(2) == 0 {
			if c := s.commitCommand(cg, g); c != nil {
				cg.commit = s.proposeGroupCmd(n, l.group, &groups.Command{Commit: c})
			}
		} else if cg.change == nil {
			if c := s.groupCommand(cg, g); c != nil {
				cg.change = s.proposeGroupCmd(n, l.group, c)
			}
		}
	}
}

// leaderOf returns the up node that believes it leads group g and holds
// its replica, with its status.
func (s *Sim) leaderOf(g uint64) (*node, raftgroup.Status) {
	for _, n := range s.nodes {
		if s.replica(n, g) == nil {
			continue
		}
		if grp := n.host.Group(g); grp != nil {
			if st := grp.Status(); st.IsLeader() {
				return n, st
			}
		}
	}
	return nil, raftgroup.Status{}
}

func (s *Sim) proposeGroupCmd(n *node, g uint64, c *groups.Command) *raftgroup.Proposal {
	data, err := c.Encode()
	if err != nil {
		s.chk.fail("offsets group %d: encode: %s", g, err)
		return nil
	}
	p, err := n.host.Group(g).Propose(ctxBackground, data)
	if err != nil {
		return nil
	}
	s.traceCommand("offsets", g, n.id, data)
	return p
}

func (s *Sim) pollGroups(l *groupLoad) {
	l.ctl = s.pollGroupCmd(l.group, l.ctl)
	for _, cg := range l.cgs {
		cg.change = s.pollGroupCmd(l.group, cg.change)
		cg.commit = s.pollGroupCmd(l.group, cg.commit)
	}
}

// pollGroupCmd returns p, or nil once it is done.
func (s *Sim) pollGroupCmd(g uint64, p *raftgroup.Proposal) *raftgroup.Proposal {
	if p == nil {
		return nil
	}
	select {
	case <-p.Done():
	default:
		return p
	}
	res, err := p.Wait(ctxBackground)
	switch r, ok := res.Value.(groups.Result); {
	case err != nil:
		if !expectedFailure(err) {
			s.chk.fail("offsets group %d: proposal failed unexpectedly: %s", g, err)
		}
	case !ok:
		s.chk.fail("offsets group %d: command applied with %T", g, res.Value)
	case r.Code != 0:
		s.res.Refused++
	default:
		s.res.Commands++
	}
	return nil
}

// commitCommand is an OffsetCommit as the coordinator proposes it: from a
// member of the current generation, each offset past every one proposed
// before; or, for a group without members, a simple commit, which may
// reset offsets back. Nil when the coordinator would refuse it.
func (s *Sim) commitCommand(cg *consumerGroup, g *groups.Group) *groups.Commit {
	c := &groups.Commit{Group: cg.name, Generation: -1, NowMs: s.clock().UnixMilli()}
	reset := true
	if g != nil && len(g.Members) > 0 {
		ids := g.MemberIDs()
		c.Generation, c.MemberID, reset = g.Generation, ids[s.rng.IntN(len(ids))], false
		c.InstanceID = g.Members[c.MemberID].InstanceID
	}
	if groups.CheckCommit(g, c.Generation, c.MemberID, c.InstanceID) != 0 {
		return nil
	}
	for _, i := range s.rng.Perm(len(offsetPartitions))[:1+s.rng.IntN(2)] {
		tp := offsetPartitions[i]
		off := cg.next[tp] + 1 + int64(s.rng.IntN(4))
		if reset && s.rng.IntN(2) == 0 {
			off = int64(s.rng.IntN(int(cg.next[tp] + 1))) // --reset-offsets --to-offset
		}
		cg.next[tp] = max(cg.next[tp], off)
		c.Offsets = append(c.Offsets, groups.CommitOffset{TopicPartition: tp, Offset: off, LeaderEpoch: 1})
	}
	return c
}

// groupCommand is the next transition of a consumer group.
func (s *Sim) groupCommand(cg *consumerGroup, g *groups.Group) *groups.Command {
	if g == nil || len(g.Members) == 0 {
		switch k := s.rng.IntN(8); {
		case g != nil && k == 0:
			return &groups.Command{DeleteGroups: &groups.DeleteGroups{Groups: []string{cg.name}}}
		case g != nil && k == 1:
			tp := offsetPartitions[s.rng.IntN(len(offsetPartitions))]
			return &groups.Command{DeleteOffsets: &groups.DeleteOffsets{Group: cg.name, Partitions: []groups.TopicPartition{tp}}}
		case k < 5:
			return &groups.Command{NewGeneration: s.newGeneration(cg, g, nil, 1+s.rng.IntN(2))}
		}
		return nil
	}
	ids := g.MemberIDs()
	if c := s.replaceStatic(cg, g); c != nil && s.rng.IntN(6) == 0 {
		return &groups.Command{ReplaceStatic: c}
	}
	switch g.Phase {
	case groups.PhaseCompleting:
		if s.rng.IntN(4) > 0 {
			return &groups.Command{Assign: assignment(g)}
		}
	case groups.PhasePreparing:
		// The remaining members rejoin; now and then one misses the
		// rebalance timeout and is out.
		keep := ids
		if len(ids) > 1 && s.rng.IntN(3) == 0 {
			keep = ids[1:]
		}
		return &groups.Command{NewGeneration: s.newGeneration(cg, g, keep, 0)}
	default:
		if s.rng.IntN(3) == 0 {
			return &groups.Command{NewGeneration: s.newGeneration(cg, g, ids, 1)}
		}
	}
	leaving := ids[s.rng.IntN(len(ids))]
	return &groups.Command{Remove: &groups.Remove{Group: cg.name, Members: []string{leaving}, NowMs: s.clock().UnixMilli()}}
}

// newGeneration ends a join phase with the members keep and fresh ones,
// as completeRebalance does; now and then from a stale generation, which
// is refused.
func (s *Sim) newGeneration(cg *consumerGroup, g *groups.Group, keep []string, fresh int) *groups.NewGeneration {
	prev := int32(0)
	if g != nil {
		prev = g.Generation
	}
	ng := &groups.NewGeneration{Group: cg.name, PrevGeneration: prev, Generation: nextGeneration(prev),
		ProtocolType: "consumer", Protocol: "range", NowMs: s.clock().UnixMilli()}
	if s.rng.IntN(10) == 0 {
		ng.PrevGeneration--
	}
	for _, id := range keep {
		ng.Members = append(ng.Members, g.Members[id])
	}
	for range fresh {
		ng.Members = append(ng.Members, s.freshMember(cg, ""))
	}
	ng.Leader = ng.Members[0].ID
	if g != nil && g.Members[g.Leader] != nil && len(keep) > 0 {
		ng.Leader = g.Leader
	}
	return ng
}

func nextGeneration(gen int32) int32 {
	if gen+1 <= 0 {
		return 1
	}
	return gen + 1
}

// freshMember is a Kafka consumer joining with the range and round-robin
// protocols, subscribed to every topic it commits; one in three is a
// static member (group.instance.id), unless instance names it already.
func (s *Sim) freshMember(cg *consumerGroup, instance string) *groups.Member {
	cg.members++
	id := fmt.Sprintf("%s-c%d", cg.name, cg.members)
	if instance == "" && cg.members%3 == 1 {
		instance = id + "-static"
	}
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{"clicks", "orders"}}
	b := meta.AppendTo(nil)
	return &groups.Member{ID: id, InstanceID: instance, ClientID: id, ClientHost: "/10.0.0.1", SessionTimeoutMs: 10_000,
		RebalanceTimeoutMs: 30_000, Protocols: []groups.Protocol{{Name: "range", Metadata: b}, {Name: "roundrobin", Metadata: b}}}
}

// replaceStatic is a static member's rejoin under a new member id
// (KIP-345), or nil if the group has no static member.
func (s *Sim) replaceStatic(cg *consumerGroup, g *groups.Group) *groups.ReplaceStatic {
	for _, id := range g.MemberIDs() {
		if inst := g.Members[id].InstanceID; inst != "" {
			return &groups.ReplaceStatic{Group: cg.name, OldID: id, Member: s.freshMember(cg, inst)}
		}
	}
	return nil
}

// assignment is the group leader's SyncGroup: the partitions dealt round
// robin over the members in id order.
func assignment(g *groups.Group) *groups.Assign {
	ids := g.MemberIDs()
	per := make([]kmsg.ConsumerMemberAssignment, len(ids))
	for i, tp := range offsetPartitions {
		a := &per[i%len(ids)]
		a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	as := &groups.Assign{Group: g.Name, Generation: g.Generation, Assignments: map[string][]byte{}}
	for i, id := range ids {
		as.Assignments[id] = per[i].AppendTo(nil)
	}
	return as
}
