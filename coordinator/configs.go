package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// ConfigDef describes one topic config key raftq understands.
type ConfigDef struct {
	Name    string
	Default string
	Doc     string
	Type    kmsg.ConfigType // as Kafka types the same key
	// ISROnly, when set, says why the key means nothing to a raft topic;
	// the broker refuses it there with this reason.
	ISROnly string
	// Since is the config version (CurrentConfigVersion) that brought the
	// key; an entry of an older version refuses it as unknown, as it was.
	Since int
	check func(v string, version int) error
}

// CurrentConfigVersion numbers the topic config keys and values apply
// takes. Every CreateTopic and AlterConfigs the broker proposes carries
// it; an entry written before a key or value existed carries an older one
// (0 before versions) and replays refused, as it was applied.
//
//   - 1: compaction: cleanup.policy compact and compact,delete;
//     min.cleanable.dirty.ratio, min.compaction.lag.ms,
//     max.compaction.lag.ms, delete.retention.ms.
//   - 2: every other topic config Kafka 4.x defines, accepted with a
//     value Kafka takes, stored and described, and not enforced
//     (kafkaOnlyConfigs).
const CurrentConfigVersion = 2

// notEnforced starts the documentation of a key raftq stores but does not
// act on, so that no one is misled.
const notEnforced = "accepted, not enforced: "

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
		defs[name] = ConfigDef{Name: name, Default: def, Type: typ, Doc: doc, check: func(v string, _ int) error { return check(v) }}
	}
	since := func(version int, name, def string, typ kmsg.ConfigType, doc string, check func(string) error) {
		defineConfig(name, def, typ, doc, check)
		d := defs[name]
		d.Since = version
		defs[name] = d
	}
	defs["cleanup.policy"] = ConfigDef{Name: "cleanup.policy", Default: "delete", Type: kmsg.ConfigTypeList,
		Doc: "delete removes old segments by retention.ms and retention.bytes; compact keeps the latest record of each key (records need keys); compact,delete does both", check: checkCleanupPolicy}
	since(1, "min.cleanable.dirty.ratio", "0.5", kmsg.ConfigTypeDouble, "compacted topics: clean once the uncleaned part is at least this share of the log", floatIn(0, 1))
	since(1, "min.compaction.lag.ms", "0", kmsg.ConfigTypeLong, "compacted topics: a record stays uncleaned until at least this old", intAtLeast(0))
	since(1, "max.compaction.lag.ms", "9223372036854775807", kmsg.ConfigTypeLong, "compacted topics: clean a record at the latest once this old, whatever the dirty ratio", intAtLeast(1))
	since(1, "delete.retention.ms", "86400000", kmsg.ConfigTypeLong, "compacted topics: how long a tombstone (null value) stays after the cleaner reached it, measured in record timestamps", intAtLeast(0))
	defineConfig("retention.ms", "604800000", kmsg.ConfigTypeLong, "time to keep a segment; -1 keeps forever", intAtLeast(-1))
	defineConfig("retention.bytes", "-1", kmsg.ConfigTypeLong, "size to keep per partition; -1 keeps all", intAtLeast(-1))
	defineConfig("segment.bytes", "1073741824", kmsg.ConfigTypeInt, "segment size before a roll", intAtLeast(partition.BatchHeaderSize))
	defineConfig("segment.ms", "604800000", kmsg.ConfigTypeLong, "segment age before a roll", intAtLeast(1))
	defineConfig("max.message.bytes", "1048588", kmsg.ConfigTypeInt, "largest record batch accepted", intAtLeast(0))
	defineConfig("index.interval.bytes", "4096", kmsg.ConfigTypeInt, "bytes between sparse index entries", intAtLeast(0))
	defineConfig("message.timestamp.type", "CreateTime", kmsg.ConfigTypeString, "CreateTime keeps the producer's timestamps; LogAppendTime has the leader stamp each batch with its own clock when it takes it", oneOf("CreateTime", "LogAppendTime"))
	defineConfig("compression.type", "producer", kmsg.ConfigTypeString, "producer stores batches as produced; uncompressed, gzip, snappy, lz4 or zstd makes the leader recompress batches in any other codec before they are replicated", oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"))
	defineConfig("min.insync.replicas", "1", kmsg.ConfigTypeInt, "isr mode only: an acks=all write is refused (NOT_ENOUGH_REPLICAS) while the ISR has fewer members; with replication.mode=raft an acks=all write waits for a majority of the replicas (2 of 3, 3 of 5) instead", intAtLeast(1))
	defineConfig("unclean.leader.election.enable", "false", kmsg.ConfigTypeBoolean, "isr mode only: with no in-sync replica left, elect any live replica, which may lack acknowledged writes; raft mode never elects a replica that lacks committed writes", oneOf("true", "false"))
	defineConfig("flush.messages", "9223372036854775807", kmsg.ConfigTypeLong, "isr mode only: fsync a replica's log once this many records are unflushed (1: every batch before it counts); the default never does, trusting replication as Kafka does; raft mode's durability is the node's --fsync", intAtLeast(1))
	defineConfig("flush.ms", "9223372036854775807", kmsg.ConfigTypeLong, "isr mode only: fsync a replica's log data older than this many milliseconds; the default never does", intAtLeast(0))
	defineConfig("replication.mode", ModeRaft, kmsg.ConfigTypeString, "raft (each partition a raft group) or isr (Kafka-style: group 0 keeps the ISR and elects leaders, followers fetch from the leader); set at creation only", oneOf(ModeRaft, ModeISR))
	for _, k := range kafkaOnlyConfigs() {
		since(2, k.name, k.def, k.typ, notEnforced+k.doc, k.check)
	}
	isrOnly := map[string]string{
		"min.insync.replicas":            "a raft topic's acks=all waits for a majority of its replicas",
		"unclean.leader.election.enable": "a raft topic elects only a replica that holds every committed write",
		"flush.messages":                 "a raft topic's durability is the node's --fsync policy",
		"flush.ms":                       "a raft topic's durability is the node's --fsync policy",
	}
	for name, why := range isrOnly {
		d := defs[name]
		d.ISROnly = why
		defs[name] = d
	}
	return defs
}

