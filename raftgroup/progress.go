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
	learners []uint64 // sorted; fixed for the view's life
	last     atomic.Uint64
	match    []atomic.Uint64 // voters, then learners
	caughtUp []atomic.Int64  // unix nanoseconds; voters, then learners
}

// index is id's position in the view's slices, or -1.
func (pv *progressView) index(id uint64) int {
	if i := slices.Index(pv.voters, id); i >= 0 {
		return i
	}
	if i := slices.Index(pv.learners, id); i >= 0 {
		return len(pv.voters) + i
	}
	return -1
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

// MemberProgress returns member id's progress (a voter's or a
// learner's) and the leader's last index, if this replica leads and id
// is a member. A learner added under this leader is caught up only once
// it has held the leader's whole log: unlike a voter, it is never
// assumed so when the view starts; nor is a voter this leader has not
// heard from. A reassignment promotes a learner, or hands leadership to
// a voter, only once it is caught up.
func (g *Group) MemberProgress(id uint64) (p VoterProgress, last uint64, ok bool) {
	pv := g.progress.Load()
	if pv == nil {
		return VoterProgress{}, 0, false
	}
	i := pv.index(id)
	if i < 0 {
		return VoterProgress{}, 0, false
	}
	p = VoterProgress{ID: id, Match: pv.match[i].Load(), CaughtUp: time.Unix(0, pv.caughtUp[i].Load())}
	if p.Match == 0 {
		// Not heard from under this leader: unlike Progress, which takes
		// every voter caught up as a new leader starts (Kafka's view), a
		// member may be dead, and a move must not hand it leadership.
		p.CaughtUp = time.Time{}
	}
	return p, pv.last.Load(), true
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
	if term := bs.HardState.GetTerm(); pv == nil || pv.term != term || !slices.Equal(pv.voters, g.conf.Voters) ||
		!slices.Equal(pv.learners, g.conf.Learners) {
		pv = g.newProgressView(term, last, pv)
	}
	pv.last.Store(last)
	var now int64
	g.raw.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		i := pv.index(id)
		if i < 0 {
			return // an outgoing voter or next learner of a joint configuration
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

// newProgressView publishes a fresh view for a new term, voter set or
// learner set, with every voter caught up now, and every learner as of
// the old view of the same term (prev), else never.
func (g *Group) newProgressView(term, last uint64, prev *progressView) *progressView {
	now := time.Now().UnixNano()
	voters, learners := slices.Clone(g.conf.Voters), slices.Clone(g.conf.Learners)
	n := len(voters) + len(learners)
	pv := &progressView{term: term, voters: voters, learners: learners,
		match: make([]atomic.Uint64, n), caughtUp: make([]atomic.Int64, n)}
	targets := make([]progressTarget, n)
	for i := range voters {
		pv.caughtUp[i].Store(now)
		targets[i] = progressTarget{index: last, at: now}
	}
	for j, id := range learners {
		i := len(voters) + j
		targets[i] = progressTarget{index: last, at: now}
		if prev == nil || prev.term != term {
			continue
		}
		if k := prev.index(id); k >= 0 {
			pv.match[i].Store(prev.match[k].Load())
			pv.caughtUp[i].Store(prev.caughtUp[k].Load())
			targets[i] = g.progressTargets[k]
		}
	}
	g.progressTargets = targets
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
