package raftgroup

import (
	"fmt"
	"testing"
	"time"
)

// A leader reports every voter's progress: followers that take its
// entries stay caught up while it writes, one that is stopped falls
// behind and its lag grows, and non-leaders report nothing.
func TestGroup_Progress(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	lead := c.leader(1)
	for i := range 3 {
		c.propose(lead, fmt.Sprintf("a-%d", i))
	}
	voters, last, ok := lead.Progress()
	if !ok || len(voters) != 3 {
		t.Fatalf("leader's progress: %v %d %v, want 3 voters", voters, last, ok)
	}
	now := time.Now()
	for _, v := range voters {
		if v.Lag(now, last) > time.Second {
			t.Errorf("voter %d lags %s with nothing to catch up on", v.ID, v.Lag(now, last))
		}
	}
	for id := uint64(1); id <= 3; id++ {
		if g := c.host(id).Group(1); g != lead {
			if _, _, ok := g.Progress(); ok {
				t.Errorf("follower %d reports progress", id)
			}
		}
	}
	var down uint64 = 1
	if lead.node == 1 {
		down = 2
	}
	c.stop(down)
	eventually(t, fmt.Sprintf("voter %d to lag", down), func() bool {
		c.propose(lead, "more")
		voters, last, _ := lead.Progress()
		now := time.Now()
		for _, v := range voters {
			if v.ID == down {
				return v.Match < last && v.Lag(now, last) > 200*time.Millisecond
			}
		}
		return false
	})
	voters, last, _ = lead.Progress()
	now = time.Now()
	for _, v := range voters {
		if v.ID != down && v.ID != lead.node && v.Lag(now, last) > 200*time.Millisecond {
			t.Errorf("live voter %d lags %s (match %d of %d)", v.ID, v.Lag(now, last), v.Match, last)
		}
	}
}

// A leader's successor is the candidate voter holding the most of its
// log: a stopped voter, listed first, loses to the live one; without a
// live candidate it is the stopped one; the leader itself, a node that
// is no voter, and any follower's answer are 0.
func TestGroup_Successor(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	lead := c.leader(1)
	var others []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != lead.node {
			others = append(others, id)
		}
	}
	down, live := others[0], others[1]
	c.stop(down)
	eventually(t, fmt.Sprintf("voter %d to fall behind", down), func() bool {
		c.propose(lead, "more")
		voters, _, _ := lead.Progress()
		m := map[uint64]uint64{}
		for _, v := range voters {
			m[v.ID] = v.Match
		}
		return m[live] > m[down]
	})
	if got := lead.Successor([]uint64{down, live}); got != live {
		t.Errorf("successor of %v: %d, want the live voter %d", []uint64{down, live}, got, live)
	}
	if got := lead.Successor([]uint64{down}); got != down {
		t.Errorf("successor of [%d]: %d, want %d", down, got, down)
	}
	if got := lead.Successor([]uint64{lead.node, 9}); got != 0 {
		t.Errorf("successor among the leader and a non-voter: %d, want 0", got)
	}
	if got := c.host(live).Group(1).Successor([]uint64{down, lead.node}); got != 0 {
		t.Errorf("a follower's successor: %d, want 0", got)
	}
}
