package sim

import (
	"fmt"
	"slices"
)

// checker holds the safety invariants:
//   - at most one leader per term (per group);
//   - an index, once applied anywhere, holds the same data everywhere
//     (committed entries never change);
//   - each replica applies strictly increasing indexes (never twice), so
//     that with the above every applied sequence is a prefix of another;
//   - at the end, after healing, every replica holds every entry any
//     replica applied and every acknowledged proposal (nothing committed
//     is lost).
type checker struct {
	leaders    map[[2]uint64]uint64 // (group, term) -> node
	committed  map[uint64]map[pos]string
	replicas   map[[2]uint64][]record // (node, group) -> applied sequence
	acked      map[uint64]map[pos]string
	violations []string
}

func newChecker() *checker {
	return &checker{
		leaders:   map[[2]uint64]uint64{},
		committed: map[uint64]map[pos]string{},
		replicas:  map[[2]uint64][]record{},
		acked:     map[uint64]map[pos]string{},
	}
}

func (c *checker) fail(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *checker) onLeader(group, term, node uint64) {
	k := [2]uint64{group, term}
	if prev, ok := c.leaders[k]; ok && prev != node {
		c.fail("group %d term %d has two leaders: %d and %d", group, term, prev, node)
		return
	}
	c.leaders[k] = node
}

func (c *checker) onApply(node, group uint64, r record) {
	k := [2]uint64{node, group}
	seq := c.replicas[k]
	if n := len(seq); n > 0 && !seq[n-1].Pos.less(r.Pos) {
		c.fail("node %d group %d applied %v after %v (twice or out of order)", node, group, r.Pos, seq[n-1].Pos)
	}
	c.replicas[k] = append(seq, r)
	c.noteCommitted(node, group, r)
}

func (c *checker) noteCommitted(node, group uint64, r record) {
	g := c.committed[group]
	if g == nil {
		g = map[pos]string{}
		c.committed[group] = g
	}
	if prev, ok := g[r.Pos]; ok && prev != r.Data {
		c.fail("group %d entry %v changed: %q applied before, node %d applied %q", group, r.Pos, prev, node, r.Data)
		return
	}
	g[r.Pos] = r.Data
}

func (c *checker) onRestore(node, group uint64, seq []record) {
	for _, r := range seq {
		c.noteCommitted(node, group, r)
	}
	c.replicas[[2]uint64{node, group}] = slices.Clone(seq)
}

// onCrash forgets a replica's volatile sequence: the new incarnation
// rebuilds it.
func (c *checker) onCrash(node, group uint64) {
	delete(c.replicas, [2]uint64{node, group})
}

func (c *checker) onAck(group uint64, p pos, data string) {
	g := c.acked[group]
	if g == nil {
		g = map[pos]string{}
		c.acked[group] = g
	}
	g[p] = data
}

// final checks that every replica of every group holds exactly the
// committed sequence, which includes every acknowledged proposal.
func (c *checker) final(nodes, groups []uint64) {
	for _, gid := range groups {
		var want []record
		for p, d := range c.committed[gid] {
			want = append(want, record{p, d})
		}
		slices.SortFunc(want, func(a, b record) int {
			if a.Pos.less(b.Pos) {
				return -1
			}
			return 1
		})
		for idx, d := range c.acked[gid] {
			if got, ok := c.committed[gid][idx]; !ok || got != d {
				c.fail("group %d: acknowledged entry %v %q lost (log has %q)", gid, idx, d, got)
			}
		}
		for _, n := range nodes {
			if got := c.replicas[[2]uint64{n, gid}]; !slices.Equal(got, want) {
				c.fail("group %d node %d applied %d entries, committed sequence has %d: %s", gid, n, len(got), len(want), firstDiff(got, want))
			}
		}
	}
}

// converged reports whether every replica of every group has applied
// the same sequence.
func (c *checker) converged(nodes, groups []uint64) bool {
	for _, gid := range groups {
		first := c.replicas[[2]uint64{nodes[0], gid}]
		for _, n := range nodes[1:] {
			if !slices.Equal(c.replicas[[2]uint64{n, gid}], first) {
				return false
			}
		}
	}
	return true
}

func firstDiff(a, b []record) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("first difference at position %d: %+v vs %+v", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d vs %d)", len(a), len(b))
}
