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
