package groups

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// emptyConsumerAssignment is an encoded ConsumerMemberAssignment with no
// partitions, given to "consumer" members the leader left out, so that
// every follower can decode what it gets.
var emptyConsumerAssignment = func() []byte {
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}()

// Sync handles a SyncGroup. reply is called exactly once, maybe later.
func (c *Coordinator) Sync(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) {
		resp.ErrorCode = code
		reply(resp)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	s, code := c.lockSession(req.Group)
	if code != 0 {
		fail(code)
		return
	}
	defer s.mu.Unlock()
	g := c.cfg.Machine.Group(req.Group)
	if code := c.checkSync(s, g, req); code != 0 {
		fail(code)
		return
	}
	if g.Phase == PhaseStable {
		fillSync(resp, g, req.MemberID)
		reply(resp)
		return
	}
	// Completing: wait for the leader's assignment, or bring it.
	s.deadlines[req.MemberID] = c.cfg.Now().Add(ms(g.Members[req.MemberID].SessionTimeoutMs))
	s.syncs[req.MemberID], s.syncVersions[req.MemberID] = reply, resp
	if req.MemberID == g.Leader {
		c.completeSync(s, g, req)
	}
}

// checkSync validates a SyncGroup against the group; 0 means go on.
func (c *Coordinator) checkSync(s *session, g *Group, req *kmsg.SyncGroupRequest) int16 {
	if code := checkMember(g, req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	switch {
	case req.Generation != g.Generation:
		return kerr.IllegalGeneration.Code
	case req.ProtocolType != nil && *req.ProtocolType != g.ProtocolType,
		req.Protocol != nil && *req.Protocol != g.Protocol:
		return kerr.InconsistentGroupProtocol.Code
	case s.preparing || g.Phase == PhasePreparing:
		return kerr.RebalanceInProgress.Code
	case g.Phase != PhaseCompleting && g.Phase != PhaseStable:
		return kerr.UnknownMemberID.Code
	}
	if req.MemberID == g.Leader && g.Phase == PhaseCompleting {
		for _, a := range req.GroupAssignment {
			if len(a.MemberAssignment) > c.cfg.MaxMetadataBytes {
				return kerr.MessageTooLarge.Code
			}
		}
	}
	return 0
}

// checkMember resolves a member (and its static instance) in g.
func checkMember(g *Group, memberID string, instanceID *string) int16 {
	if instanceID != nil && *instanceID != "" {
		id, ok := g.staticMember(*instanceID)
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if id != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.member(memberID) == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// completeSync stores the leader's assignment and answers every member
// waiting in SyncGroup.
func (c *Coordinator) completeSync(s *session, g *Group, req *kmsg.SyncGroupRequest) {
	as := map[string][]byte{}
	for _, a := range req.GroupAssignment {
		if g.Members[a.MemberID] != nil {
			as[a.MemberID] = a.MemberAssignment
		}
	}
	_, code := c.proposeCode(&Command{Assign: &Assign{Group: s.name, Generation: g.Generation, Assignments: as}})
	if code != 0 {
		s.failSyncs(code)
		return
	}
	s.syncDeadline = time.Time{}
	g = c.cfg.Machine.Group(s.name)
	for id, reply := range s.syncs {
		resp := s.syncVersions[id]
		fillSync(resp, g, id)
		reply(resp)
	}
	clear(s.syncs)
	clear(s.syncVersions)
}

func fillSync(resp *kmsg.SyncGroupResponse, g *Group, memberID string) {
	resp.ErrorCode = 0
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.ProtocolType), kmsg.StringPtr(g.Protocol)
	resp.MemberAssignment = g.Members[memberID].Assignment
	if len(resp.MemberAssignment) == 0 && g.ProtocolType == "consumer" {
		resp.MemberAssignment = emptyConsumerAssignment
	}
}

// Heartbeat handles a Heartbeat: it extends the member's session and
// tells it whether a rebalance is on.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	s, code := c.lockSession(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer s.mu.Unlock()
	g := c.cfg.Machine.Group(req.Group)
	if code := checkMember(g, req.MemberID, req.InstanceID); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if req.Generation != g.Generation {
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp
	}
	s.deadlines[req.MemberID] = c.cfg.Now().Add(ms(g.Members[req.MemberID].SessionTimeoutMs))
	if s.preparing || g.Phase == PhasePreparing {
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return resp
}
