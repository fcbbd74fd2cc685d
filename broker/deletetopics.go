package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// serveDeleteTopics removes topics from the metadata; every node then drops
// its replicas and their data (reconcile.go).
func (n *Node) serveDeleteTopics(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(r.TimeoutMillis))
		defer cancel()
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, rt := range deleteTargets(r) {
			resp.Topics = append(resp.Topics, n.deleteTopic(ctx, rt))
		}
		f.Complete(resp, nil)
	}()
	return f
}

// deleteTargets unifies v0-5's names and v6's names-or-ids.
func deleteTargets(r *kmsg.DeleteTopicsRequest) []kmsg.DeleteTopicsRequestTopic {
	if r.Version >= 6 {
		return r.Topics
	}
	out := make([]kmsg.DeleteTopicsRequestTopic, len(r.TopicNames))
	for i := range r.TopicNames {
		out[i] = kmsg.NewDeleteTopicsRequestTopic()
		out[i].Topic = &r.TopicNames[i]
	}
	return out
}

func (n *Node) deleteTopic(ctx context.Context, rt kmsg.DeleteTopicsRequestTopic) kmsg.DeleteTopicsResponseTopic {
	out := kmsg.NewDeleteTopicsResponseTopic()
	out.Topic, out.TopicID = rt.Topic, rt.TopicID
	t := lookupTopic(n.meta.View(), rt.Topic, rt.TopicID)
	if t == nil {
		out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if rt.Topic == nil {
			out.ErrorCode = kerr.UnknownTopicID.Code
		}
		return out
	}
	name := t.Name
	out.Topic, out.TopicID = &name, t.ID
	res, err := n.ctl.Propose(ctx, &coordinator.Command{DeleteTopic: &coordinator.DeleteTopic{Name: name}})
	if err = firstErr(metaKafkaError(err), res.Err); err != nil {
		out.ErrorCode, out.ErrorMessage = coordinator.KafkaError(err)
	}
	return out
}
