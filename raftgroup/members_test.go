package raftgroup

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// A leader's Members lists its learners beside its voters, with their
// match indexes; a follower's says it does not lead.
func TestGroup_Members(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	c.propose(c.leader(1), "a")
	c.start(4)
	c.createGroup(4, 1, GroupConfig{ID: 1, Join: true})
	c.confChange(confChange(change(raftpb.ConfChangeAddLearnerNode, 4)))
	c.propose(c.leader(1), "b")
	c.converged(1, []string{"a", "b"}, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var learner MemberMatch
	eventually(t, "the leader to see learner 4 caught up", func() bool {
		l := c.leader(1)
		ms, last, ok, err := l.Members(ctx)
		if err != nil || !ok {
			return false
		}
		voters := 0
		for _, m := range ms {
			if m.ID == 4 {
				learner = m
			} else if !m.Learner {
				voters++
			}
		}
		return voters == 3 && learner.ID == 4 && learner.Match == last
	})
	if !learner.Learner {
		t.Errorf("member 4 %+v is not a learner", learner)
	}
	l := c.leader(1)
	for id := uint64(1); id <= 4; id++ {
		if id == l.node {
			continue
		}
		if _, _, ok, err := c.host(id).Group(1).Members(ctx); ok || err != nil {
			t.Errorf("node %d, a follower: Members ok=%v err=%v", id, ok, err)
		}
	}
}
