package broker

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

// brokerConfigEntries describes this broker's settings for
// DescribeConfigs of its broker resource: a few raftq settings, then
// every Kafka broker config that defaults a topic config, with synonyms
// and documentation when asked. Every one is read-only: raftq alters
// topic configs only.
func (n *Node) brokerConfigEntries(synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
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
	for _, d := range coordinator.BrokerConfigDefs() {
		out = append(out, n.topicDefaultEntry(d, synonyms, docs))
	}
	return out
}

// topicDefaultEntry describes broker config d as this node was started
// with it: its value from --config-file or --override
// (STATIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG; null
// where Kafka has none, as for log.retention.ms). The defaults topics
// take are the cluster's, which the metadata leader's broker configs set
// (coordinator.SetTopicDefaults): the same when every node has the same.
func (n *Node) topicDefaultEntry(d coordinator.BrokerConfigDef, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.ConfigType, c.ReadOnly = d.Name, d.Type, true
	if v, ok := n.cfg.BrokerConfigs[d.Name]; ok {
		c.Value, c.Source = &v, kmsg.ConfigSourceStaticBrokerConfig
	} else {
		c.Source, c.IsDefault = kmsg.ConfigSourceDefaultConfig, true
		if !d.NoDefault {
			c.Value = &d.Default
		}
	}
	if synonyms {
		c.ConfigSynonyms = n.brokerSynonyms(d)
	}
	if docs {
		doc := fmt.Sprintf("the default of the topic config %s for every topic that sets none (the metadata leader's value is the cluster's)", d.Topic)
		c.Documentation = &doc
	}
	return c
}

// brokerSynonyms lists, as Kafka does for a broker config, d and the
// lower-priority synonyms of its topic config: those set on this node
// first (STATIC_BROKER_CONFIG), then those with a Kafka default
// (DEFAULT_CONFIG), each in priority order.
func (n *Node) brokerSynonyms(d coordinator.BrokerConfigDef) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	syns := coordinator.BrokerSynonyms(d.Topic)
	syns = syns[slices.IndexFunc(syns, func(s coordinator.BrokerConfigDef) bool { return s.Name == d.Name }):]
	out := []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
	for _, s := range syns {
		if v, ok := n.cfg.BrokerConfigs[s.Name]; ok {
			out = append(out, configSynonym(s.Name, &v, kmsg.ConfigSourceStaticBrokerConfig))
		}
	}
	for _, s := range syns {
		if !s.NoDefault {
			out = append(out, configSynonym(s.Name, &s.Default, kmsg.ConfigSourceDefaultConfig))
		}
	}
	return out
}
