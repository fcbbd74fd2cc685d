package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveJoinGroup hands the join to the group's coordinator; the answer
// comes when the join phase ends.
func (n *Node) serveJoinGroup(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.JoinGroupRequest)
	coord, code := n.groupCoordinator(r.Group)
	if code != 0 {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, r.MemberID
		return kafka.Ready(resp)
	}
	f := kafka.NewFuture()
	cl := clientOf(c)
	go coord.Join(r, cl, func(resp *kmsg.JoinGroupResponse) { f.Complete(resp, nil) })
	return f
}
