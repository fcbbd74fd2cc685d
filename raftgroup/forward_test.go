package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestGroup_ForwardProposalsFromFollower(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	peers := []uint64{1, 2, 3}
	for id := uint64(1); id <= 3; id++ {
		c.createGroup(id, 9, GroupConfig{ID: 9, Peers: peers, ForwardProposals: true})
	}
	l := c.leader(9)
	f := c.host(l.node%3 + 1).Group(9)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.WaitStatus(ctx, func(s Status) bool { return s.Leader == l.node }); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 20 {
		d := fmt.Sprintf("fwd-%d", i)
		want = append(want, d)
		p, err := f.Propose(ctx, []byte(d))
		if err != nil {
			t.Fatalf("forwarded propose %d: %v", i, err)
		}
		if _, _, err := p.WaitAppended(ctx); err != nil {
			t.Fatalf("forwarded proposal %d never appended: %v", i, err)
		}
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("forwarded proposal %d: %v", i, err)
		}
		if got, want := res.Value, fmt.Sprintf("ok:%d", res.Index); got != want {
			t.Fatalf("forwarded proposal %d result %v, want %v", i, got, want)
		}
	}
	c.converged(9, want, 1, 2, 3)
}

func TestGroup_NoForwardingRefusesFollower(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	l := c.leader(1)
	f := c.host(l.node%3 + 1).Group(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.WaitStatus(ctx, func(s Status) bool { return s.Leader == l.node }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Propose(ctx, []byte("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("propose on a non-forwarding follower: %v, want ErrNotLeader", err)
	}
}
