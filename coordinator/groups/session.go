package groups

import (
	"bytes"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// session is the soft state of one group on its coordinator. mu is held
// across the group's own proposals, so a group's transitions happen one
// at a time; offset commits do not take it for their proposal.
type session struct {
	mu   sync.Mutex
	name string
	dead bool // the coordinator was deactivated or the group deleted

	// A rebalance in progress: members (current or new) waiting in
	// JoinGroup. initial: the group was empty when it began, so it waits
	// InitialRebalanceDelay for more members (extended per join, up to
	// prepLimit).
	preparing    bool
	initial      bool
	prepDeadline time.Time
	prepLimit    time.Time
	joins        map[string]*joinWait
	seq          int

	// pending are member ids handed out with MEMBER_ID_REQUIRED, until
	// the member joins with it or its session timeout passes.
	pending map[string]time.Time

	// syncs are members waiting in SyncGroup for the leader's assignment;
	// syncDeadline ends the wait for it (zero: none running).
	syncs        map[string]func(*kmsg.SyncGroupResponse)
	syncVersions map[string]*kmsg.SyncGroupResponse
	syncDeadline time.Time

	// deadlines are the members' session deadlines.
	deadlines map[string]time.Time

	ticking atomic.Bool
}

// joinWait is a member waiting in JoinGroup.
type joinWait struct {
	member       *Member
	protocolType string
	version      int16
	seq          int
	reply        func(*kmsg.JoinGroupResponse)
	resp         *kmsg.JoinGroupResponse
}

func newSession(name string) *session {
	return &session{
		name: name, joins: map[string]*joinWait{}, pending: map[string]time.Time{},
		syncs: map[string]func(*kmsg.SyncGroupResponse){}, syncVersions: map[string]*kmsg.SyncGroupResponse{},
		deadlines: map[string]time.Time{},
	}
}

// loadSession builds the soft state of a replicated group on a new
// coordinator: fresh session timeouts for all, and restarted clocks for
// an unfinished rebalance.
func loadSession(g *Group, now time.Time) *session {
	s := newSession(g.Name)
	for id, m := range g.Members {
		s.deadlines[id] = now.Add(ms(m.SessionTimeoutMs))
	}
	switch g.Phase {
	case PhasePreparing:
		s.preparing, s.prepDeadline = true, now.Add(ms(g.maxRebalanceTimeoutMs()))
	case PhaseCompleting:
		s.syncDeadline = now.Add(ms(g.maxRebalanceTimeoutMs()))
	}
	return s
}

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

// failWaiters answers every waiting JoinGroup and SyncGroup with code.
func (s *session) failWaiters(code int16) {
	for id, j := range s.joins {
		j.resp.ErrorCode = code
		j.reply(j.resp)
		delete(s.joins, id)
	}
	s.failSyncs(code)
	s.preparing = false
}

func (s *session) failSyncs(code int16) {
	for id, reply := range s.syncs {
		resp := s.syncVersions[id]
		resp.ErrorCode = code
		reply(resp)
	}
	clear(s.syncs)
	clear(s.syncVersions)
}

// active reports whether the group has members or joiners.
func (s *session) active(g *Group) bool {
	return g != nil && len(g.Members) > 0 || len(s.joins) > 0 || s.preparing
}

// phase is the group's state as clients see it: soft preparing wins.
func (s *session) phase(g *Group) Phase {
	switch {
	case s != nil && s.preparing:
		return PhasePreparing
	case g == nil:
		return PhaseDead
	}
	return g.Phase
}

// startRebalance moves the group to preparing: waiting syncs learn that a
// rebalance began, and the join clock starts.
func (c *Coordinator) startRebalance(s *session, g *Group, now time.Time) {
	if s.preparing {
		return
	}
	s.preparing = true
	s.failSyncs(kerr.RebalanceInProgress.Code)
	s.syncDeadline = time.Time{}
	if g == nil || len(g.Members) == 0 {
		s.initial = true
		s.prepLimit = now.Add(ms(s.maxJoinRebalanceMs(nil)))
		s.prepDeadline = now.Add(c.cfg.InitialRebalanceDelay)
		if s.prepDeadline.After(s.prepLimit) {
			s.prepDeadline = s.prepLimit
		}
		return
	}
	s.initial = false
	s.prepDeadline = now.Add(ms(max(g.maxRebalanceTimeoutMs(), s.maxJoinRebalanceMs(g))))
}

func (s *session) maxJoinRebalanceMs(_ *Group) int32 {
	var t int32
	for _, j := range s.joins {
		t = max(t, j.member.RebalanceTimeoutMs)
	}
	return t
}

// addJoin records a member waiting in JoinGroup; a join it sent before
// (a retry) is answered with REBALANCE_IN_PROGRESS.
func (c *Coordinator) addJoin(s *session, j *joinWait, now time.Time) {
	if old := s.joins[j.member.ID]; old != nil {
		old.resp.ErrorCode = kerr.RebalanceInProgress.Code
		old.reply(old.resp)
	}
	s.seq++
	j.seq = s.seq
	s.joins[j.member.ID] = j
	if s.preparing && s.initial {
		next := now.Add(c.cfg.InitialRebalanceDelay)
		if next.After(s.prepLimit) {
			next = s.prepLimit
		}
		if next.After(s.prepDeadline) {
			s.prepDeadline = next
		}
	}
}

// maybeComplete ends the join phase once every current member has
// rejoined (an initial rebalance waits for its delay instead).
func (c *Coordinator) maybeComplete(s *session, g *Group, now time.Time) {
	if !s.preparing {
		return
	}
	if s.initial && c.cfg.InitialRebalanceDelay > 0 {
		return
	}
	if g != nil {
		for id := range g.Members {
			if s.joins[id] == nil {
				return
			}
		}
	}
	c.completeRebalance(s, g, now)
}

// completeRebalance proposes the next generation with the members that
// rejoined (the others are out), and answers their JoinGroups.
func (c *Coordinator) completeRebalance(s *session, g *Group, now time.Time) {
	joins := s.sortedJoins()
	prev := int32(0)
	if g != nil {
		prev = g.Generation
	}
	s.preparing, s.initial = false, false
	s.joins = map[string]*joinWait{}
	if len(joins) == 0 {
		if g != nil && len(g.Members) > 0 {
			c.proposeCode(&Command{NewGeneration: &NewGeneration{Group: s.name, PrevGeneration: prev,
				Generation: nextGeneration(prev), ProtocolType: g.ProtocolType, NowMs: now.UnixMilli()}})
		}
		clear(s.deadlines)
		return
	}
	ng := &NewGeneration{Group: s.name, PrevGeneration: prev, Generation: nextGeneration(prev),
		ProtocolType: joins[0].protocolType, Protocol: chooseProtocol(joins), NowMs: now.UnixMilli()}
	ng.Leader = joins[0].member.ID
	for _, j := range joins {
		ng.Members = append(ng.Members, j.member)
		if g != nil && g.Leader == j.member.ID {
			ng.Leader = g.Leader
		}
	}
	_, code := c.proposeCode(&Command{NewGeneration: ng})
	if code != 0 {
		for _, j := range joins {
			j.resp.ErrorCode = code
			j.reply(j.resp)
		}
		return
	}
	ng2 := c.cfg.Machine.Group(s.name)
	clear(s.deadlines)
	for _, j := range joins {
		s.deadlines[j.member.ID] = now.Add(ms(j.member.SessionTimeoutMs))
		fillJoin(j.resp, ng2, j.member.ID)
		j.reply(j.resp)
	}
	s.syncDeadline = now.Add(ms(ng2.maxRebalanceTimeoutMs()))
}

func (s *session) sortedJoins() []*joinWait {
	joins := make([]*joinWait, 0, len(s.joins))
	for _, j := range s.joins {
		joins = append(joins, j)
	}
	sort.Slice(joins, func(i, k int) bool { return joins[i].seq < joins[k].seq })
	return joins
}

// chooseProtocol picks, among the protocols every member supports, the
// one most members list first among those; ties go to the first member's
// preference order. Deterministic, so it could run on any replica.
func chooseProtocol(joins []*joinWait) string {
	var candidates []string
	for _, p := range joins[0].member.Protocols {
		all := true
		for _, j := range joins[1:] {
			all = all && j.member.supports(p.Name)
		}
		if all && !slices.Contains(candidates, p.Name) {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, j := range joins {
		for _, p := range j.member.Protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range candidates {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// fillJoin fills a successful JoinGroup answer from the group's state; the
// leader also gets every member's metadata for the chosen protocol.
func fillJoin(resp *kmsg.JoinGroupResponse, g *Group, memberID string) {
	resp.ErrorCode = 0
	resp.Generation = g.Generation
	resp.ProtocolType = kmsg.StringPtr(g.ProtocolType)
	resp.Protocol = kmsg.StringPtr(g.Protocol)
	resp.LeaderID = g.Leader
	resp.MemberID = memberID
	resp.Members = nil
	if g.Leader != memberID {
		return
	}
	for _, id := range g.MemberIDs() {
		m := g.Members[id]
		meta, _ := m.metadataFor(g.Protocol)
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.ProtocolMetadata = id, meta
		if m.InstanceID != "" {
			jm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		resp.Members = append(resp.Members, jm)
	}
}

// sameProtocols reports whether a rejoin changes nothing.
func sameProtocols(m *Member, protos []Protocol) bool {
	if len(m.Protocols) != len(protos) {
		return false
	}
	for i := range protos {
		if m.Protocols[i].Name != protos[i].Name || !bytes.Equal(m.Protocols[i].Metadata, protos[i].Metadata) {
			return false
		}
	}
	return true
}
