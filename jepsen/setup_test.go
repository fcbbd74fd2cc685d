package jepsen

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
)

func TestRaftqConfig_SetupNamesTheEffectiveSettings(t *testing.T) {
	c := DefaultRaftqConfig()
	c.Nodes = 5
	c.Fsync = FsyncNever
	c.ServerArgs = []string{"--tick-interval=50ms", "--eligible-leader-replicas"}
	c.Schedule.Seed = 9
	c.Schedule.Kinds = []chaos.Kind{chaos.KindKill, chaos.KindLoseUnfsynced}
	c.Writeback = 30 * time.Second
	w := &c.Run.Workload
	w.ReplicationFactor = 3
	w.TopicConfigs = map[string]string{"replication.mode": "isr", "min.insync.replicas": "2", "flush.messages": "1"}
	s := c.setup()
	want := Setup{Mode: "isr", Nodes: 5, Partitions: 4, ReplicationFactor: 3, MinInsyncReplicas: "2",
		FlushMessages: "1", FlushMs: "never", Fsync: FsyncNever, Unclean: "false", ELR: true, Acks: AcksAll,
		Idempotent: true, Nemesis: []string{"kill", "lose-unfsynced"}, PowerTargets: []string{"all"}, Seed: 9, Duration: w.Duration,
		LazyFS: "writeback-30s"}
	got := s
	got.TopicConfigs, got.ServerArgs = nil, nil
	if gb, wb := mustJSON(t, got), mustJSON(t, want); gb != wb {
		t.Errorf("setup\n%s\nwant\n%s", gb, wb)
	}
	line := s.String()
	for _, kv := range []string{"mode=isr", "rf=3", "min.insync.replicas=2", "flush.messages=1", "fsync=never",
		"unclean=false", "elr=true", "nodes=5", "nemesis=kill,lose-unfsynced", "seed=9", "lazyfs=writeback-30s",
		"topic.flush.messages=1", `server.args="--tick-interval=50ms --eligible-leader-replicas"`} {
		if !strings.Contains(line, kv) {
			t.Errorf("setup line %q lacks %s", line, kv)
		}
	}

	// Defaults: raft mode, no faults, no lazyfs; a later =false wins.
	c = DefaultRaftqConfig()
	c.Schedule.Kinds = nil
	c.ServerArgs = []string{"--eligible-leader-replicas", "--eligible-leader-replicas=false"}
	s = c.setup()
	c.LazyFS = true
	if got := c.setup().LazyFS; got != "worst-case" {
		t.Errorf("lazyfs without writeback: %q", got)
	}
	if s.Mode != "raft" || s.MinInsyncReplicas != "1" || s.FlushMessages != "never" || s.Unclean != "false" ||
		s.ELR || s.LazyFS != "off" || len(s.Nemesis) != 1 || s.Nemesis[0] != "none" {
		t.Errorf("default setup %+v", s)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWorkload_SetupCreatesTheTopicWithItsConfigs(t *testing.T) {
	c := newFake(t)
	cfg := fakeWorkload(c)
	cfg.TopicConfigs = map[string]string{"retention.ms": "123456", "segment.bytes": "1048576"}
	w, err := NewWorkload(cfg, NewRecorder(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, cfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(cfg.Topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, v := range cfg.TopicConfigs {
		if got[k] != v {
			t.Errorf("topic config %s = %q, want %q", k, got[k], v)
		}
	}
}

func TestRun_WritesTheSetupAndRecheckKeepsIt(t *testing.T) {
	c := newFake(t)
	cfg := DefaultConfig()
	cfg.Workload = fakeWorkload(c)
	cfg.Workload.Duration = 500 * time.Millisecond
	cfg.ReportDir = t.TempDir()
	cfg.Setup = &Setup{Mode: "isr", Nodes: 3, MinInsyncReplicas: "2", Nemesis: []string{"none"}}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	read := func() Results {
		var r Results
		b, err := os.ReadFile(filepath.Join(cfg.ReportDir, ResultsFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(); r.Setup == nil || r.Setup.Mode != "isr" || r.Setup.MinInsyncReplicas != "2" {
		t.Fatalf("results.json setup %+v", r.Setup)
	}
	if _, err := Recheck(cfg.ReportDir, DefaultCheckConfig()); err != nil {
		t.Fatal(err)
	}
	if r := read(); r.Setup == nil || r.Setup.Mode != "isr" {
		t.Fatalf("after recheck, setup %+v", r.Setup)
	}
}
