package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveLeaveGroup removes members (a batch from v3) through the group's
// coordinator.
func (n *Node) serveLeaveGroup(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.LeaveGroupRequest)
	coord, code := n.groupCoordinator(r.Group)
	if code != 0 {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		for _, m := range r.Members {
			lm := kmsg.NewLeaveGroupResponseMember()
			lm.MemberID, lm.InstanceID, lm.ErrorCode = m.MemberID, m.InstanceID, code
			resp.Members = append(resp.Members, lm)
		}
		return kafka.Ready(resp)
	}
	return runAsync(func() kmsg.Response { return coord.Leave(r) })
}
