package coordinator

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// ConfigDef describes one topic config key raftq understands.
type ConfigDef struct {
	Name    string
	Default string
	Doc     string
	Type    kmsg.ConfigType // as Kafka types the same key
	check   func(string) error
}

// Replication modes for the replication.mode topic config.
const (
	ModeRaft = "raft"
	ModeISR  = "isr"
)

// topicConfigDefs is a constant table, built once.
var topicConfigDefs = buildTopicConfigs()

func buildTopicConfigs() map[string]ConfigDef {
	defs := map[string]ConfigDef{}
	defineConfig := func(name, def string, typ kmsg.ConfigType, doc string, check func(string) error) {
		defs[name] = ConfigDef{Name: name, Default: def, Type: typ, Doc: doc, check: check}
	}
	defineConfig("cleanup.policy", "delete", kmsg.ConfigTypeList, "only delete is supported", oneOf("delete"))
	defineConfig("retention.ms", "604800000", kmsg.ConfigTypeLong, "time to keep a segment; -1 keeps forever", intAtLeast(-1))
	defineConfig("retention.bytes", "-1", kmsg.ConfigTypeLong, "size to keep per partition; -1 keeps all", intAtLeast(-1))
	defineConfig("segment.bytes", "1073741824", kmsg.ConfigTypeInt, "segment size before a roll", intAtLeast(partition.BatchHeaderSize))
	defineConfig("segment.ms", "604800000", kmsg.ConfigTypeLong, "segment age before a roll", intAtLeast(1))
	defineConfig("max.message.bytes", "1048588", kmsg.ConfigTypeInt, "largest record batch accepted", intAtLeast(0))
	defineConfig("index.interval.bytes", "4096", kmsg.ConfigTypeInt, "bytes between sparse index entries", intAtLeast(0))
	defineConfig("message.timestamp.type", "CreateTime", kmsg.ConfigTypeString, "CreateTime keeps the producer's timestamps; LogAppendTime has the leader stamp each batch with its own clock when it takes it", oneOf("CreateTime", "LogAppendTime"))
	defineConfig("compression.type", "producer", kmsg.ConfigTypeString, "producer stores batches as produced; uncompressed, gzip, snappy, lz4 or zstd makes the leader recompress batches in any other codec before they are replicated", oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"))
	defineConfig("min.insync.replicas", "1", kmsg.ConfigTypeInt, "isr mode only; with replication.mode=raft an acks=all write waits for a majority of the replicas (2 of 3, 3 of 5), whatever this says", intAtLeast(1))
	defineConfig("unclean.leader.election.enable", "false", kmsg.ConfigTypeBoolean, "isr mode only; raft mode never elects a replica that lacks committed writes", oneOf("true", "false"))
	defineConfig("flush.messages", "9223372036854775807", kmsg.ConfigTypeLong, "isr mode only: fsync a replica's log once this many records are unflushed (1: every batch before it counts); the default never does, trusting replication as Kafka does; raft mode's durability is the node's --fsync", intAtLeast(1))
	defineConfig("flush.ms", "9223372036854775807", kmsg.ConfigTypeLong, "isr mode only: fsync a replica's log data older than this; the default never does", intAtLeast(0))
	defineConfig("replication.mode", ModeRaft, kmsg.ConfigTypeString, "raft (each partition a raft group) or isr (Kafka-style)", oneOf(ModeRaft, ModeISR))
	return defs
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %v", vals)
	}
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		if n < min {
			return fmt.Errorf("must be at least %d", min)
		}
		return nil
	}
}

// TopicConfigDefs lists every topic config key raftq understands, sorted.
func TopicConfigDefs() []ConfigDef {
	out := make([]ConfigDef, 0, len(topicConfigDefs))
	for _, d := range topicConfigDefs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// KnownTopicConfig reports whether name is a topic config raftq
// understands.
func KnownTopicConfig(name string) bool {
	_, ok := topicConfigDefs[name]
	return ok
}

// ValidateTopicConfigs checks keys and values, returning an error that names
// the first bad one. replication.mode=isr is refused as reserved.
func ValidateTopicConfigs(cfgs map[string]string) error {
	return validateTopicConfigs(cfgs, false)
}

// validateTopicConfigs is ValidateTopicConfigs, letting replication.mode=isr
// through with allowISR (CreateTopic.AllowISR, or a topic already in ISR
// mode).
func validateTopicConfigs(cfgs map[string]string, allowISR bool) error {
	keys := make([]string, 0, len(cfgs))
	for k := range cfgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d, ok := topicConfigDefs[k]
		if !ok {
			return fmt.Errorf("unknown topic config %q", k)
		}
		if err := d.check(cfgs[k]); err != nil {
			return fmt.Errorf("topic config %s: %w", k, err)
		}
	}
	if cfgs["replication.mode"] == ModeISR && !allowISR {
		return fmt.Errorf("topic config replication.mode: %q is reserved and not implemented yet", ModeISR)
	}
	return nil
}

// ConfigInt returns an integer config of t (its default if unset or bad).
func (t *Topic) ConfigInt(key string) int64 {
	n, err := strconv.ParseInt(t.Config(key), 10, 64)
	if err != nil {
		n, _ = strconv.ParseInt(topicConfigDefs[key].Default, 10, 64)
	}
	return n
}
