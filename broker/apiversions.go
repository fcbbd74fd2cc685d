package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveApiVersions advertises every API the mux serves. The server itself
// answers unsupported ApiVersions versions, as Kafka does.
func (n *Node) serveApiVersions(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	resp := req.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = kafka.APIKeys(n.apis)
	return kafka.Ready(resp)
}
