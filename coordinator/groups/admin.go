package groups

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Listed is one group as ListGroups shows it.
type Listed struct {
	Name, ProtocolType string
	State              Phase
}

// List returns the groups this coordinator serves, sorted.
func (c *Coordinator) List() ([]Listed, int16) {
	if code := c.Check(); code != 0 {
		return nil, code
	}
	var out []Listed
	seen := map[string]bool{}
	for _, g := range c.cfg.Machine.Groups() {
		s, _ := c.session(g.Name, false)
		out = append(out, Listed{Name: g.Name, ProtocolType: g.ProtocolType, State: c.phaseOf(s, g)})
		seen[g.Name] = true
	}
	for _, s := range c.sessionList() {
		if seen[s.name] {
			continue
		}
		s.mu.Lock()
		if !s.dead && len(s.joins) > 0 {
			pt := ""
			for _, j := range s.joins {
				pt = j.protocolType
			}
			out = append(out, Listed{Name: s.name, ProtocolType: pt, State: PhasePreparing})
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, 0
}

// phaseOf reads a group's phase, soft state included, without waiting on
// a group busy with a proposal (it then reports the replicated phase).
func (c *Coordinator) phaseOf(s *session, g *Group) Phase {
	if s != nil && s.mu.TryLock() {
		defer s.mu.Unlock()
		return s.phase(g)
	}
	return (*session)(nil).phase(g)
}

// Described is one group as DescribeGroups shows it.
type Described struct {
	Group   *Group // nil: no such group
	State   Phase
	Members []*Member // sorted by id
}

// Describe returns the group's state and members.
func (c *Coordinator) Describe(name string) (Described, int16) {
	if code := c.Check(); code != 0 {
		return Described{}, code
	}
	g := c.cfg.Machine.Group(name)
	s, _ := c.session(name, false)
	d := Described{Group: g, State: c.phaseOf(s, g)}
	if g == nil {
		return d, 0
	}
	for _, id := range g.MemberIDs() {
		d.Members = append(d.Members, g.Members[id])
	}
	return d, 0
}

// DeleteGroups deletes the named groups with their offsets; a group with
// members (or members joining) gets NON_EMPTY_GROUP.
func (c *Coordinator) DeleteGroups(names []string) map[string]int16 {
	out := map[string]int16{}
	// Sessions are locked in name order, once each, so two deletions
	// never wait on each other.
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	var del []string
	var locked []*session
	defer func() {
		for _, s := range locked {
			s.mu.Unlock()
		}
	}()
	for _, name := range names {
		if name == "" {
			out[name] = kerr.InvalidGroupID.Code
			continue
		}
		s, code := c.lockSession(name)
		if code != 0 {
			out[name] = code
			continue
		}
		locked = append(locked, s)
		if len(s.joins) > 0 || s.preparing {
			out[name] = kerr.NonEmptyGroup.Code
			continue
		}
		del = append(del, name)
	}
	if len(del) == 0 {
		return out
	}
	res, code := c.proposeCode(&Command{DeleteGroups: &DeleteGroups{Groups: del}})
	for _, name := range del {
		if code != 0 {
			out[name] = code
		} else {
			out[name] = res.Codes[name]
		}
	}
	return out
}
