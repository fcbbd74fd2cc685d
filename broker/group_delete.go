package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/transport/kafka"
)

// serveDeleteGroups deletes empty groups (NON_EMPTY_GROUP otherwise) with
// their offsets, each through its coordinator.
func (n *Node) serveDeleteGroups(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	return runAsync(func() kmsg.Response {
		codes := map[string]int16{}
		byCoord := map[*groups.Coordinator][]string{}
		for _, name := range r.Groups {
			coord, code := n.groupCoordinator(name)
			if code != 0 {
				codes[name] = code
				continue
			}
			byCoord[coord] = append(byCoord[coord], name)
		}
		for coord, names := range byCoord {
			for name, code := range coord.DeleteGroups(names) {
				codes[name] = code
			}
		}
		for _, name := range r.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = name, codes[name]
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	})
}