// checkCleanupPolicy takes delete alone before config version 1, then
// compact and both too.
func checkCleanupPolicy(v string, version int) error {
	if version < 1 {
		return oneOf("delete")(v)
	}
	return oneOf("delete", "compact", "compact,delete", "delete,compact")(v)
}

func floatIn(lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("not a number: %q", v)
		}
		if f < lo || f > hi {
			return fmt.Errorf("must be in [%g, %g]", lo, hi)
		}
		return nil
	}
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

// NotEnforced reports whether name is a Kafka topic config raftq stores
// and describes but does not act on.
func NotEnforced(name string) bool {
	return strings.HasPrefix(topicConfigDefs[name].Doc, notEnforced)
}

// KnownTopicConfig reports whether name is a topic config raftq
// understands.
func KnownTopicConfig(name string) bool {
	_, ok := topicConfigDefs[name]
	return ok
}

// ValidateTopicConfigs checks keys and values as the current version
// takes them, returning an error that names the first bad one.
// replication.mode=isr is refused as reserved.
func ValidateTopicConfigs(cfgs map[string]string) error {
	return validateTopicConfigs(cfgs, false, CurrentConfigVersion)
}

// validateTopicConfigs is ValidateTopicConfigs at config version, letting
// replication.mode=isr through with allowISR (CreateTopic.AllowISR, or a
// topic already in ISR mode).
func validateTopicConfigs(cfgs map[string]string, allowISR bool, version int) error {
	keys := make([]string, 0, len(cfgs))
	for k := range cfgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d, ok := topicConfigDefs[k]
		if !ok || d.Since > version {
			return fmt.Errorf("Unknown topic config name: %s", k)
		}
		if err := d.check(cfgs[k], version); err != nil {
			return fmt.Errorf("topic config %s: %w", k, err)
		}
	}
	if cfgs["replication.mode"] == ModeISR && !allowISR {
		return fmt.Errorf("topic config replication.mode: %q is reserved and not implemented yet", ModeISR)
	}
	if cfgs["replication.mode"] != ModeISR {
		// flush.messages and flush.ms were unknown keys before ISR mode,
		// so every older entry that set them on a raft topic was refused;
		// refusing them here keeps such entries' outcome (doc.go,
		// "Versions"). The other ISR-only keys were accepted on raft
		// topics then, so only the broker refuses them (CheckCreate).
		for _, k := range []string{"flush.messages", "flush.ms"} {
			if _, ok := cfgs[k]; ok {
				return isrOnlyErr(k)
			}
		}
	}
	return nil
}

