package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describedSynonym is a synonym as a test compares it.
type describedSynonym struct {
	name, value string
	src         kmsg.ConfigSource
}

func synonymsOf(c kadm.Config) []describedSynonym {
	var out []describedSynonym
	for _, s := range c.Synonyms {
		out = append(out, describedSynonym{s.Key, deref(s.Value), s.Source})
	}
	return out
}

// configNamed finds key among a resource's configs.
func configNamed(t *testing.T, rc kadm.ResourceConfig, key string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s: no config %s", rc.Name, key)
	return kadm.Config{}
}

func wantConfig(t *testing.T, rc kadm.ResourceConfig, key string, value *string, src kmsg.ConfigSource, syns ...describedSynonym) {
	t.Helper()
	c := configNamed(t, rc, key)
	if (c.Value == nil) != (value == nil) || value != nil && *c.Value != *value || c.Source != src {
		t.Errorf("%s: %s = %v (%s), want %v (%s)", rc.Name, key, deref(c.Value), c.Source, deref(value), src)
	}
	if got := synonymsOf(c); !equalSynonyms(got, syns) {
		t.Errorf("%s: %s synonyms %+v, want %+v", rc.Name, key, got, syns)
	}
}

func equalSynonyms(a, b []describedSynonym) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Broker configs set on every node become the defaults of topics that
// set no value of their own, on every replica: a real client's
// DescribeBrokerConfigs shows them as STATIC_BROKER_CONFIG and the rest
// as DEFAULT_CONFIG, DescribeTopicConfigs shows inherited values with
// their broker synonyms, and every replica's log and cleaner follow them.
func TestNode_TopicDefaults(t *testing.T) {
	set := map[string]string{"log.retention.hours": "1", "log.cleanup.policy": "compact,delete",
		"log.cleaner.min.cleanable.ratio": "0.1", "message.max.bytes": "2000000"}
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.BrokerConfigs = set })
	eventually(t, "the cluster's topic defaults on every node", func() bool {
		for _, n := range c.nodes {
			if len(n.Metadata().TopicDefaults) != len(set) {
				return false
			}
		}
		return true
	})
	adm := kadm.NewClient(c.client())
	ctx := testCtx(t)
	for name, cfgs := range map[string]map[string]*string{"d": nil, "own": {"retention.ms": new("1000")}} {
		if res, err := adm.CreateTopic(ctx, 1, 3, cfgs, name); err != nil || res.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, res.Err)
		}
	}

	brokers, err := adm.DescribeBrokerConfigs(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokers.On("2", nil)
	if err != nil {
		t.Fatal(err)
	}
	static, def := kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDefaultConfig
	wantConfig(t, b, "log.retention.hours", new("1"), static, describedSynonym{"log.retention.hours", "1", static}, describedSynonym{"log.retention.hours", "168", def})
	wantConfig(t, b, "log.retention.ms", nil, def, describedSynonym{"log.retention.hours", "1", static}, describedSynonym{"log.retention.hours", "168", def})
	wantConfig(t, b, "log.cleanup.policy", new("compact,delete"), static, describedSynonym{"log.cleanup.policy", "compact,delete", static}, describedSynonym{"log.cleanup.policy", "delete", def})
	wantConfig(t, b, "log.cleaner.min.cleanable.ratio", new("0.1"), static, describedSynonym{"log.cleaner.min.cleanable.ratio", "0.1", static}, describedSynonym{"log.cleaner.min.cleanable.ratio", "0.5", def})
	wantConfig(t, b, "log.segment.bytes", new("1073741824"), def, describedSynonym{"log.segment.bytes", "1073741824", def})
	wantConfig(t, b, "min.insync.replicas", new("1"), def, describedSynonym{"min.insync.replicas", "1", def})
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeBroker, "1", []string{"log.retention.hours", "log.retention.ms"}
	req.Resources = append(req.Resources, rr)
	got := rawRequest(t, c, 1, req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs
	if len(got) != 2 || got[0].Name != "log.retention.hours" || got[0].ConfigType != kmsg.ConfigTypeInt || !got[0].ReadOnly ||
		got[1].ConfigType != kmsg.ConfigTypeLong || !got[1].ReadOnly {
		t.Errorf("log.retention.hours and .ms described as %+v, want an int and a long, both read-only", got)
	}

	topics, err := adm.DescribeTopicConfigs(ctx, "d", "own")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := topics.On("d", nil)
	own, _ := topics.On("own", nil)
	hours := []describedSynonym{{"log.retention.hours", "1", static}, {"log.retention.hours", "168", def}}
	wantConfig(t, d, "retention.ms", new("3600000"), static, hours...)
	wantConfig(t, own, "retention.ms", new("1000"), kmsg.ConfigSourceDynamicTopicConfig,
		append([]describedSynonym{{"retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig}}, hours...)...)
	wantConfig(t, d, "cleanup.policy", new("compact,delete"), static, describedSynonym{"log.cleanup.policy", "compact,delete", static}, describedSynonym{"log.cleanup.policy", "delete", def})
	wantConfig(t, d, "min.cleanable.dirty.ratio", new("0.1"), static, describedSynonym{"log.cleaner.min.cleanable.ratio", "0.1", static}, describedSynonym{"log.cleaner.min.cleanable.ratio", "0.5", def})
	wantConfig(t, d, "max.message.bytes", new("2000000"), static, describedSynonym{"message.max.bytes", "2000000", static}, describedSynonym{"message.max.bytes", "1048588", def})
	wantConfig(t, d, "segment.bytes", new("1073741824"), def, describedSynonym{"log.segment.bytes", "1073741824", def})
	wantConfig(t, d, "replication.mode", new("raft"), def)

	eventually(t, "every replica of d to follow the defaults", func() bool {
		for _, n := range c.nodes {
			r := n.replicaFor("d", 0)
			if r == nil || r.data.repl.Log().Limits().RetentionAge != time.Hour || !r.data.compacted.Load() || r.data.maxBatchBytes.Load() != 2000000 {
				return false
			}
		}
		return true
	})
	for id, n := range c.nodes {
		if r := n.replicaFor("own", 0); r == nil || r.data.repl.Log().Limits().RetentionAge != time.Second {
			t.Errorf("node %d: topic own's replica does not keep its own retention.ms", id)
		}
	}
}

// A broker config raftq does not know, or a value it cannot take, stops
// the node before it starts, naming it.
func TestConfig_BrokerConfigsValidated(t *testing.T) {
	for set, want := range map[string]string{"log.retention.hours=soon": "broker config log.retention.hours=soon: not an int",
		"log.retension.hours=1": "unknown broker config log.retension.hours"} {
		k, v, _ := strings.Cut(set, "=")
		cfg := DefaultConfig()
		cfg.BrokerConfigs = map[string]string{k: v}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", set, err, want)
		}
	}
}
