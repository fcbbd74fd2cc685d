package broker

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

const (
	resourceTopic  = kmsg.ConfigResourceTypeTopic
	resourceBroker = kmsg.ConfigResourceTypeBroker
)

// serveDescribeConfigs describes topic configs (every key raftq knows,
// explicit or default) and a few read-only broker settings.
func (n *Node) serveDescribeConfigs(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		var cfgs []kmsg.DescribeConfigsResponseResourceConfig
		switch rr.ResourceType {
		case resourceTopic:
			t := n.meta.View().Topics[rr.ResourceName]
			if t == nil {
				out.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			cfgs = topicConfigEntries(t, r.IncludeDocumentation)
		case resourceBroker:
			// As Kafka: a broker describes its own settings; the empty
			// name asks for cluster-wide dynamic configs, of which raftq
			// has none; another broker's id is a request misrouted.
			switch rr.ResourceName {
			case strconv.FormatUint(n.cfg.NodeID, 10):
				cfgs = n.brokerConfigEntries()
			case "":
			default:
				out.ErrorCode = kerr.InvalidRequest.Code
				msg := fmt.Sprintf("broker %d describes its own configs, not broker %q's", n.cfg.NodeID, rr.ResourceName)
				out.ErrorMessage = &msg
			}
		default:
			out.ErrorCode = kerr.InvalidRequest.Code
		}
		for _, c := range cfgs {
			if len(rr.ConfigNames) == 0 || slices.Contains(rr.ConfigNames, c.Name) {
				out.Configs = append(out.Configs, c)
			}
		}
		resp.Resources = append(resp.Resources, out)
	}
	return kafka.Ready(resp)
}

func topicConfigEntries(t *coordinator.Topic, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range coordinator.TopicConfigDefs() {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		v := t.Config(d.Name)
		c.Name, c.Value = d.Name, &v
		c.Source = configSource(t, d.Name)
		c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
		if docs {
			doc := d.Doc
			c.Documentation = &doc
		}
		out = append(out, c)
	}
	return out
}

func (n *Node) brokerConfigEntries() []kmsg.DescribeConfigsResponseResourceConfig {
	vals := [][2]string{
		{"broker.id", strconv.FormatUint(n.cfg.NodeID, 10)},
		{"auto.create.topics.enable", strconv.FormatBool(n.cfg.AutoCreateTopics)},
		{"num.partitions", strconv.Itoa(int(n.cfg.DefaultPartitions))},
		{"default.replication.factor", strconv.Itoa(int(n.cfg.DefaultReplicationFactor))},
		{"raftq.fsync", n.cfg.Fsync.String()},
		{"raftq.wal", walLayout(n.cfg.SharedWAL)},
		{"raftq.async.writes", strconv.FormatBool(n.cfg.AsyncStorageWrites)},
		{"raftq.wal.segment.bytes", strconv.FormatInt(processWAL.bytes, 10)}, // the size in effect (walsize.go)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, kv := range vals {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		v := kv[1]
		c.Name, c.Value, c.ReadOnly, c.Source = kv[0], &v, true, kmsg.ConfigSourceStaticBrokerConfig
		out = append(out, c)
	}
	return out
}
