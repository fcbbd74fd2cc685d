package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// benchSetup describes what a bench ran against, so that published
// figures carry their setup: the number of brokers, each broker's raftq
// settings (the read-only raftq.* broker configs: fsync policy, WAL
// layout, async writes, segment size) and the topic's partitions,
// replication factor and replication.mode. A setting the brokers disagree
// on reads "mixed: a,b"; one a broker does not report (as another Kafka
// would not) is left out. It is asked before the run, so it costs the run
// nothing.
func benchSetup(ctx context.Context, cf *clientFlags, topic string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second) // the run must not wait on it
	defer cancel()
	adm, done, err := cf.admin()
	if err != nil {
		return nil, err
	}
	defer done()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe the cluster: %w", err)
	}
	setup := map[string]string{"brokers": strconv.Itoa(len(md.Brokers))}
	if td, ok := md.Topics[topic]; ok && td.Err == nil {
		setup["topic.partitions"] = strconv.Itoa(len(td.Partitions))
		setup["topic.replication.factor"] = strconv.Itoa(td.Partitions.NumReplicas())
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
	if err != nil {
		return nil, fmt.Errorf("describe the brokers' configs: %w", err)
	}
	maps.Copy(setup, raftqSettings(brokers))
	topics, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe topic %s's configs: %w", topic, err)
	}
	if rc, err := topics.On(topic, nil); err == nil {
		for _, c := range rc.Configs {
			if c.Key == "replication.mode" {
				setup["topic.replication.mode"] = c.MaybeValue()
			}
		}
	}
	return setup, nil
}

// raftqSettings gathers the raftq.* configs the brokers reported: each
// key's value if they all agree, else "mixed: " and the values.
func raftqSettings(brokers kadm.ResourceConfigs) map[string]string {
	values := map[string][]string{}
	for _, rc := range brokers {
		for _, c := range rc.Configs {
			if strings.HasPrefix(c.Key, "raftq.") {
				values[c.Key] = append(values[c.Key], c.MaybeValue())
			}
		}
	}
	out := map[string]string{}
	for k, vs := range values {
		slices.Sort(vs)
		vs = slices.Compact(vs)
		out[k] = vs[0]
		if len(vs) > 1 {
			out[k] = "mixed: " + strings.Join(vs, ",")
		}
	}
	return out
}

// setupLine prints a setup as key=value pairs in key order.
func setupLine(setup map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(setup)) {
		kv = append(kv, k+"="+setup[k])
	}
	return strings.Join(kv, " ")
}
