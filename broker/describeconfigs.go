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
// explicit or default) and this broker's settings (brokerconfigs.go).
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
				msg := fmt.Sprintf("topic %q does not exist", rr.ResourceName)
				out.ErrorMessage = &msg
				break
			}
			cfgs = topicConfigEntries(t, r.IncludeSynonyms, r.IncludeDocumentation)
		case resourceBroker:
			// As Kafka: a broker describes its own settings; the empty
			// name asks for cluster-wide dynamic configs, of which raftq
			// has none; another broker's id is a request misrouted.
			switch rr.ResourceName {
			case strconv.FormatUint(n.cfg.NodeID, 10):
				cfgs = n.brokerConfigEntries(r.IncludeSynonyms, r.IncludeDocumentation)
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

// topicConfigEntries describes every topic config of t with its type and
// source and, when asked, as Kafka does, its synonyms (configSynonyms) and
// documentation.
func topicConfigEntries(t *coordinator.Topic, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range coordinator.TopicConfigDefs() {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		v := t.Config(d.Name)
		c.Name, c.Value, c.ConfigType = d.Name, &v, d.Type
		c.Source = configSource(t, d.Name)
		c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
		c.ReadOnly = configReadOnly(t, d)
		if synonyms {
			c.ConfigSynonyms = configSynonyms(t, d)
		}
		if docs {
			doc := d.Doc
			c.Documentation = &doc
		}
		out = append(out, c)
	}
	return out
}

// configReadOnly reports whether a request may not set d on t:
// replication.mode is fixed at creation, and a raft topic refuses the
// keys only ISR mode reads (coordinator.CheckAlter).
func configReadOnly(t *coordinator.Topic, d coordinator.ConfigDef) bool {
	return d.Name == "replication.mode" || d.ISROnly != "" && !t.IsISR()
}

// configSynonyms lists, as Kafka does, where t's value of d comes from,
// highest priority first: the topic's own value, the broker configs set
// for it in the cluster's defaults (log.retention.ms, then
// log.retention.hours), and the broker config holding Kafka's default
// (log.retention.hours=168). A key that no broker config defaults
// (replication.mode) lists the topic's own value alone, if it has one.
func configSynonyms(t *coordinator.Topic, d coordinator.ConfigDef) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	out := []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
	if v, ok := t.Configs[d.Name]; ok {
		out = append(out, configSynonym(d.Name, &v, kmsg.ConfigSourceDynamicTopicConfig))
	}
	if cd, ok := t.ClusterDefault(d.Name); ok {
		for _, s := range cd.Set {
			out = append(out, configSynonym(s.Name, &s.Value, kmsg.ConfigSourceStaticBrokerConfig))
		}
	}
	if b, ok := coordinator.BuiltinDefault(d.Name); ok {
		out = append(out, configSynonym(b.Name, &b.Default, kmsg.ConfigSourceDefaultConfig))
	}
	return out
}

func configSynonym(name string, v *string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, v, src
	return s
}
