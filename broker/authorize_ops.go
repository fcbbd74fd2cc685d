package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// supportedOps are the operations each resource type answers in KIP-430's
// authorized-operations bitfields, Kafka's AclEntry.supportedOperations.
var supportedOps = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
}

// authorizedOps is KIP-430's bitfield (bit n is operation code n) of
// what c may do on the resource; with the authorizer off, every
// supported operation, as Kafka without an authorizer answers.
func (n *Node) authorizedOps(c *kafka.Conn, typ kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOps[typ] {
		if n.allowedQuiet(c, op, typ, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// fillMetadataOps sets the authorized operations a Metadata request
// asked for (v8+): each topic's answered without error, and the
// cluster's (v8-v10).
func (n *Node) fillMetadataOps(c *kafka.Conn, r *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) *kmsg.MetadataResponse {
	if r.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if t.ErrorCode == 0 && t.Topic != nil {
				t.AuthorizedOperations = n.authorizedOps(c, kmsg.ACLResourceTypeTopic, *t.Topic)
			}
		}
	}
	if r.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = n.authorizedOps(c, kmsg.ACLResourceTypeCluster, clusterResource)
	}
	return resp
}

// describeGroupsOps sets each described group's authorized operations
// when the request asks (v3+).
func describeGroupsOps(n *Node, c *kafka.Conn, _ int16, req kmsg.Request, resp kmsg.Response) {
	if !req.(*kmsg.DescribeGroupsRequest).IncludeAuthorizedOperations {
		return
	}
	r := resp.(*kmsg.DescribeGroupsResponse)
	for i := range r.Groups {
		if g := &r.Groups[i]; g.ErrorCode == 0 {
			g.AuthorizedOperations = n.authorizedOps(c, kmsg.ACLResourceTypeGroup, g.Group)
		}
	}
}

// describeClusterOps sets the cluster's authorized operations when the
// request asks.
func describeClusterOps(n *Node, c *kafka.Conn, _ int16, req kmsg.Request, resp kmsg.Response) {
	if req.(*kmsg.DescribeClusterRequest).IncludeClusterAuthorizedOperations {
		r := resp.(*kmsg.DescribeClusterResponse)
		r.ClusterAuthorizedOperations = n.authorizedOps(c, kmsg.ACLResourceTypeCluster, clusterResource)
	}
}
