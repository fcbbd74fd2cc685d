package groups

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client describes the connection a request came from.
type Client struct {
	ID   string // the Kafka client id
	Host string // as Kafka shows it: "/127.0.0.1"
}

// Join handles a JoinGroup. reply is called exactly once, maybe later
// (when the rebalance completes) and from another goroutine.
func (c *Coordinator) Join(req *kmsg.JoinGroupRequest, cl Client, reply func(*kmsg.JoinGroupResponse)) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(""), kmsg.StringPtr("")
	fail := func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	}
	if code := c.checkJoin(req); code != 0 {
		fail(code)
		return
	}
	s, code := c.lockSession(req.Group)
	if code != 0 {
		fail(code)
		return
	}
	defer s.mu.Unlock()
	j := &joinWait{protocolType: req.ProtocolType, version: req.Version, reply: reply, resp: resp,
		member: c.joinMember(req, cl)}
	if code := c.join(s, c.cfg.Machine.Group(req.Group), j, c.cfg.Now()); code != 0 {
		fail(code)
	}
}

// checkJoin validates what a JoinGroup says about itself.
func (c *Coordinator) checkJoin(req *kmsg.JoinGroupRequest) int16 {
	st := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	switch {
	case req.Group == "":
		return kerr.InvalidGroupID.Code
	case st < c.cfg.MinSessionTimeout || st > c.cfg.MaxSessionTimeout:
		return kerr.InvalidSessionTimeout.Code
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return kerr.InconsistentGroupProtocol.Code
	}
	size := 0
	for _, p := range req.Protocols {
		size += len(p.Metadata)
	}
	if size > c.cfg.MaxMetadataBytes {
		return kerr.MessageTooLarge.Code
	}
	return 0
}

