package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/transport/kafka"
)

// serveDescribeGroups describes each group from its coordinator: state,
// protocol, and members with their metadata and assignment. An unknown
// group is "Dead" with no error, as Kafka answers before v6.
func (n *Node) serveDescribeGroups(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range r.Groups {
		resp.Groups = append(resp.Groups, n.describeGroup(name))
	}
	return kafka.Ready(resp)
}

func (n *Node) describeGroup(name string) kmsg.DescribeGroupsResponseGroup {
	out := kmsg.NewDescribeGroupsResponseGroup()
	out.Group = name
	coord, code := n.groupCoordinator(name)
	if code != 0 {
		out.ErrorCode = code
		return out
	}
	d, code := coord.Describe(name)
	out.ErrorCode, out.State = code, string(d.State)
	if code != 0 || d.Group == nil {
		return out
	}
	g := d.Group
	out.ProtocolType = g.ProtocolType
	if d.State == groups.PhaseStable || d.State == groups.PhaseCompleting {
		out.Protocol = g.Protocol
	}
	for _, m := range d.Members {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost, dm.MemberAssignment = m.ID, m.ClientID, m.ClientHost, m.Assignment
		if m.InstanceID != "" {
			dm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		for _, p := range m.Protocols {
			if p.Name == g.Protocol {
				dm.ProtocolMetadata = p.Metadata
			}
		}
		out.Members = append(out.Members, dm)
	}
	return out
}