func isrOnlyErr(key string) error {
	return fmt.Errorf("%s applies to replication.mode=%s; %s", key, ModeISR, topicConfigDefs[key].ISROnly)
}

// CheckCreate is the broker's check of a new topic's explicit configs
// and replication factor, before it proposes the topic: the rules below
// are new since entries were first written to group 0's log, so apply
// cannot enforce them on raft topics without changing how old entries
// replay (doc.go, "Versions"). It refuses ISR-only keys on a raft topic
// and min.insync.replicas above the replication factor on an ISR topic.
// Values apply validates are left to it: CheckCreate skips what it
// cannot parse. The error carries INVALID_CONFIG, as Kafka answers.
func CheckCreate(cfgs map[string]string, rf int) error {
	if err := checkModeConfigs(cfgs["replication.mode"] == ModeISR, cfgs); err != nil {
		return err
	}
	return checkMinISR(cfgs, rf)
}

// CheckAlter is CheckCreate for a change of topic t's configs: set and
// delete as in AlterConfigs, and replace for the non-incremental
// AlterConfigs, whose set becomes every explicit config. It also refuses
// a change of replication.mode with a reason (apply refuses it too, but
// with less to say). Keys t already holds are not checked again: a raft
// topic created before these rules may keep its min.insync.replicas.
func CheckAlter(t *Topic, set map[string]string, del []string, replace bool) error {
	next := maps.Clone(set)
	if !replace {
		next = maps.Clone(t.Configs)
		if next == nil {
			next = map[string]string{}
		}
		maps.Copy(next, set)
		for _, k := range del {
			delete(next, k)
		}
	}
	was, now := t.Config("replication.mode"), modeOf(next)
	if now != ModeRaft && now != ModeISR {
		return nil // apply names the bad value
	}
	if err := modeChange(t, now, set, replace); err != nil {
		return err
	}
	if err := checkModeConfigs(was == ModeISR, set); err != nil {
		return err
	}
	if _, ok := set["min.insync.replicas"]; ok {
		return checkMinISR(next, t.ReplicationFactor())
	}
	return nil
}

// modeChange refuses an alter that would leave topic t in mode now: the
// broker's preflight (CheckAlter) and apply both say it with these words,
// so a node whose metadata has not yet caught up gives the same answer.
func modeChange(t *Topic, now string, set map[string]string, replace bool) error {
	was := t.Config("replication.mode")
	switch {
	case was == now:
		return nil
	case replace && set["replication.mode"] == "":
		return cmdErr(kerr.InvalidConfig, "replication.mode cannot change after creation: this topic is %s, and a non-incremental AlterConfigs resets every config it does not name; name replication.mode=%s or use IncrementalAlterConfigs", was, was)
	default:
		return cmdErr(kerr.InvalidConfig, "replication.mode cannot change after creation (topic %q is %s); create a new topic with replication.mode=%s instead", t.Name, was, now)
	}
}

func modeOf(cfgs map[string]string) string {
	if m, ok := cfgs["replication.mode"]; ok {
		return m
	}
	return topicConfigDefs["replication.mode"].Default
}

// checkModeConfigs refuses, on a raft topic, the keys that only ISR mode
// reads, in key order.
func checkModeConfigs(isr bool, cfgs map[string]string) error {
	if isr {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(cfgs)) {
		if topicConfigDefs[k].ISROnly != "" {
			return cmdErr(kerr.InvalidConfig, "%s", isrOnlyErr(k))
		}
	}
	return nil
}

