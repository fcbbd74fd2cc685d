package raftgroup

import (
	"context"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// MemberMatch is a leader's view of one member of its configuration,
// voter or learner: how much of its log the member holds.
type MemberMatch struct {
	ID      uint64
	Learner bool
	// Match is the highest index the leader knows the member holds.
	Match uint64
}

// Members returns, if this replica leads, the match index of every
// member of the configuration, learners included, and the leader's last
// index; ok is false otherwise. Unlike Progress it asks the owner, so it
// wakes a quiesced group: call it when its answer is needed (the
// metadata leader before it promotes a learner), not on every tick.
func (g *Group) Members(ctx context.Context) (members []MemberMatch, last uint64, ok bool, err error) {
	type answer struct {
		members []MemberMatch
		last    uint64
		ok      bool
	}
	done := make(chan answer, 1)
	err = g.submit(func() {
		var a answer
		if g.raw.BasicStatus().RaftState == raft.StateLeader {
			a.ok, a.last = true, g.lastIndex()
			g.raw.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
				a.members = append(a.members, MemberMatch{ID: id, Learner: pr.IsLearner, Match: pr.Match})
			})
		}
		done <- a
	})
	if err != nil {
		return nil, 0, false, err
	}
	select {
	case a := <-done:
		return a.members, a.last, a.ok, nil
	case <-g.donec:
		return nil, 0, false, ErrStopped
	case <-ctx.Done():
		return nil, 0, false, ctx.Err()
	}
}
