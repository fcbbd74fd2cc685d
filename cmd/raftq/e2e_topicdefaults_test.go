package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestE2E_TopicDefaults: a server started with --config-file and
// --override gives every topic that sets no value of its own the broker
// configs' defaults. raftq topic describe shows an inherited value with
// the broker config it comes from, a topic's own value as its own, and
// DescribeBrokerConfigs shows the broker configs as the node was started
// with them.
func TestE2E_TopicDefaults(t *testing.T) {
	file := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(file, []byte("# as Kafka's\nlog.retention.hours=1\nlog.cleanup.policy=compact\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := e2eCluster(t, 1, "--config-file", file, "--override", "log.cleaner.min.cleanable.ratio=0.2")
	bs := strings.Join(seeds(c), ",")
	cli(t, 0, "", "topic", "create", "inherits", "-r", "1", "-b", bs)
	cli(t, 0, "", "topic", "create", "own", "-r", "1", "-c", "retention.ms=1000", "-b", bs)
	describes := func(topic string, want ...string) func(context.Context) bool {
		return func(context.Context) bool {
			out := cli(t, 0, "", "topic", "describe", topic, "-b", bs).stdout
			for _, w := range want {
				if !strings.Contains(out, "\n"+w+"\n") {
					t.Logf("topic describe %s lacks %q:\n%s", topic, w, out)
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 10*time.Second, "inherited values described", describes("inherits",
		"  retention.ms=3600000 (STATIC_BROKER_CONFIG from log.retention.hours=1)",
		"  cleanup.policy=compact (STATIC_BROKER_CONFIG from log.cleanup.policy=compact)",
		"  min.cleanable.dirty.ratio=0.2 (STATIC_BROKER_CONFIG from log.cleaner.min.cleanable.ratio=0.2)",
		"  segment.bytes=1073741824 (DEFAULT_CONFIG)"))
	waitFor(t, 10*time.Second, "a topic's own value described", describes("own",
		"  retention.ms=1000 (DYNAMIC_TOPIC_CONFIG)",
		"  cleanup.policy=compact (STATIC_BROKER_CONFIG from log.cleanup.policy=compact)"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(e2eClient(t, c)).DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		value string
		src   kmsg.ConfigSource
	}{
		"log.retention.hours":             {"1", kmsg.ConfigSourceStaticBrokerConfig},
		"log.cleanup.policy":              {"compact", kmsg.ConfigSourceStaticBrokerConfig},
		"log.cleaner.min.cleanable.ratio": {"0.2", kmsg.ConfigSourceStaticBrokerConfig},
		"log.segment.bytes":               {"1073741824", kmsg.ConfigSourceDefaultConfig},
	}
	for _, cfg := range rc.Configs {
		if w, ok := want[cfg.Key]; ok {
			if cfg.MaybeValue() != w.value || cfg.Source != w.src {
				t.Errorf("broker 1: %s = %s (%s), want %s (%s)", cfg.Key, cfg.MaybeValue(), cfg.Source, w.value, w.src)
			}
			delete(want, cfg.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("broker 1 does not describe %v", want)
	}
}
