package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker configs that default topic configs, as Kafka has them
// (ServerTopicConfigSynonyms): log.retention.ms, or failing it
// log.retention.minutes, or log.retention.hours, is the retention.ms of
// every topic that sets none, and so on for each topic config that has a
// broker synonym. A node takes them from --config-file and --override
// (cmd/raftq); ResolveTopicDefaults turns them into TopicDefaults, which
// the metadata leader writes into group 0 (SetTopicDefaults), so that
// every replica of a partition resolves a default the same way.

// BrokerConfigDef is one Kafka broker config that sets the default of a
// topic config.
type BrokerConfigDef struct {
	Name  string // Kafka's broker config name, e.g. log.retention.hours
	Topic string // the topic config it defaults, e.g. retention.ms
	// Default is Kafka's default, in this config's units; with NoDefault
	// Kafka's is null and the next synonym's applies (log.retention.ms
	// falls back to log.retention.hours' 168).
	Default   string
	NoDefault bool
	Type      kmsg.ConfigType
	// scale is how many of the topic config's units one of this config's
	// is (hours against milliseconds); 0 takes the value as it is.
	scale int64
}

// brokerSynonyms maps each topic config to its broker configs, highest
// priority first; brokerConfigDefs indexes them by name. Constant tables,
// built once.
var brokerSynonyms, brokerConfigDefs = buildBrokerConfigs()

// brokerSynonym is one row of buildBrokerConfigs' table: scale 0 keeps
// the topic config's units, def "" with noDefault set has no default,
// and def "" otherwise takes the topic config's.
type brokerSynonym struct {
	name      string
	scale     int64
	def       string
	noDefault bool
}

func buildBrokerConfigs() (map[string][]BrokerConfigDef, map[string]BrokerConfigDef) {
	const minute, hour = 60_000, 3_600_000
	same := func(name string) brokerSynonym { return brokerSynonym{name: name} }
	unset := func(name string, scale int64) brokerSynonym {
		return brokerSynonym{name: name, scale: scale, noDefault: true}
	}
	hours := func(name, def string) brokerSynonym { return brokerSynonym{name: name, scale: hour, def: def} }
	table := map[string][]brokerSynonym{
		"segment.bytes":                   {same("log.segment.bytes")},
		"segment.ms":                      {unset("log.roll.ms", 0), hours("log.roll.hours", "168")},
		"segment.jitter.ms":               {unset("log.roll.jitter.ms", 0), hours("log.roll.jitter.hours", "0")},
		"segment.index.bytes":             {same("log.index.size.max.bytes")},
		"flush.messages":                  {same("log.flush.interval.messages")},
		"flush.ms":                        {unset("log.flush.interval.ms", 0), same("log.flush.scheduler.interval.ms")},
		"retention.bytes":                 {same("log.retention.bytes")},
		"retention.ms":                    {unset("log.retention.ms", 0), unset("log.retention.minutes", minute), hours("log.retention.hours", "168")},
		"max.message.bytes":               {same("message.max.bytes")},
		"index.interval.bytes":            {same("log.index.interval.bytes")},
		"delete.retention.ms":             {same("log.cleaner.delete.retention.ms")},
		"min.compaction.lag.ms":           {same("log.cleaner.min.compaction.lag.ms")},
		"max.compaction.lag.ms":           {same("log.cleaner.max.compaction.lag.ms")},
		"file.delete.delay.ms":            {same("log.segment.delete.delay.ms")},
		"min.cleanable.dirty.ratio":       {same("log.cleaner.min.cleanable.ratio")},
		"cleanup.policy":                  {same("log.cleanup.policy")},
		"unclean.leader.election.enable":  {same("unclean.leader.election.enable")},
		"min.insync.replicas":             {same("min.insync.replicas")},
		"compression.type":                {same("compression.type")},
		"compression.gzip.level":          {same("compression.gzip.level")},
		"compression.lz4.level":           {same("compression.lz4.level")},
		"compression.zstd.level":          {same("compression.zstd.level")},
		"preallocate":                     {same("log.preallocate")},
		"message.timestamp.type":          {same("log.message.timestamp.type")},
		"message.timestamp.before.max.ms": {same("log.message.timestamp.before.max.ms")},
		"message.timestamp.after.max.ms":  {same("log.message.timestamp.after.max.ms")},
		"local.retention.ms":              {same("log.local.retention.ms")},
		"local.retention.bytes":           {same("log.local.retention.bytes")},
	}
	byTopic := map[string][]BrokerConfigDef{}
	byName := map[string]BrokerConfigDef{}
	for topic, syns := range table {
		td := topicConfigDefs[topic]
		for _, s := range syns {
			d := BrokerConfigDef{Name: s.name, Topic: topic, Default: s.def, NoDefault: s.noDefault, Type: td.Type, scale: s.scale}
			if s.scale != 0 {
				d.Type = kmsg.ConfigTypeInt // Kafka's hours and minutes are ints
			}
			if s.def == "" && !s.noDefault {
				d.Default = td.Default
			}
			byTopic[topic] = append(byTopic[topic], d)
			byName[s.name] = d
		}
	}
	return byTopic, byName
}

