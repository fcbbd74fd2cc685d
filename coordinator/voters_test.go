package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// members builds NextVoters' input from a compact description, one
// word per member in id order from 1: L the leader, V an alive voter, B
// a voter dead briefly, D a voter dead for long, X an alive voter that is
// leaving, l an alive caught-up learner, s an alive learner still
// catching up, d a dead learner, x an alive caught-up learner that is
// leaving.
func members(desc string) []Member {
	var out []Member
	for i, f := range strings.Fields(desc) {
		m := Member{ID: uint64(i + 1)}
		switch f {
		case "L":
			m.Voter, m.Leader, m.Alive = true, true, true
		case "V":
			m.Voter, m.Alive = true, true
		case "B":
			m.Voter = true
		case "D":
			m.Voter, m.DeadLong = true, true
		case "X":
			m.Voter, m.Alive, m.Leaving = true, true, true
		case "l":
			m.Alive, m.CaughtUp = true, true
		case "x":
			m.Alive, m.CaughtUp, m.Leaving = true, true, true
		case "s":
			m.Alive = true
		case "d":
		default:
			panic("bad member " + f)
		}
		out = append(out, m)
	}
	return out
}

func TestNextVoters(t *testing.T) {
	for _, c := range []struct {
		name    string
		members string
		target  int
		want    []uint64
	}{
		{"one node", "L", 5, []uint64{1}},
		{"two nodes: one voter", "L l", 5, []uint64{1}},
		{"third node caught up: three voters", "L l l", 5, []uint64{1, 2, 3}},
		{"three voters, a fourth node stays a learner", "L V V l", 5, []uint64{1, 2, 3}},
		{"fifth node: five voters in one change", "L V V l l", 5, []uint64{1, 2, 3, 4, 5}},
		{"fifth node still catching up: wait", "L V V l s", 5, []uint64{1, 2, 3}},
		{"a dead learner is not promoted", "L V V l d", 5, []uint64{1, 2, 3}},
		{"sixth node stays a learner", "L V V V V l", 5, []uint64{1, 2, 3, 4, 5}},
		{"target 3 keeps three", "L V V l l", 3, []uint64{1, 2, 3}},
		{"even target rounds down", "L V V l l", 4, []uint64{1, 2, 3}},
		{"target 0 means one", "L V V", 0, []uint64{1}},
		{"target 1 shrinks to the leader", "V L V", 1, []uint64{2}},
		{"target lowered to 3: the alive voters of lowest id stay", "V V L V V", 3, []uint64{1, 2, 3}},
		{"target lowered: dead voters go first", "D V L V V", 3, []uint64{2, 3, 4}},
		{"keep current voters over learners of lower id", "l l L V V", 3, []uint64{3, 4, 5}},
		{"a voter dead briefly is kept", "L V B l", 3, []uint64{1, 2, 3}},
		{"a voter dead briefly is kept at five", "L V V V B l", 5, []uint64{1, 2, 3, 4, 5}},
		{"a voter dead for long is replaced", "L V D l", 3, []uint64{1, 2, 4}},
		{"only the one dead voter is replaced", "L V V V D l l", 5, []uint64{1, 2, 3, 4, 6}},
		{"two dead voters, two learners", "L V V D D l l", 5, []uint64{1, 2, 3, 6, 7}},
		{"a dead voter without a replacement stays at five", "L V V V D", 5, []uint64{1, 2, 3, 4, 5}},
		{"two dead voters without replacement: shrink to three", "L V V D D", 5, []uint64{1, 2, 3}},
		{"two dead, one learner: the larger set", "L V V D D l", 5, []uint64{1, 2, 3, 4, 6}},
		{"no replacement at three: keep", "L V D", 3, []uint64{1, 2, 3}},
		{"dead for long and briefly: nothing better", "L V V B D", 5, []uint64{1, 2, 3, 4, 5}},
		{"an even set becomes odd", "L V V V", 5, []uint64{1, 2, 3}},
		{"an even set grows to odd with a learner", "L V V V l", 5, []uint64{1, 2, 3, 4, 5}},
		{"an even set drops its dead voter", "L V V D", 5, []uint64{1, 2, 3}},
		{"an even set with a brief death stays", "L B V B", 5, []uint64{1, 2, 3, 4}},
		{"no live majority: change nothing", "L D D", 3, []uint64{1, 2, 3}},
		{"no live majority at five: change nothing", "L V D D D l l", 5, []uint64{1, 2, 3, 4, 5}},
		{"the leader is never dropped", "V V V D L", 1, []uint64{5}},
		{"a leaving voter gives its vote to a learner", "L V X l", 3, []uint64{1, 2, 4}},
		{"a leaving voter goes without a replacement", "L V V V X", 5, []uint64{1, 2, 3}},
		{"the last leaving voter of three goes: one voter", "L V X", 3, []uint64{1}},
		{"two leaving voters, one learner", "L V V X X l", 5, []uint64{1, 2, 3}},
		{"a leaving learner is not promoted", "L V V x x", 5, []uint64{1, 2, 3}},
		{"leaving before dead for long", "L V V X D l", 5, []uint64{1, 2, 3, 5, 6}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NextVoters(members(c.members), c.target); !slices.Equal(got, c.want) {
				t.Errorf("NextVoters(%s, %d) = %v, want %v", c.members, c.target, got, c.want)
			}
		})
	}
}

