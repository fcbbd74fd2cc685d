package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveDescribeCluster lists the brokers, the cluster id and the metadata
// leader as controller.
func (n *Node) serveDescribeCluster(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = n.cfg.ClusterID
	resp.ControllerID = n.controllerID()
	for _, b := range n.brokerList(n.meta.View()) {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, db)
	}
	return kafka.Ready(resp)
}