// BrokerConfigDefs lists every broker config that defaults a topic
// config, sorted by name.
func BrokerConfigDefs() []BrokerConfigDef {
	return slices.SortedFunc(maps.Values(brokerConfigDefs), func(a, b BrokerConfigDef) int { return strings.Compare(a.Name, b.Name) })
}

// BrokerSynonyms returns the broker configs that default topic config
// key, highest priority first (none for keys Kafka gives no broker
// default, such as remote.storage.enable, and for replication.mode).
func BrokerSynonyms(key string) []BrokerConfigDef { return brokerSynonyms[key] }

// BuiltinDefault returns the broker synonym of topic config key that
// holds Kafka's built-in default (the last with one: log.retention.hours
// for retention.ms), if key has broker synonyms.
func BuiltinDefault(key string) (BrokerConfigDef, bool) {
	syns := brokerSynonyms[key]
	for i := len(syns) - 1; i >= 0; i-- {
		if !syns[i].NoDefault {
			return syns[i], true
		}
	}
	return BrokerConfigDef{}, false
}

// TopicDefault is the cluster's default of one topic config, set by
// broker configs.
type TopicDefault struct {
	// Value is in the topic config's units and form: retention.ms
	// 3600000 for log.retention.hours=1.
	Value string `json:"value"`
	// Set lists the broker configs set for this topic config, highest
	// priority first: Value comes from the first.
	Set []BrokerSetting `json:"set"`
}

// BrokerSetting is one broker config as it was set.
type BrokerSetting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TopicDefaults are the cluster's topic config defaults, by topic config
// name: only those some broker config sets.
type TopicDefaults map[string]TopicDefault

// Equal reports whether d and o hold the same defaults; nil and empty
// are the same.
func (d TopicDefaults) Equal(o TopicDefaults) bool {
	return maps.EqualFunc(d, o, func(a, b TopicDefault) bool {
		return a.Value == b.Value && slices.Equal(a.Set, b.Set)
	})
}

// ResolveTopicDefaults turns broker configs (Kafka's names, as set in a
// properties file) into the topic defaults they give: per topic config
// the highest-priority synonym set wins, converted to the topic config's
// units, and must be a value the topic config takes. It refuses an
// unknown name or a bad value, naming the first in name order.
func ResolveTopicDefaults(set map[string]string) (TopicDefaults, error) {
	out := TopicDefaults{}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		d, ok := brokerConfigDefs[name]
		if !ok {
			return nil, fmt.Errorf("unknown broker config %s: raftq takes these Kafka broker configs, the defaults of topic configs: %s", name, strings.Join(BrokerConfigNames(), ", "))
		}
		if _, err := d.topicValue(set[name]); err != nil {
			return nil, fmt.Errorf("broker config %s=%s: %w", name, set[name], err)
		}
	}
	for topic, syns := range brokerSynonyms {
		var td TopicDefault
		for _, d := range syns {
			v, ok := set[d.Name]
			if !ok {
				continue
			}
			if td.Set == nil {
				td.Value, _ = d.topicValue(v)
			}
			td.Set = append(td.Set, BrokerSetting{Name: d.Name, Value: normalizeValue(d.Type, v)})
		}
		if td.Set != nil {
			out[topic] = td
		}
	}
	return out, nil
}

// BrokerConfigNames lists the broker configs ResolveTopicDefaults takes,
// sorted.
func BrokerConfigNames() []string { return slices.Sorted(maps.Keys(brokerConfigDefs)) }

// topicValue converts v, a value of d, into its topic config's units and
// checks that the topic config takes it.
func (d BrokerConfigDef) topicValue(v string) (string, error) {
	v = normalizeValue(d.Type, v)
	if d.scale != 0 {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return "", fmt.Errorf("not an int: %q", v)
		}
		v = strconv.FormatInt(n*d.scale, 10)
	}
	if d.Topic == "retention.ms" {
		// As Kafka's KafkaConfig.logRetentionTimeMillis: any negative
		// retention is -1, unlimited.
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n < 0 {
			v = "-1"
		}
	}
	if err := topicConfigDefs[d.Topic].check(v, CurrentConfigVersion); err != nil {
		return "", fmt.Errorf("as %s %s: %w", d.Topic, v, err)
	}
	return v, nil
}

// normalizeValue trims v as Kafka's ConfigDef parses it: surrounding
// space, and around each item of a list (cleanup.policy=compact, delete).
func normalizeValue(typ kmsg.ConfigType, v string) string {
	v = strings.TrimSpace(v)
	if typ != kmsg.ConfigTypeList {
		return v
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return strings.Join(items, ",")
}
