package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveSyncGroup hands the sync to the group's coordinator; followers wait
// for the leader's assignment.
func (n *Node) serveSyncGroup(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.SyncGroupRequest)
	coord, code := n.groupCoordinator(r.Group)
	if code != 0 {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return kafka.Ready(resp)
	}
	f := kafka.NewFuture()
	go coord.Sync(r, func(resp *kmsg.SyncGroupResponse) { f.Complete(resp, nil) })
	return f
}
