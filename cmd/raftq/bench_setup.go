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
// replication factor and replication.mode (with an isr topic's
// min.insync.replicas and unclean.leader.election.enable), and the
// effective durability policy (durability). It is asked before the run, so
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
	topicCfgs := map[string]string{}
	if rcs, err := adm.DescribeTopicConfigs(ctx, topic); err == nil {
		if rc, err := rcs.On(topic, nil); err == nil {
			for _, c := range rc.Configs {
				topicCfgs[c.Key] = c.MaybeValue()
			}
		}
	}
	maps.Copy(setup, topicReplication(topicCfgs))
	// Every return from here names the durability, once the brokers'
	// fsync policy is known or known not to be.
	defer func() { setup["durability"] = durability(topicCfgs, setup["raftq.fsync"]) }()
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

// topicReplication picks the topic configs a setup names: the mode, and
// for an isr topic the settings that decide what acks=all means.
func topicReplication(cfgs map[string]string) map[string]string {
	out := map[string]string{}
	if m, ok := cfgs["replication.mode"]; ok {
		out["topic.replication.mode"] = m
	}
	if cfgs["replication.mode"] == "isr" {
		for _, k := range []string{"min.insync.replicas", "unclean.leader.election.enable"} {
			if v, ok := cfgs[k]; ok {
				out["topic."+k] = v
			}
		}
	}
	return out
}

// flushNever is flush.messages' and flush.ms' default: Kafka never
// fsyncs for them, trusting replication.
const flushNever = "9223372036854775807"

// durability names the effective durability policy of the bench's topic,
// with no spaces so that the setup line stays key=value pairs: a raft
// topic's is its nodes' --fsync (raftq.fsync, which governs every raft
// WAL), "raft:fsync-always" or "raft:fsync-never"; an isr topic's is its
// flush.messages and flush.ms, "isr:flush-never(kafka-default)" or say
// "isr:flush.messages=1".
func durability(cfgs map[string]string, fsync string) string {
	if cfgs["replication.mode"] != "isr" {
		if fsync == "" {
			fsync = "unknown"
		}
		return "raft:fsync-" + strings.ReplaceAll(fsync, " ", "")
	}
	var set []string
	for _, k := range []string{"flush.messages", "flush.ms"} {
		if v := cfgs[k]; v != "" && v != flushNever {
			set = append(set, k+"="+v)
		}
	}
	if len(set) == 0 {
		return "isr:flush-never(kafka-default)"
	}
	return "isr:" + strings.Join(set, ",")
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
