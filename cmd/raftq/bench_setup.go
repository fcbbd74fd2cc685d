package main

import (
	"context"
	"errors"
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
// replication factor and replication.mode. It is asked before the run, so
// it costs the run nothing, and it gives up after 15 s. It returns what it
// learned even with an error: brokers that did not answer are counted in
// "brokers.unanswered".
func benchSetup(ctx context.Context, cf *clientFlags, topic string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second) // the run must not wait on it
	defer cancel()
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	setup := map[string]string{}
	md, err := benchTopicMetadata(ctx, adm, topic)
	if err != nil {
		return setup, err
	}
	setup["brokers"] = strconv.Itoa(len(md.Brokers))
	td := md.Topics[topic]
	setup["topic.partitions"] = strconv.Itoa(len(td.Partitions))
	setup["topic.replication.factor"] = strconv.Itoa(td.Partitions.NumReplicas())
	if rcs, err := adm.DescribeTopicConfigs(ctx, topic); err == nil {
		if rc, err := rcs.On(topic, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key == "replication.mode" {
					setup["topic.replication.mode"] = c.MaybeValue()
				}
			}
		}
	}
	if len(md.Brokers) == 0 {
		return setup, nil
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
	var shards *kadm.ShardErrors
	if err != nil && (!errors.As(err, &shards) || shards.AllFailed) {
		return setup, fmt.Errorf("describe the brokers' configs: %w", err)
	}
	var answered int
	for _, rc := range brokers {
		if rc.Err == nil {
			answered++
		}
	}
	if answered < len(md.Brokers) {
		setup["brokers.unanswered"] = strconv.Itoa(len(md.Brokers) - answered)
	}
	maps.Copy(setup, raftqSettings(brokers))
	return setup, nil
}

// benchTopicMetadata asks for topic's metadata until a broker that knows the
// topic answers: one may not have applied a topic just created yet.
func benchTopicMetadata(ctx context.Context, adm *kadm.Client, topic string) (kadm.Metadata, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) > 0 {
				return md, nil
			} else if ok && td.Err != nil {
				err = td.Err
			}
		}
		select {
		case <-ctx.Done():
			return md, fmt.Errorf("describe topic %s: %w", topic, errors.Join(err, ctx.Err()))
		case <-tick.C:
		}
	}
}

// raftqSettings gathers the raftq.* configs the brokers reported: each
// key's value if every broker that answered gave the same one, else
// "mixed: " and the values ("?" for a broker that did not report it).
func raftqSettings(brokers kadm.ResourceConfigs) map[string]string {
	values := map[string][]string{}
	answered := 0
	for _, rc := range brokers {
		if rc.Err != nil {
			continue
		}
		answered++
		for _, c := range rc.Configs {
			if strings.HasPrefix(c.Key, "raftq.") {
				values[c.Key] = append(values[c.Key], c.MaybeValue())
			}
		}
	}
	out := map[string]string{}
	for k, vs := range values {
		for len(vs) < answered {
			vs = append(vs, "?")
		}
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