// checkMinISR refuses an ISR topic's min.insync.replicas above its
// replication factor: acks=all could never succeed.
func checkMinISR(cfgs map[string]string, rf int) error {
	if modeOf(cfgs) != ModeISR {
		return nil
	}
	min, err := strconv.ParseInt(cfgs["min.insync.replicas"], 10, 64)
	if err != nil || rf <= 0 || min <= int64(rf) {
		return nil
	}
	return cmdErr(kerr.InvalidConfig, "min.insync.replicas %d exceeds the replication factor %d: no acks=all write could succeed", min, rf)
}

// ConfigInt returns an integer config of t (its default if unset or bad).
func (t *Topic) ConfigInt(key string) int64 {
	n, err := strconv.ParseInt(t.Config(key), 10, 64)
	if err != nil {
		n, _ = strconv.ParseInt(topicConfigDefs[key].Default, 10, 64)
	}
	return n
}

// kafkaConfig is a Kafka topic config raftq accepts without acting on it.
type kafkaConfig struct {
	name, def string
	typ       kmsg.ConfigType
	doc       string
	check     func(string) error
}

// kafkaOnlyConfigs are the topic configs of Kafka 4.x (TopicConfig.java,
// LogConfig, remote storage's) that raftq does not enforce: tools that
// create topics with them (Terraform providers, operators, Connect)
// must not fail on one.
func kafkaOnlyConfigs() []kafkaConfig {
	long := func(min int64) func(string) error { return intAtLeast(min) }
	boolean := oneOf("true", "false")
	return []kafkaConfig{
		{"compression.gzip.level", "-1", kmsg.ConfigTypeInt, "gzip level when compression.type=gzip (raftq uses franz-go's default level)", intIn(-1, 9)},
		{"compression.lz4.level", "9", kmsg.ConfigTypeInt, "lz4 level when compression.type=lz4", intIn(1, 17)},
		{"compression.zstd.level", "3", kmsg.ConfigTypeInt, "zstd level when compression.type=zstd", intIn(-131072, 22)},
		{"file.delete.delay.ms", "60000", kmsg.ConfigTypeLong, "delay before a deleted segment's file goes (raftq deletes once no reader holds it)", long(0)},
		{"follower.replication.throttled.replicas", "", kmsg.ConfigTypeList, "replicas whose follower replication is throttled", anyValue},
		{"leader.replication.throttled.replicas", "", kmsg.ConfigTypeList, "replicas whose leader replication is throttled", anyValue},
		{"local.retention.bytes", "-2", kmsg.ConfigTypeLong, "tiered storage: local retention by size", long(-2)},
		{"local.retention.ms", "-2", kmsg.ConfigTypeLong, "tiered storage: local retention by time", long(-2)},
		{"message.timestamp.after.max.ms", "9223372036854775807", kmsg.ConfigTypeLong, "how far in the future a CreateTime timestamp may be", long(0)},
		{"message.timestamp.before.max.ms", "9223372036854775807", kmsg.ConfigTypeLong, "how far in the past a CreateTime timestamp may be", long(0)},
		{"preallocate", "false", kmsg.ConfigTypeBoolean, "preallocate segment files", boolean},
		{"remote.storage.enable", "false", kmsg.ConfigTypeBoolean, "tiered storage for this topic (raftq has none)", boolean},
		{"remote.log.copy.disable", "false", kmsg.ConfigTypeBoolean, "tiered storage: stop copying segments", boolean},
		{"remote.log.delete.on.disable", "false", kmsg.ConfigTypeBoolean, "tiered storage: delete remote data when disabled", boolean},
		{"segment.index.bytes", "10485760", kmsg.ConfigTypeInt, "index file size (raftq's indexes grow as needed)", long(4)},
		{"segment.jitter.ms", "0", kmsg.ConfigTypeLong, "random jitter subtracted from segment.ms", long(0)},
	}
}

func anyValue(string) error { return nil }

func intIn(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("must be in [%d, %d]", lo, hi)
		}
		return nil
	}
}
