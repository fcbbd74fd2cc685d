package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCluster_Election(t *testing.T) { testElection(t, storageMode{}) }

func testElection(t *testing.T, m storageMode) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("nodes=%d", n), func(t *testing.T) {
			c := newClusterIn(t, m, n, []uint64{1, 2}, nil)
			for _, gid := range []uint64{1, 2} {
				l := c.leader(gid)
				if s := l.Status(); len(s.Voters) != n || s.Term == 0 {
					t.Errorf("group %d leader status %+v, want %d voters and a term", gid, s, n)
				}
			}
		})
	}
}

// A replica created well after the others still leads a new group first
// when the others hold their election clocks for it; and a held replica
// whose group has a leader stops holding, so it can take over later.
func TestCluster_HoldElectionTicksLetsLateReplicaLeadFirst(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	peers := []uint64{1, 2, 3}
	election := uint64(DefaultConfig().ElectionTicks)
	for _, id := range []uint64{2, 3} {
		c.createGroup(id, 7, GroupConfig{ID: 7, Peers: peers, HoldElectionTicks: 50 * int(election)})
	}
	// Unheld, 2 and 3 would elect one of themselves within this.
	eventually(t, "three election timeouts on the early replicas", func() bool {
		return c.host(2).Metrics().Ticks >= 3*election && c.host(3).Metrics().Ticks >= 3*election
	})
	c.createGroup(1, 7, GroupConfig{ID: 7, Peers: peers})
	lead := c.leader(7)
	if lead.node != 1 {
		t.Fatalf("first leader %d, want the late replica 1", lead.node)
	}
	c.stop(1)
	if next := c.leader(7); next.node == 1 {
		t.Fatalf("leader %d after stopping it", next.node)
	}
}

func TestGroup_Propose(t *testing.T) {
	c := newCluster(t, 3, []uint64{7}, nil)
	l := c.leader(7)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// One caller pipelines 200 proposals without waiting: they must enter
	// the log in call order, and each must report its append and result.
	var props []*Proposal
	for _, d := range seq("p", 0, 200) {
		p, err := l.Propose(ctx, []byte(d))
		if err != nil {
			t.Fatal(err)
		}
		props = append(props, p)
	}
	var last uint64
	for i, p := range props {
		idx, term, err := p.WaitAppended(ctx)
		if err != nil {
			t.Fatalf("proposal %d: append: %v", i, err)
		}
		// Small proposals are coalesced, so neighbours may share an index;
		// converged below checks the exact order.
		if idx < last || term == 0 {
			t.Fatalf("proposal %d appended at %d (term %d) after %d: not in call order", i, idx, term, last)
		}
		last = idx
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
		if got, want := res.Value, fmt.Sprintf("ok:%d", idx); got != want || res.Index != idx {
			t.Fatalf("proposal %d result %+v, want value %s at %d", i, res, want, idx)
		}
	}
	c.converged(7, seq("p", 0, 200), 1, 2, 3)
	if m := l.host.Metrics(); m.ProposalBatches >= m.Proposals {
		t.Logf("no batching observed: %+v", m)
	}
}

func TestGroup_ProposeOnFollowerNamesLeader(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	l := c.leader(1)
	follower := c.host(l.node%3 + 1).Group(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A follower names the leader only once it has heard from it.
	if _, err := follower.WaitStatus(ctx, func(s Status) bool { return s.Leader == l.node }); err != nil {
		t.Fatalf("follower never learned the leader: %v", err)
	}
	_, err := follower.Propose(context.Background(), []byte("x"))
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("propose on follower: err = %v, want *NotLeaderError", err)
	}
	if got, want := nl.Leader, l.node; got != want {
		t.Errorf("NotLeaderError.Leader = %d, want %d", got, want)
	}
	if _, err := l.Propose(context.Background(), nil); !errors.Is(err, ErrEmptyProposal) {
		t.Errorf("empty proposal: err = %v, want ErrEmptyProposal", err)
	}
}

func TestCluster_FollowerRestartFromWAL(t *testing.T) { testFollowerRestartFromWAL(t, storageMode{}) }

func testFollowerRestartFromWAL(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 3, []uint64{1}, nil)
	l := c.leader(1)
	for _, d := range seq("a", 0, 50) {
		c.propose(l, d)
	}
	f := l.node%3 + 1
	c.converged(1, seq("a", 0, 50), f)
	c.stop(f)
	for _, d := range seq("b", 0, 50) {
		c.propose(l, d)
	}
	c.restart(f, 1)
	want := append(seq("a", 0, 50), seq("b", 0, 50)...)
	c.converged(1, want, 1, 2, 3)

	// The whole cluster restarts from its WALs: every state machine is
	// rebuilt by replay, and the group carries on.
	for id := uint64(1); id <= 3; id++ {
		c.stop(id)
	}
	for id := uint64(1); id <= 3; id++ {
		c.restart(id, 1)
	}
	c.converged(1, want, 1, 2, 3)
	c.propose(c.leader(1), "after")
	c.converged(1, append(want, "after"), 1, 2, 3)
}

func TestCluster_LeaderKill(t *testing.T) { testLeaderKill(t, storageMode{}) }

