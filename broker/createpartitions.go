package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// serveCreatePartitions grows topics; new partitions are placed like a new
// topic's and get their own raft groups.
func (n *Node) serveCreatePartitions(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.CreatePartitionsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(r.TimeoutMillis))
		defer cancel()
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, rt := range r.Topics {
			out := kmsg.NewCreatePartitionsResponseTopic()
			out.Topic = rt.Topic
			cmd := &coordinator.Command{CreatePartitions: &coordinator.CreatePartitions{Name: rt.Topic, Count: rt.Count}}
			var res coordinator.Result
			var err error
			if r.ValidateOnly {
				res = n.meta.Try(cmd)
			} else {
				res, err = n.ctl.Propose(ctx, cmd)
			}
			if err = firstErr(metaKafkaError(err), res.Err); err != nil {
				out.ErrorCode, out.ErrorMessage = coordinator.KafkaError(err)
			} else if !r.ValidateOnly {
				n.awaitLeaders(ctx, rt.Topic)
			}
			resp.Topics = append(resp.Topics, out)
		}
		f.Complete(resp, nil)
	}()
	return f
}
