package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveDescribeCluster lists the live brokers (as Metadata does), the
// cluster id and the metadata leader as controller. From v2 a client may
// ask for the registered brokers that are not live too, marked fenced.
func (n *Node) serveDescribeCluster(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = n.cfg.ClusterID
	resp.ControllerID = n.controllerID()
	for _, b := range n.brokers(n.meta.View(), c.Listener()) {
		if b.fenced && !r.IncludeFencedBrokers {
			continue
		}
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = b.NodeID, b.Host, b.Port, b.Rack
		db.IsFenced = b.fenced
		resp.Brokers = append(resp.Brokers, db)
	}
	return kafka.Ready(resp)
}