// TestNextVoters_Exhaustive checks NextVoters' rules on every cluster of
// up to 5 members (one leader, each other member in each of the eight
// states of members but L) and every target from 0 to 6, and on every
// cluster of 6 with targets 3 and 5.
func TestNextVoters_Exhaustive(t *testing.T) {
	states := []string{"V", "B", "D", "X", "l", "s", "d", "x"}
	maxN := 6
	if testing.Short() {
		maxN = 5
	}
	checked := 0
	for n := 1; n <= maxN; n++ {
		for leader := 0; leader < n; leader++ {
			for code := range pow(len(states), n-1) {
				desc := make([]string, n)
				for i, c := 0, code; i < n; i++ {
					if i == leader {
						desc[i] = "L"
						continue
					}
					desc[i] = states[c%len(states)]
					c /= len(states)
				}
				for target := range 7 {
					if n == 6 && target != 3 && target != 5 {
						continue // the other targets are checked on up to five members
					}
					checkNextVoters(t, strings.Join(desc, " "), target)
					checked++
				}
			}
		}
	}
	t.Logf("%d cases", checked)
}

func pow(b, e int) int {
	r := 1
	for range e {
		r *= b
	}
	return r
}

func checkNextVoters(t *testing.T, desc string, target int) {
	t.Helper()
	ms := members(desc)
	got := NextVoters(ms, target)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("NextVoters(%s, %d) = %v: %s", desc, target, got, fmt.Sprintf(format, args...))
	}
	var cur []uint64
	var leader uint64
	for _, m := range ms {
		if m.Voter {
			cur = append(cur, m.ID)
		}
		if m.Leader {
			leader = m.ID
		}
	}
	if !slices.IsSorted(got) {
		fail("not sorted")
	}
	if !slices.Contains(got, leader) {
		fail("drops the leader %d", leader)
	}
	if slices.Equal(got, cur) {
		checkStable(t, desc, target, ms, got)
		return
	}
	want := max(target, 1)
	if want%2 == 0 {
		want--
	}
	alive := 0
	for _, id := range got {
		m := ms[id-1]
		if m.Alive {
			alive++
		}
		if !m.Voter && !(m.Alive && m.CaughtUp && !m.Leaving) {
			fail("promotes %d, which is not an alive caught-up learner that stays", id)
		}
	}
	if alive <= len(got)/2 {
		fail("no live majority")
	}
	if spare(ms, cur) < 0 {
		fail("changes a set without a live majority")
	}
	if len(got)%2 == 0 {
		fail("an even set")
	}
	if len(got) > want {
		fail("more than the target %d", want)
	}
	overTarget, even := len(cur) > want, len(cur)%2 == 0
	for _, id := range cur {
		if slices.Contains(got, id) {
			continue
		}
		m := ms[id-1]
		if m.Alive && !m.Leaving && !overTarget && !even && leavers(ms, cur) == 0 {
			fail("drops live voter %d within the target", id)
		}
		if !m.Alive && !m.DeadLong && !m.Leaving {
			fail("drops voter %d, dead only briefly", id)
		}
	}
	if leavers(ms, got) > leavers(ms, cur) {
		fail("more leaving voters than before")
	}
	if !overTarget && !even && leavers(ms, cur) == 0 && spare(ms, got) < spare(ms, cur) {
		fail("tolerates fewer failures than the current set")
	}
	checkStable(t, desc, target, ms, got)
}

// leavers counts the leaving voters of set.
func leavers(ms []Member, set []uint64) int {
	n := 0
	for _, id := range set {
		if ms[id-1].Leaving {
			n++
		}
	}
	return n
}

// spare is how many more failures set tolerates.
func spare(ms []Member, set []uint64) int {
	dead := 0
	for _, id := range set {
		if !ms[id-1].Alive {
			dead++
		}
	}
	return (len(set)-1)/2 - dead
}

// checkStable applies the answer and asks again: the answer must not
// change, or voters would flap.
func checkStable(t *testing.T, desc string, target int, ms []Member, got []uint64) {
	t.Helper()
	next := slices.Clone(ms)
	for i := range next {
		next[i].Voter = slices.Contains(got, next[i].ID)
	}
	if again := NextVoters(next, target); !slices.Equal(again, got) {
		t.Fatalf("NextVoters(%s, %d) = %v, then %v once applied", desc, target, got, again)
	}
}
