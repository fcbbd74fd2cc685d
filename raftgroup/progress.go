package raftgroup

import (
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// VoterProgress is what a leader knows of one voter's log, for Kafka's
// view of replication (an ISR of the voters within a lag time of the
// leader, and under-replicated partitions) and for choosing whom to hand
// leadership to (Successor). It never steers raft.
type VoterProgress struct {
	ID uint64
	// Match is the highest index the leader knows the voter holds.
	Match uint64
	// CaughtUp is the last time at which the voter held every entry the
	// leader held then, after Kafka's lastCaughtUpTimeMs: a voter that
	// reaches the leader's last index of an earlier step is caught up as
	// of that step, so a steady trickle of writes does not make it lag. A
	// new leader counts every voter caught up when it took over, as
	// Kafka's resetReplicaState does.
	CaughtUp time.Time
}

// Lag reports how long ago v last held everything the leader held, given
// the leader's last index: zero when it holds that now.
func (v VoterProgress) Lag(now time.Time, leaderLast uint64) time.Duration {
	if v.Match >= leaderLast {
		return 0
	}
	return max(now.Sub(v.CaughtUp), 0)
}

// progressView is the leader's voter progress, published for readers of
// Progress. The owner allocates one per term and voter set and then only
// stores into its atomics, so that tracking allocates nothing per step.
type progressView struct {
	term     uint64
	voters   []uint64 // sorted; fixed for the view's life
	last     atomic.Uint64
	match    []atomic.Uint64
	caughtUp []atomic.Int64 // unix nanoseconds
}

// progressTarget is, per voter, the leader's last index at the step the
// owner last saw the voter reach its previous target, and that step's
// time: reaching it makes the voter caught up as of then.
type progressTarget struct {
	index uint64
	at    int64
}

// Progress returns each voter's progress as of the group's latest step,
// and the leader's last index then, if this replica leads; ok is false
// otherwise. A quiesced leader takes no steps, but every voter held its
// whole log when it quiesced, so VoterProgress.Lag is zero.
func (g *Group) Progress() (voters []VoterProgress, last uint64, ok bool) {
	pv := g.progress.Load()
	if pv == nil {
		return nil, 0, false
	}
	voters = make([]VoterProgress, len(pv.voters))
	for i, id := range pv.voters {
		voters[i] = VoterProgress{ID: id, Match: pv.match[i].Load(), CaughtUp: time.Unix(0, pv.caughtUp[i].Load())}
	}
	return voters, pv.last.Load(), true
}

// trackProgress updates the published progress from raft's tracker after
// a step; it runs on the owner, from publishStatus.
func (g *Group) trackProgress(bs *raft.BasicStatus, last uint64) {
	if bs.RaftState != raft.StateLeader {
		if g.progress.Load() != nil {
			g.progress.Store(nil)
		}
		return
	}
	pv := g.progress.Load()
	if term := bs.HardState.GetTerm(); pv == nil || pv.term != term || !slices.Equal(pv.voters, g.conf.Voters) {
		pv = g.newProgressView(term, last)
	}
	pv.last.Store(last)
	var now int64
	g.raw.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		i := slices.Index(pv.voters, id)
		if i < 0 {
			return // a learner
		}
		pv.match[i].Store(pr.Match)
		t := &g.progressTargets[i]
		if pr.Match < t.index {
			return
		}
		if now == 0 {
			now = time.Now().UnixNano()
		}
		at := t.at
		if pr.Match >= last {
			at = now
		}
		pv.caughtUp[i].Store(at)
		t.index, t.at = last, now
	})
}

// newProgressView publishes a fresh view for a new term or voter set,
// with every voter caught up now.
func (g *Group) newProgressView(term, last uint64) *progressView {
	now := time.Now().UnixNano()
	voters := slices.Clone(g.conf.Voters)
	pv := &progressView{term: term, voters: voters,
		match: make([]atomic.Uint64, len(voters)), caughtUp: make([]atomic.Int64, len(voters))}
	g.progressTargets = make([]progressTarget, len(voters))
	for i := range voters {
		pv.caughtUp[i].Store(now)
		g.progressTargets[i] = progressTarget{index: last, at: now}
	}
	g.progress.Store(pv)
	return pv
}

// Successor returns the candidate best placed to take this leader's
// place: of the candidates that are voters other than this node, the one
// whose log the leader knows to hold the most (its Match), the earliest
// in candidates on a tie. A transfer to it ends soonest, since raft hands
// leadership over only once the transferee holds the leader's whole log.
// It returns 0 if this replica does not lead or no candidate qualifies.
func (g *Group) Successor(candidates []uint64) uint64 {
	voters, _, ok := g.Progress()
	if !ok {
		return 0
	}
	var best uint64
	var bestMatch uint64
	for _, id := range candidates {
		i := slices.IndexFunc(voters, func(v VoterProgress) bool { return v.ID == id })
		if id == g.node || i < 0 {
			continue
		}
		if m := voters[i].Match; best == 0 || m > bestMatch {
			best, bestMatch = id, m
		}
	}
	return best
}
