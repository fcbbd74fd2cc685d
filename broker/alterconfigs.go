package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// serveIncrementalAlterConfigs sets and deletes topic configs. Every node
// applies the new values to its open replicas once the metadata change
// reaches it (applyTopicConfigs).
func (n *Node) serveIncrementalAlterConfigs(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(0))
		defer cancel()
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range r.Resources {
			out := kmsg.NewIncrementalAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
			out.ErrorCode, out.ErrorMessage = n.alterTopicConfigs(ctx, rr, r.ValidateOnly)
			resp.Resources = append(resp.Resources, out)
		}
		f.Complete(resp, nil)
	}()
	return f
}

func (n *Node) alterTopicConfigs(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, *string) {
	ac := &coordinator.AlterConfigs{Name: rr.ResourceName, Set: map[string]string{}, ConfigVersion: coordinator.CurrentConfigVersion}
	for _, c := range rr.Configs {
		switch {
		case c.Op == 0 && c.Value != nil:
			ac.Set[c.Name] = *c.Value
		case c.Op == 1 && !coordinator.KnownTopicConfig(c.Name):
			// As Kafka: deleting a key no topic can have is an error,
			// not a change that did nothing.
			msg := "Unknown topic config name: " + c.Name
			return kerr.InvalidConfig.Code, &msg
		case c.Op == 1:
			ac.Delete = append(ac.Delete, c.Name)
		default:
			msg := "only SET and DELETE are supported"
			return kerr.InvalidConfig.Code, &msg
		}
	}
	return n.alterTopic(ctx, rr.ResourceType, ac, validateOnly)
}

// serveAlterConfigs is the older, non-incremental AlterConfigs that
// sarama's ClusterAdmin and older tools send: the configs a request names
// replace all of the topic's explicit ones, as in Kafka; those it leaves
// out return to their defaults.
func (n *Node) serveAlterConfigs(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.AlterConfigsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(0))
		defer cancel()
		resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range r.Resources {
			out := kmsg.NewAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
			ac := &coordinator.AlterConfigs{Name: rr.ResourceName, Set: map[string]string{}, Replace: true, ConfigVersion: coordinator.CurrentConfigVersion}
			for _, c := range rr.Configs {
				if c.Value != nil {
					ac.Set[c.Name] = *c.Value
				}
			}
			out.ErrorCode, out.ErrorMessage = n.alterTopic(ctx, rr.ResourceType, ac, r.ValidateOnly)
			resp.Resources = append(resp.Resources, out)
		}
		f.Complete(resp, nil)
	}()
	return f
}

// alterTopic proposes ac, or with validateOnly tries it on a copy of the
// metadata.
func (n *Node) alterTopic(ctx context.Context, resourceType kmsg.ConfigResourceType, ac *coordinator.AlterConfigs, validateOnly bool) (int16, *string) {
	if resourceType != resourceTopic {
		msg := "only topic configs can be altered"
		return kerr.InvalidRequest.Code, &msg
	}
	if t := n.meta.View().Topics[ac.Name]; t != nil {
		// Rules apply cannot hold for old logs' sake (CheckAlter); a
		// missing topic is left to apply to report.
		if err := coordinator.CheckAlter(t, ac.Set, ac.Delete, ac.Replace); err != nil {
			return coordinator.KafkaError(err)
		}
	}
	cmd := &coordinator.Command{AlterConfigs: ac}
	var res coordinator.Result
	var err error
	if validateOnly {
		res = n.meta.Try(cmd)
	} else {
		res, err = n.ctl.Propose(ctx, cmd)
	}
	return coordinator.KafkaError(firstErr(metaKafkaError(err), res.Err))
}
