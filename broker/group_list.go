package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveListGroups lists the groups this node coordinates, as Kafka
// brokers do (admin clients ask every broker). All of raftq's groups are
// of the classic type.
func (n *Node) serveListGroups(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.ListGroupsRequest)
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	if len(r.TypesFilter) > 0 && !slices.ContainsFunc(r.TypesFilter, func(t string) bool { return strings.EqualFold(t, "classic") }) {
		return kafka.Ready(resp)
	}
	for _, c := range n.localCoordinators() {
		list, code := c.List()
		if code != 0 {
			continue
		}
		for _, g := range list {
			if len(r.StatesFilter) > 0 && !slices.ContainsFunc(r.StatesFilter, func(s string) bool { return strings.EqualFold(s, string(g.State)) }) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Name, g.ProtocolType, string(g.State), "classic"
			resp.Groups = append(resp.Groups, lg)
		}
	}
	return kafka.Ready(resp)
}
