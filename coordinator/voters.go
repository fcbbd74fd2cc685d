package coordinator

import (
	"cmp"
	"slices"
)

// DefaultMetadataVoters is group 0's voter count when none is set: five,
// or as many as the cluster has nodes, rounded down to odd.
const DefaultMetadataVoters = 5

// Member is what NextVoters knows of one member of group 0, as the
// metadata leader sees it.
type Member struct {
	ID uint64
	// Voter: the member votes now.
	Voter bool
	// Leader: the member leads group 0 (it computes the change), so it
	// is alive and always stays a voter.
	Leader bool
	// Alive: the member's broker is registered and eligible (alive, not
	// in controlled shutdown).
	Alive bool
	// CaughtUp: a learner's log is near the leader's (voters: ignored).
	CaughtUp bool
	// DeadLong: a voter that has not been alive for longer than the
	// replacement delay (ControllerConfig.VoterReplaceAfter).
	DeadLong bool
	// Leaving: the member is on its way out of the cluster (a
	// decommissioned broker): a voter gives its vote to a learner, or
	// goes as soon as an odd set without it keeps a live majority; a
	// learner is never promoted. It counts as alive while it is.
	Leaving bool
}

// NextVoters returns the voters group 0 should have next, sorted: the
// current voters when nothing should change. target is the wanted voter
// count (rounded down to odd, at least 1). The rules:
//   - a voter stays unless it is dead for long or leaving, the set is
//     above target or even; a voter dead only briefly (a restart) is
//     never dropped;
//   - only alive, caught-up learners that are not leaving are promoted,
//     the lowest ids first, and they take a leaving or dead-for-long
//     voter's place before the set grows; a leaving voter counts as gone,
//     so it goes even where that leaves fewer voters;
//   - of the odd sizes up to target that the members can fill, the one
//     with the fewest leaving voters wins (a majority of the set must be
//     alive), then the one that tolerates the most further failures,
//     then the one with the fewest changes, then the larger; an even set
//     is kept only when no odd one has a live majority;
//   - nothing changes while the current voters lack a live majority: a
//     joint change needs one of the old set as of the new;
//   - the leader always stays.
//
// It is a pure function, so that its arithmetic is tested on its own
// (voters_test.go); the controller turns its answer into one joint
// configuration change.
func NextVoters(members []Member, target int) []uint64 {
	target = max(target, 1)
	if target%2 == 0 {
		target--
	}
	var cur, alive, briefly, promotable, leaving, deadLong []uint64
	byID := map[uint64]Member{}
	for _, m := range sortedMembers(members) {
		byID[m.ID] = m
		switch {
		case !m.Voter && m.Alive && m.CaughtUp && !m.DeadLong && !m.Leaving:
			promotable = append(promotable, m.ID)
		case !m.Voter:
		case m.Leader:
			alive = append([]uint64{m.ID}, alive...) // first: kept whatever the size
		case m.Leaving:
			leaving = append(leaving, m.ID)
		case m.Alive:
			alive = append(alive, m.ID)
		case m.DeadLong:
			deadLong = append(deadLong, m.ID)
		default:
			briefly = append(briefly, m.ID)
		}
		if m.Voter {
			cur = append(cur, m.ID)
		}
	}
	best := voterChoice{set: cur, curOK: len(cur) <= target}
	best.score(byID, cur)
	if !best.quorum {
		return slices.Sorted(slices.Values(cur)) // a joint change needs the current majority too
	}
	pool := slices.Concat(alive, promotable, deadLong, leaving) // in order of preference: a leaving voter counts as gone
	for k := target; k >= 1; k -= 2 {
		need := k - len(briefly)
		if need < 1 || need > len(pool) {
			continue
		}
		c := voterChoice{set: slices.Concat(briefly, pool[:need]), curOK: true}
		c.score(byID, cur)
		if c.better(best) {
			best = c
		}
	}
	return slices.Sorted(slices.Values(best.set))
}

// voterChoice is one candidate voter set and what NextVoters weighs.
type voterChoice struct {
	set []uint64
	// curOK is false for the current set when it exceeds the target: any
	// valid set within the target beats it.
	curOK   bool
	quorum  bool // a majority of the set is alive
	odd     bool
	leaving int // voters of the set that are leaving, the leader included
	spare   int // further failures the set tolerates: (n-1)/2 less its dead
	changes int // members added or removed against the current set
}

func (c *voterChoice) score(byID map[uint64]Member, cur []uint64) {
	dead := 0
	for _, id := range c.set {
		if !byID[id].Alive && !byID[id].Leader {
			dead++
		}
		if byID[id].Leaving {
			c.leaving++
		}
		if !slices.Contains(cur, id) {
			c.changes++
		}
	}
	for _, id := range cur {
		if !slices.Contains(c.set, id) {
			c.changes++
		}
	}
	n := len(c.set)
	c.quorum = n > 0 && n-dead > n/2
	c.odd = n%2 == 1
	c.spare = (n-1)/2 - dead
}

// better reports whether c beats o.
func (c voterChoice) better(o voterChoice) bool {
	switch {
	case !c.quorum:
		return false
	case c.curOK != o.curOK:
		return c.curOK
	case c.odd != o.odd:
		return c.odd
	case c.leaving != o.leaving:
		return c.leaving < o.leaving
	case c.spare != o.spare:
		return c.spare > o.spare
	case c.changes != o.changes:
		return c.changes < o.changes
	}
	return len(c.set) > len(o.set)
}

func sortedMembers(members []Member) []Member {
	s := slices.Clone(members)
	slices.SortFunc(s, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return s
}
