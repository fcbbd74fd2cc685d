package raftgroup

import (
	"context"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Role is a replica's raft role.
type Role uint8

// Roles, in raft's order.
const (
	RoleFollower Role = iota
	RoleCandidate
	RoleLeader
	RolePreCandidate
)

func (r Role) String() string {
	switch r {
	case RoleFollower:
		return "follower"
	case RoleCandidate:
		return "candidate"
	case RoleLeader:
		return "leader"
	case RolePreCandidate:
		return "pre-candidate"
	}
	return "unknown"
}

func roleOf(s raft.StateType) Role { return Role(s) }

// Status is a snapshot of a group's state, published by the group's
// goroutine after every step. The slices are shared and must not be
// modified.
type Status struct {
	Group, Node uint64
	Term        uint64
	Leader      uint64 // 0: none known
	// LeadTransferee is the replica a leader is handing leadership to (0:
	// none). Raft refuses proposals until the transfer ends, within an
	// election timeout.
	LeadTransferee uint64
	Role           Role
	Commit         uint64
	Applied        uint64
	LastIndex      uint64

	Voters         []uint64
	VotersOutgoing []uint64 // non-empty during a joint configuration
	Learners       []uint64
	LearnersNext   []uint64

	Quiesced bool
	Stopped  bool
}

// IsLeader reports whether this replica leads.
func (s Status) IsLeader() bool { return s.Role == RoleLeader }

// Members returns every node in the configuration, voters and learners,
// sorted and without duplicates.
func (s Status) Members() []uint64 {
	var ids []uint64
	ids = append(ids, s.Voters...)
	ids = append(ids, s.VotersOutgoing...)
	ids = append(ids, s.Learners...)
	ids = append(ids, s.LearnersNext...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

func (s *Status) sameAs(o *Status) bool {
	return s.Term == o.Term && s.Leader == o.Leader && s.LeadTransferee == o.LeadTransferee &&
		s.Role == o.Role && s.Commit == o.Commit &&
		s.Applied == o.Applied && s.LastIndex == o.LastIndex && s.Quiesced == o.Quiesced &&
		s.Stopped == o.Stopped && slices.Equal(s.Voters, o.Voters) &&
		slices.Equal(s.VotersOutgoing, o.VotersOutgoing) && slices.Equal(s.Learners, o.Learners) &&
		slices.Equal(s.LearnersNext, o.LearnersNext)
}

// setConf records cs in the group's cached configuration view, which
// every published Status shares until the configuration changes again.
func (g *Group) setConf(cs *raftpb.ConfState) {
	g.confState = cs
	s := &g.conf
	s.Voters = sortedCopy(cs.GetVoters())
	s.VotersOutgoing = sortedCopy(cs.GetVotersOutgoing())
	s.Learners = sortedCopy(cs.GetLearners())
	s.LearnersNext = sortedCopy(cs.GetLearnersNext())
}

func sortedCopy(ids []uint64) []uint64 {
	if len(ids) == 0 {
		return nil
	}
	c := slices.Clone(ids)
	slices.Sort(c)
	return c
}

// Status returns the group's latest published status.
func (g *Group) Status() Status { return *g.status.Load() }

// WaitStatus waits until cond holds for the published status, and returns
// that status.
func (g *Group) WaitStatus(ctx context.Context, cond func(Status) bool) (Status, error) {
	for {
		g.statusMu.Lock()
		changed := g.statusCh
		g.statusMu.Unlock()
		if s := g.Status(); cond(s) {
			return s, nil
		} else if s.Stopped {
			return s, ErrStopped
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return g.Status(), ctx.Err()
		}
	}
}

// publishStatus runs on the group goroutine.
func (g *Group) publishStatus() {
	bs := g.raw.BasicStatus()
	last := g.lastIndex()
	g.trackProgress(&bs, last)
	s := Status{
		Group: g.id, Node: g.node,
		Term: bs.HardState.GetTerm(), Leader: bs.Lead, LeadTransferee: bs.LeadTransferee, Role: roleOf(bs.RaftState),
		Commit: bs.HardState.GetCommit(), Applied: g.applied, LastIndex: last,
		Quiesced: g.quiesced.Load(), Stopped: g.halted,
		Voters: g.conf.Voters, VotersOutgoing: g.conf.VotersOutgoing,
		Learners: g.conf.Learners, LearnersNext: g.conf.LearnersNext,
	}
	if old := g.status.Load(); old != nil && old.sameAs(&s) {
		return
	}
	ns := new(Status)
	*ns = s
	g.status.Store(ns)
	g.statusMu.Lock()
	close(g.statusCh)
	g.statusCh = make(chan struct{})
	g.statusMu.Unlock()
}
