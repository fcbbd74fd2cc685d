package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/raftq/raftq/raftgroup"
)

// client is one outstanding proposal.
type client struct {
	group uint64
	data  string
	p     *raftgroup.Proposal
}

var ctxBackground = context.Background()

// offerLoad proposes, per group, to whichever live node believes it
// leads, as a Kafka client following leader hints would. A turn proposes a
// burst of one to four entries, so that the group coalesces small
// proposals into one raft entry as it does under load.
func (s *Sim) offerLoad() {
	for g := uint64(1); g <= uint64(s.cfg.Groups); g++ {
		if s.rng.Float64() >= s.cfg.ProposeRate {
			continue
		}
		for i := range 1 + s.rng.IntN(4) {
			s.propose(g, fmt.Sprintf("g%d-t%d-%d", g, s.now, i))
		}
	}
	s.offerProduce()
	s.offerMachines()
}

func failed(c *client) bool {
	select {
	case <-c.p.Done():
		_, err := c.p.Wait(ctxBackground)
		return err != nil
	default:
		return false
	}
}

// proposeToLeader submits parts to the first live node, in id order, that
// believes it leads the group and takes the proposal, as a client
// following leader hints would; nil and 0 if none does.
func (s *Sim) proposeToLeader(group uint64, parts ...[]byte) (*raftgroup.Proposal, uint64) {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		g := n.host.Group(group)
		if g == nil || !g.Status().IsLeader() {
			continue
		}
		if p, err := g.Propose(ctxBackground, parts...); err == nil {
			return p, n.id
		}
	}
	return nil, 0
}

// propose submits data to the group's believed leader; nil if none.
func (s *Sim) propose(group uint64, data string) *client {
	p, leader := s.proposeToLeader(group, []byte(data))
	if p == nil {
		return nil
	}
	c := &client{group: group, data: data, p: p}
	s.clients = append(s.clients, c)
	s.traceEvent("propose", group)
	s.note("group %d: %q proposed to node %d", group, data, leader)
	return c
}

// pollClients records acknowledged proposals without blocking.
func (s *Sim) pollClients() {
	kept := s.clients[:0]
	for _, c := range s.clients {
		select {
		case <-c.p.Done():
			res, err := c.p.Wait(ctxBackground)
			if err == nil {
				p, ok := res.Value.(pos)
				if !ok {
					s.chk.fail("proposal %q applied with %T, not its log position", c.data, res.Value)
				}
				s.chk.onAck(c.group, p, c.data)
				s.res.Acked++
			} else if !expectedFailure(err) {
				s.chk.fail("proposal %q failed unexpectedly: %s", c.data, err)
			}
		default:
			kept = append(kept, c)
		}
	}
	clear(s.clients[len(kept):])
	s.clients = kept
}

func expectedFailure(err error) bool {
	return errors.Is(err, raftgroup.ErrNotLeader) || errors.Is(err, raftgroup.ErrProposalDropped) ||
		errors.Is(err, raftgroup.ErrProposalLost) || errors.Is(err, raftgroup.ErrOutcomeUnknown) ||
		errors.Is(err, raftgroup.ErrStopped)
}

// finish heals the cluster, restarts every node, and requires each group
// to commit a final marker on every replica within a bounded time; then
// runs the final checks.
func (s *Sim) finish() error {
	s.final = true
	s.heal()
	for _, n := range s.nodes {
		if !n.up {
			if err := s.boot(n); err != nil {
				return err
			}
		}
	}
	for g := uint64(1); g <= uint64(s.cfg.Groups); g++ {
		marker := fmt.Sprintf("final-g%d", g)
		var c *client
		ok := s.until(600, func() bool {
			if s.allApplied(g, marker) {
				return true
			}
			if c == nil || failed(c) {
				c = s.propose(g, marker)
			}
			return false
		})
		if !ok {
			s.chk.fail("group %d: no final marker applied on every replica within 600 ticks of healing", g)
		}
	}
	var nodes, groups []uint64
	for _, n := range s.nodes {
		nodes = append(nodes, n.id)
	}
	for g := uint64(1); g <= uint64(s.cfg.Groups); g++ {
		groups = append(groups, g)
	}
	// A proposal whose outcome was unknown (its node crashed, say) may
	// still commit after its group's marker: give every replica time to
	// apply it too. A replica that never catches up fails the check.
	s.until(600, func() bool { return s.chk.converged(nodes, groups) })
	s.chk.final(nodes, groups)
	s.finishPartitions()
	s.finishISR()
	s.finishMachines()
	for _, r := range s.chk.replicas {
		s.res.Applied += len(r)
	}
	s.res.Applied += s.mach.states.applies()
	s.res.Restores = s.mach.states.compared
	for _, n := range s.nodes {
		n.host.Close()
	}
	return nil
}

// until steps (without new load) until cond holds, at most limit ticks.
func (s *Sim) until(limit int, cond func() bool) bool {
	for i := 0; i < limit; i++ {
		if cond() {
			return true
		}
		s.retryOffline() // repairs go on after healing too
		s.step(false)
	}
	return cond()
}

func (s *Sim) allApplied(group uint64, marker string) bool {
	for _, n := range s.nodes {
		if !slices.ContainsFunc(s.chk.replicas[[2]uint64{n.id, group}], func(r record) bool { return r.Data == marker }) {
			return false
		}
	}
	return true
}
