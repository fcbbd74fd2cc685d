package groups

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leave handles a LeaveGroup (a batch of members from v3). Members that
// leave are removed through one proposal; the rest rebalance.
func (c *Coordinator) Leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	for _, rm := range members {
		lm := kmsg.NewLeaveGroupResponseMember()
		lm.MemberID, lm.InstanceID = rm.MemberID, rm.InstanceID
		resp.Members = append(resp.Members, lm)
	}
	setAll := func(code int16) {
		for i := range resp.Members {
			resp.Members[i].ErrorCode = code
		}
	}
	defer func() {
		if req.Version < 3 {
			resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
		}
	}()
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		setAll(resp.ErrorCode)
		return resp
	}
	s, code := c.lockSession(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		setAll(code)
		return resp
	}
	defer s.mu.Unlock()
	c.leave(s, resp)
	return resp
}

// leave resolves each leaving member and removes the current ones.
func (c *Coordinator) leave(s *session, resp *kmsg.LeaveGroupResponse) {
	g := c.cfg.Machine.Group(s.name)
	var remove []int
	var ids []string
	for i := range resp.Members {
		lm := &resp.Members[i]
		id, code := s.resolveLeaver(g, lm.MemberID, lm.InstanceID)
		lm.ErrorCode, lm.MemberID = code, id
		if code != 0 {
			continue
		}
		if w := s.joins[id]; w != nil {
			w.resp.ErrorCode = kerr.UnknownMemberID.Code
			w.reply(w.resp)
			delete(s.joins, id)
		}
		delete(s.pending, id)
		if g.member(id) != nil {
			remove, ids = append(remove, i), append(ids, id)
		}
	}
	if len(ids) == 0 {
		c.afterDeparture(s)
		return
	}
	now := c.cfg.Now()
	if _, code := c.proposeCode(&Command{Remove: &Remove{Group: s.name, Members: ids, NowMs: now.UnixMilli()}}); code != 0 {
		for _, i := range remove {
			resp.Members[i].ErrorCode = code
		}
		return
	}
	for _, id := range ids {
		delete(s.deadlines, id)
		delete(s.syncs, id)
		delete(s.syncVersions, id)
	}
	c.afterDeparture(s)
}

// afterDeparture starts (or finishes) the rebalance that members leaving
// call for.
func (c *Coordinator) afterDeparture(s *session) {
	now := c.cfg.Now()
	g := c.cfg.Machine.Group(s.name)
	if g != nil && len(g.Members) > 0 || len(s.joins) > 0 {
		c.startRebalance(s, g, now)
		c.maybeComplete(s, g, now)
		return
	}
	s.preparing = false
}

// resolveLeaver finds the member a LeaveGroup entry names.
func (s *session) resolveLeaver(g *Group, memberID string, instanceID *string) (string, int16) {
	if instanceID != nil && *instanceID != "" {
		id, ok := g.staticMember(*instanceID)
		if !ok {
			for jid, w := range s.joins {
				if w.member.InstanceID == *instanceID {
					id, ok = jid, true
				}
			}
		}
		if !ok {
			return memberID, kerr.UnknownMemberID.Code
		}
		if memberID != "" && memberID != id {
			return memberID, kerr.FencedInstanceID.Code
		}
		return id, 0
	}
	if g.member(memberID) != nil || s.joins[memberID] != nil {
		return memberID, 0
	}
	if _, ok := s.pending[memberID]; ok {
		return memberID, 0
	}
	return memberID, kerr.UnknownMemberID.Code
}