func testLeaderKill(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 5, []uint64{1}, nil)
	l := c.leader(1)
	old, oldTerm := l.node, l.Status().Term
	for _, d := range seq("a", 0, 20) {
		c.propose(l, d)
	}
	c.stop(old)
	nl := c.leader(1)
	if nl.node == old || nl.Status().Term <= oldTerm {
		t.Fatalf("new leader %d term %d, old %d term %d", nl.node, nl.Status().Term, old, oldTerm)
	}
	for _, d := range seq("b", 0, 20) {
		c.propose(nl, d)
	}
	c.restart(old, 1)
	want := append(seq("a", 0, 20), seq("b", 0, 20)...)
	c.converged(1, want, 1, 2, 3, 4, 5)
}

func TestCluster_PartitionedLeaderLosesProposal(t *testing.T) {
	testPartitionedLeaderLosesProposal(t, storageMode{})
}

func testPartitionedLeaderLosesProposal(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 3, []uint64{1}, nil)
	l := c.leader(1)
	c.propose(l, "before")
	c.net.partition(l.node)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := l.Propose(ctx, []byte("doomed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.WaitAppended(ctx); err != nil {
		t.Fatalf("a partitioned leader still appends locally: %v", err)
	}
	var nl *Group
	eventually(t, "a leader on the majority side", func() bool {
		for id := uint64(1); id <= 3; id++ {
			if g := c.host(id).Group(1); id != l.node && g.Status().IsLeader() {
				nl = g
				return true
			}
		}
		return false
	})
	c.propose(nl, "after")
	c.net.heal()
	_, err = p.Wait(ctx)
	if !errors.Is(err, ErrProposalLost) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("overwritten proposal: err = %v, want ErrProposalLost and a NotLeaderError", err)
	}
	c.converged(1, []string{"before", "after"}, 1, 2, 3)
}

func TestGroup_TransferLeadership(t *testing.T) { testTransferLeadership(t, storageMode{}) }

func testTransferLeadership(t *testing.T, m storageMode) {
	c := newClusterIn(t, m, 3, []uint64{1}, nil)
	l := c.leader(1)
	c.propose(l, "x")
	to := l.node%3 + 1
	c.converged(1, []string{"x"}, to)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.TransferLeadership(ctx, to); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(1).node; got != to {
		t.Fatalf("leader after transfer = %d, want %d", got, to)
	}
	c.propose(c.leader(1), "y")
	c.converged(1, []string{"x", "y"}, 1, 2, 3)
}

func TestGroup_ReadIndex(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	l := c.leader(1)
	res := c.propose(l, "w")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id := uint64(1); id <= 3; id++ {
		idx, err := c.host(id).Group(1).ReadIndex(ctx)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		if idx < res.Index {
			t.Fatalf("node %d read index %d below acknowledged write %d", id, idx, res.Index)
		}
		if sm := c.sm(id, 1); sm.Applied() < res.Index {
			t.Fatalf("node %d returned before applying %d", id, res.Index)
		}
	}
}

// With FailOnStepDown, a leader cut off from its followers fails its
// unapplied proposals as soon as CheckQuorum deposes it, without waiting
// for the partition to heal (which the test never does before the
// answer): the client can retry on the new leader at once.
func TestCluster_FailOnStepDownAnswersBeforeTheHeal(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	for id := uint64(1); id <= 3; id++ {
		c.createGroup(id, 1, GroupConfig{ID: 1, Peers: []uint64{1, 2, 3}, FailOnStepDown: true})
	}
	l := c.leader(1)
	c.propose(l, "before")
	c.net.partition(l.node)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := l.Propose(ctx, []byte("unknown"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.WaitAppended(ctx); err != nil {
		t.Fatalf("a partitioned leader still appends locally: %v", err)
	}
	_, err = p.Wait(ctx)
	if !errors.Is(err, ErrLeadershipLost) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("proposal of a deposed leader: err = %v, want ErrLeadershipLost and a NotLeaderError", err)
	}
	if l.Status().IsLeader() {
		t.Fatal("the cut-off node still leads")
	}
	c.net.heal()
	c.propose(c.leader(1), "after")
	got := c.sm(l.node, 1)
	eventually(t, "the old leader to apply after", func() bool { return slices.Contains(got.data(), "after") })
}

// A follower whose log lost what it had acknowledged (its data wiped,
// as a power loss under FsyncNever can) is not a goroutine dump: raft's
// panic at its leader's commit index becomes the group's fatal error,
// ErrLogLost, saying what happened.
func TestCluster_LostLogIsAClearFatalError(t *testing.T) {
	c := newCluster(t, 3, []uint64{1}, nil)
	l := c.leader(1)
	for _, v := range seq("x", 0, 5) {
		c.propose(l, v)
	}
	victim := l.node%3 + 1
	c.converged(1, seq("x", 0, 5), victim)
	c.stop(victim)
	if err := os.RemoveAll(filepath.Join(c.root, fmt.Sprintf("node%d", victim))); err != nil {
		t.Fatal(err)
	}
	c.restart(victim, 1)
	eventually(t, "the wiped follower's group to halt with ErrLogLost", func() bool {
		for _, err := range c.fatalErrors() {
			var fe *FatalError
			if errors.As(err, &fe) && errors.Is(err, ErrLogLost) && fe.Group == 1 && strings.Contains(err.Error(), "tocommit") {
				return true
			}
		}
		return false
	})
	c.propose(c.leader(1), "y") // the others carry on
}
