package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"github.com/raftq/raftq/chaos/netns"
)

// ErrTooFewNodes is returned for a partition shape the cluster is too
// small to make.
var ErrTooFewNodes = errors.New("chaos: too few nodes for this partition shape")

// Grudge says, for each node, the nodes whose traffic it drops (Jepsen's
// grudge). Traffic is dropped at the receiver, per direction: a
// symmetric cut lists each side in the other's grudge.
type Grudge map[int][]int

// Drops reports whether node to drops traffic from node from.
func (g Grudge) Drops(from, to int) bool { return slices.Contains(g[to], from) }

// Rules turns the grudge into iptables drop rules.
func (g Grudge) Rules(host func(id int) netip.Addr) []netns.Rule {
	var rules []netns.Rule
	for _, to := range sortedKeys(g) {
		for _, from := range g[to] {
			rules = append(rules, netns.Rule{From: host(from), To: host(to)})
		}
	}
	return rules
}

// String lists each node's grudge: "1<-{2 3} 2<-{1}".
func (g Grudge) String() string {
	var parts []string
	for _, to := range sortedKeys(g) {
		if len(g[to]) > 0 {
			parts = append(parts, fmt.Sprintf("%d<-%v", to, g[to]))
		}
	}
	return strings.Join(parts, " ")
}

func sortedKeys(g Grudge) []int {
	keys := make([]int, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Complete cuts the cluster into components that cannot talk to each
// other at all; nodes within a component talk freely.
func Complete(components ...[]int) Grudge {
	g := Grudge{}
	for i, comp := range components {
		for _, n := range comp {
			for j, other := range components {
				if i != j {
					g[n] = append(g[n], other...)
				}
			}
			slices.Sort(g[n])
		}
	}
	return g
}

// Isolate cuts node off from all others.
func Isolate(node int, all []int) Grudge {
	rest := slices.DeleteFunc(slices.Clone(all), func(n int) bool { return n == node })
	return Complete([]int{node}, rest)
}

// MajorityMinority cuts a random majority from the minority.
func MajorityMinority(all []int, rng *rand.Rand) Grudge {
	s := shuffled(all, rng)
	maj := len(s)/2 + 1
	return Complete(sorted(s[:maj]), sorted(s[maj:]))
}

// Bridge cuts the cluster into two halves that cannot talk, except
// through one node that talks to both (Jepsen's bridge). It needs three
// nodes.
func Bridge(all []int, rng *rand.Rand) (Grudge, error) {
	if len(all) < 3 {
		return nil, fmt.Errorf("%w: bridge needs 3, have %d", ErrTooFewNodes, len(all))
	}
	s := shuffled(all, rng)
	half := (len(s) - 1) / 2
	left, bridge, right := sorted(s[:half]), s[half], sorted(s[half+1:])
	g := Complete(left, right)
	g[bridge] = nil
	return g, nil
}

// MajoritiesRing arranges the nodes in a random ring where each node sees
// only its nearest neighbours: every node sees a majority, and no two
// nodes see the same majority (Jepsen's majorities-ring). It needs five
// nodes; with three every node would see everyone.
func MajoritiesRing(all []int, rng *rand.Rand) (Grudge, error) {
	n := len(all)
	if n < 5 {
		return nil, fmt.Errorf("%w: majorities ring needs 5, have %d", ErrTooFewNodes, n)
	}
	ring := shuffled(all, rng)
	reach := (n/2 + 1) / 2 // neighbours seen on each side; 2*reach+1 >= majority
	g := Grudge{}
	for i, node := range ring {
		for j, other := range ring {
			d := min((i-j+n)%n, (j-i+n)%n)
			if d > reach {
				g[node] = append(g[node], other)
			}
		}
		slices.Sort(g[node])
	}
	return g, nil
}

func shuffled(all []int, rng *rand.Rand) []int {
	s := slices.Clone(all)
	slices.Sort(s)
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

func sorted(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
