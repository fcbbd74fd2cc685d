package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveHeartbeat extends a member's session on the group's coordinator;
// any other node answers NOT_COORDINATOR.
func (n *Node) serveHeartbeat(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.HeartbeatRequest)
	coord, code := n.groupCoordinator(r.Group)
	if code != 0 {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return kafka.Ready(resp)
	}
	return runAsync(func() kmsg.Response { return coord.Heartbeat(r) })
}