func (c *Coordinator) joinMember(req *kmsg.JoinGroupRequest, cl Client) *Member {
	m := &Member{ID: req.MemberID, ClientID: cl.ID, ClientHost: cl.Host,
		SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: req.RebalanceTimeoutMillis}
	if req.InstanceID != nil {
		m.InstanceID = *req.InstanceID
	}
	if req.Version == 0 || m.RebalanceTimeoutMs <= 0 {
		m.RebalanceTimeoutMs = m.SessionTimeoutMs // v0 has no rebalance timeout
	}
	for _, p := range req.Protocols {
		m.Protocols = append(m.Protocols, Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	return m
}

// join runs the JoinGroup state machine under s.mu; a non-zero code is
// answered at once and changes nothing.
func (c *Coordinator) join(s *session, g *Group, j *joinWait, now time.Time) int16 {
	m := j.member
	if !s.protocolsMatch(g, j) {
		return kerr.InconsistentGroupProtocol.Code
	}
	if m.ID == "" {
		return c.joinNew(s, g, j, now)
	}
	if m.InstanceID != "" {
		if id, ok := g.staticMember(m.InstanceID); ok && id != m.ID {
			return kerr.FencedInstanceID.Code
		}
	}
	if _, ok := s.pending[m.ID]; ok {
		delete(s.pending, m.ID)
		c.enterJoin(s, g, j, now)
		return 0
	}
	if s.joins[m.ID] != nil && (g == nil || g.Members[m.ID] == nil) {
		c.enterJoin(s, g, j, now) // a new member's retried join
		return 0
	}
	cur := g.member(m.ID)
	if cur == nil {
		return kerr.UnknownMemberID.Code
	}
	if !s.preparing && g.Phase != PhasePreparing && sameProtocols(cur, m.Protocols) &&
		(g.Phase == PhaseCompleting || g.Phase == PhaseStable && g.Leader != m.ID) {
		// Nothing changes: answer with the current generation.
		fillJoin(j.resp, g, m.ID)
		j.reply(j.resp)
		return 0
	}
	c.enterJoin(s, g, j, now)
	return 0
}

// joinNew handles a join without a member id.
func (c *Coordinator) joinNew(s *session, g *Group, j *joinWait, now time.Time) int16 {
	m := j.member
	if m.InstanceID != "" {
		if old, ok := g.staticMember(m.InstanceID); ok {
			return c.replaceStatic(s, g, old, j, now)
		}
		for id, w := range s.joins {
			if w.member.InstanceID == m.InstanceID { // an unfinished join of the same instance is fenced
				w.resp.ErrorCode = kerr.FencedInstanceID.Code
				w.reply(w.resp)
				delete(s.joins, id)
			}
		}
	}
	m.ID = newMemberID(m.ClientID, m.InstanceID)
	if j.version >= 4 && m.InstanceID == "" {
		s.pending[m.ID] = now.Add(ms(m.SessionTimeoutMs))
		j.resp.MemberID = m.ID
		return kerr.MemberIDRequired.Code
	}
	c.enterJoin(s, g, j, now)
	return 0
}

// enterJoin adds the member to the join phase, starting one if needed.
func (c *Coordinator) enterJoin(s *session, g *Group, j *joinWait, now time.Time) {
	c.addJoin(s, j, now)
	c.startRebalance(s, g, now)
	c.maybeComplete(s, g, now)
}

// replaceStatic handles a static member that rejoins without its member
// id: it gets a new id and the old one is fenced. In a stable group with
// unchanged protocols it keeps its assignment without a rebalance; the
// leader is told to skip assigning (KIP-814).
func (c *Coordinator) replaceStatic(s *session, g *Group, oldID string, j *joinWait, now time.Time) int16 {
	old := g.Members[oldID]
	m := j.member
	m.ID = newMemberID(m.ClientID, m.InstanceID)
	_, code := c.proposeCode(&Command{ReplaceStatic: &ReplaceStatic{Group: s.name, OldID: oldID, Member: m}})
	if code != 0 {
		return code
	}
	if w := s.joins[oldID]; w != nil {
		w.resp.ErrorCode = kerr.FencedInstanceID.Code
		w.reply(w.resp)
		delete(s.joins, oldID)
	}
	if reply := s.syncs[oldID]; reply != nil {
		resp := s.syncVersions[oldID]
		resp.ErrorCode = kerr.FencedInstanceID.Code
		reply(resp)
		delete(s.syncs, oldID)
		delete(s.syncVersions, oldID)
	}
	delete(s.deadlines, oldID)
	s.deadlines[m.ID] = now.Add(ms(m.SessionTimeoutMs))
	g = c.cfg.Machine.Group(s.name)
	if !s.preparing && g.Phase == PhaseStable && sameProtocols(old, m.Protocols) {
		fillJoin(j.resp, g, m.ID)
		j.resp.SkipAssignment = g.Leader == m.ID
		j.reply(j.resp)
		return 0
	}
	c.enterJoin(s, g, j, now)
	return 0
}

// protocolsMatch reports whether the joiner can be in the group: same
// protocol type, and a protocol every other member (current or joining)
// supports too.
func (s *session) protocolsMatch(g *Group, j *joinWait) bool {
	others := map[string]*Member{}
	ptype := ""
	if g != nil && len(g.Members) > 0 {
		ptype = g.ProtocolType
		for id, m := range g.Members {
			others[id] = m
		}
	}
	for id, w := range s.joins {
		others[id], ptype = w.member, w.protocolType
	}
	delete(others, j.member.ID)
	if len(others) == 0 {
		return true
	}
	if ptype != j.protocolType {
		return false
	}
	for _, p := range j.member.Protocols {
		all := true
		for _, o := range others {
			all = all && o.supports(p.Name)
		}
		if all {
			return true
		}
	}
	return false
}

// staticMember is StaticMember on a possibly nil group.
func (g *Group) staticMember(inst string) (string, bool) {
	if g == nil {
		return "", false
	}
	return g.StaticMember(inst)
}

// member returns a current member, or nil.
func (g *Group) member(id string) *Member {
	if g == nil {
		return nil
	}
	return g.Members[id]
}
