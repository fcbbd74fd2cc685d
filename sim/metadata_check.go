package sim

import (
	"hash/fnv"
)

// stateChecker holds the agreement invariant of the groups that run a real
// state machine (coordinator.Metadata, groups.Machine): their state, as
// Snapshot encodes it, is the same on every replica at the same index.
//   - after each apply, the replica's state digest at that (index, sub) is
//     the one the first replica to apply there recorded;
//   - once a replica moves past an index, its state then is every other's
//     after that index; a replica restored from a snapshot at index i must
//     hold that state too (restores count);
//   - at the end every replica holds the same state (Snapshot bytes), at
//     the same index (finishMachines).
//
// Both encodings are deterministic (JSON, sorted keys; the offsets
// snapshot sorts its lists); machineReplica.Restore checks that a restored
// state encodes to the very snapshot it came from.
type stateChecker struct {
	c      *checker
	kind   map[uint64]string             // group -> "metadata", "offsets"
	at     map[uint64]map[pos]stateAt    // group -> position -> first digest
	after  map[uint64]map[uint64]stateAt // group -> index -> digest past it
	last   map[[2]uint64]replicaState    // (node, group) -> this incarnation's
	failed map[uint64]bool               // groups already reported diverged
	byNode map[[2]uint64]int             // (node, group) -> applies, for Result
	// restores counts restores; compared, those checked against a state
	// another replica held (for the tests: the check must not be vacuous).
	restores, compared int
}

type stateAt struct {
	node   uint64
	digest uint64
}

type replicaState struct {
	p      pos // Sub -1: an entry the state machine did not see (conf change)
	digest uint64
}

func newStateChecker(c *checker) *stateChecker {
	return &stateChecker{
		c: c, kind: map[uint64]string{}, at: map[uint64]map[pos]stateAt{}, after: map[uint64]map[uint64]stateAt{},
		last: map[[2]uint64]replicaState{}, failed: map[uint64]bool{}, byNode: map[[2]uint64]int{},
	}
}

func digestOf(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// onOpen starts a replica's new incarnation from the empty state; raft
// restores its snapshot, if any, before it applies anything.
func (sc *stateChecker) onOpen(node, group uint64, kind string, empty uint64) {
	sc.kind[group] = kind
	sc.last[[2]uint64{node, group}] = replicaState{digest: empty}
}

func (sc *stateChecker) onApply(node, group uint64, p pos, digest uint64) {
	k := [2]uint64{node, group}
	sc.pass(node, group, p.Index)
	sc.byNode[k]++
	g := sc.at[group]
	if g == nil {
		g = map[pos]stateAt{}
		sc.at[group] = g
	}
	if prev, ok := g[p]; ok && prev.digest != digest {
		sc.diverged(group, "%s group %d: node %d's state after entry %v differs from node %d's (digest %016x, %016x)",
			sc.kind[group], group, node, p, prev.node, digest, prev.digest)
	} else if !ok {
		g[p] = stateAt{node, digest}
	}
	sc.last[k] = replicaState{p: p, digest: digest}
}

// current is the digest of the replica's state now.
func (sc *stateChecker) current(node, group uint64) uint64 {
	return sc.last[[2]uint64{node, group}].digest
}

// onSkip records an entry the group applied without the state machine
// (a configuration change): the state after it is the one before.
func (sc *stateChecker) onSkip(node, group, index uint64) {
	k := [2]uint64{node, group}
	sc.pass(node, group, index)
	sc.last[k] = replicaState{p: pos{index, -1}, digest: sc.last[k].digest}
}

// onRestore checks a replica restored from a snapshot at index against
// the state the others held after index.
func (sc *stateChecker) onRestore(node, group, index uint64, digest uint64) {
	sc.restores++
	if _, ok := sc.after[group][index]; ok {
		sc.compared++
	}
	sc.settle(node, group, index, digest, "restored from the snapshot at")
	sc.last[[2]uint64{node, group}] = replicaState{p: pos{index, 1 << 30}, digest: digest}
}

// pass settles the replica's state after its last index once it moves on
// to index.
func (sc *stateChecker) pass(node, group, index uint64) {
	if l := sc.last[[2]uint64{node, group}]; l.p.Index < index {
		sc.settle(node, group, l.p.Index, l.digest, "after index")
	}
}

func (sc *stateChecker) settle(node, group, index, digest uint64, what string) {
	g := sc.after[group]
	if g == nil {
		g = map[uint64]stateAt{}
		sc.after[group] = g
	}
	if prev, ok := g[index]; ok && prev.digest != digest {
		sc.diverged(group, "%s group %d: node %d's state %s %d differs from node %d's after it (digest %016x, %016x)",
			sc.kind[group], group, node, what, index, prev.node, digest, prev.digest)
	} else if !ok {
		g[index] = stateAt{node, digest}
	}
}

// diverged reports a group's first divergence only: every later index
// would differ too.
func (sc *stateChecker) diverged(group uint64, format string, args ...any) {
	if sc.failed[group] {
		return
	}
	sc.failed[group] = true
	sc.c.fail(format, args...)
}

func (sc *stateChecker) applies() int {
	n := 0
	for _, c := range sc.byNode {
		n += c
	}
	return n
}
