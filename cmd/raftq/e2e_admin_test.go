package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestE2E_Admin drives the admin APIs the CLI test does not, with kadm
// against three raftq processes: CreatePartitions (the new partition is
// hosted, led and writable), IncrementalAlterConfigs and DescribeConfigs,
// DescribeCluster, and DeleteRecords (every replica moves its log start,
// and reads begin there).
func TestE2E_Admin(t *testing.T) {
	c := e2eCluster(t, 3)
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(t, c, "adm", 1, 3, nil)

	// CreatePartitions: 1 -> 3.
	cps, err := adm.CreatePartitions(ctx, 2, "adm")
	if err != nil || cps.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, cps.Error())
	}
	for p := range int32(3) {
		waitFor(t, 30*time.Second, fmt.Sprintf("adm-%d on all three nodes", p), func(ctx context.Context) bool {
			return len(hostsOf(ctx, c, "adm", p)) == 3
		})
		produceValues(t, cl, "adm", p, fmt.Sprintf("p%d", p))
	}
	if cps, _ := adm.CreatePartitions(ctx, 1, "no-such-topic"); cps.Error() == nil {
		t.Error("create partitions of an unknown topic succeeded")
	}

	// IncrementalAlterConfigs, then DescribeConfigs on another node's view.
	ret := "7200000"
	acs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &ret}}, "adm")
	if err != nil || acs[0].Err != nil {
		t.Fatalf("alter configs: %v %+v", err, acs)
	}
	waitFor(t, 30*time.Second, "retention.ms=7200000 described", func(ctx context.Context) bool {
		rcs, err := adm.DescribeTopicConfigs(ctx, "adm")
		if err != nil {
			return false
		}
		rc, err := rcs.On("adm", nil)
		if err != nil {
			return false
		}
		for _, cfg := range rc.Configs {
			if cfg.Key == "retention.ms" {
				return cfg.MaybeValue() == ret && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig
			}
		}
		return false
	})
	bad := "not-a-number"
	if acs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &bad}}, "adm"); err == nil && acs[0].Err == nil {
		t.Error("retention.ms=not-a-number was accepted")
	}

	// sarama's ClusterAdmin alters with the older AlterConfigs: what it
	// names replaces every explicit config, so retention.ms returns to
	// its default.
	sadm, err := sarama.NewClusterAdmin(seeds(c), saramaConfig(sarama.V2_8_0_0))
	if err != nil {
		t.Fatal(err)
	}
	defer sadm.Close()
	seg := "2097152"
	if err := sadm.AlterConfig(sarama.TopicResource, "adm", map[string]*string{"segment.bytes": &seg}, false); err != nil {
		t.Fatalf("sarama AlterConfig: %v", err)
	}
	waitFor(t, 30*time.Second, "segment.bytes set and retention.ms back to its default", func(ctx context.Context) bool {
		segNow, segSrc := topicConfig(ctx, adm, "adm", "segment.bytes")
		_, retSrc := topicConfig(ctx, adm, "adm", "retention.ms")
		return segNow == seg && segSrc == kmsg.ConfigSourceDynamicTopicConfig && retSrc == kmsg.ConfigSourceDefaultConfig
	})
	saramaAdminReads(t, sadm)

	// DescribeLogDirs: every broker has one log dir on a real volume and
	// holds each adm partition, with bytes in it.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatalf("describe log dirs: %v", err)
	}
	if len(dirs) != 3 {
		t.Errorf("log dirs from %d brokers, want 3", len(dirs))
	}
	for b, ds := range dirs {
		if len(ds) != 1 || ds.Error() != nil {
			t.Errorf("broker %d: %d log dirs (%v), want 1", b, len(ds), ds.Error())
		}
		for _, d := range ds {
			if !strings.HasSuffix(d.Dir, "/log") || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
				t.Errorf("broker %d: dir %q, volume %d bytes, %d usable", b, d.Dir, d.TotalBytes, d.UsableBytes)
			}
		}
		for p := range int32(3) {
			if lp, ok := ds.LookupPartition("adm", p); !ok || lp.Size <= 0 {
				t.Errorf("broker %d: adm-%d in its log dir: %v, %d bytes; want it with its records", b, p, ok, lp.Size)
			}
		}
	}

	// DescribeCluster names every node and the cluster id.
	dreq := kmsg.NewPtrDescribeClusterRequest()
	dresp, err := cl.Request(ctx, dreq)
	if err != nil {
		t.Fatal(err)
	}
	dc := dresp.(*kmsg.DescribeClusterResponse)
	var ids []int32
	for _, b := range dc.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	if dc.ErrorCode != 0 || dc.ClusterID != "e2e" || !slices.Equal(ids, []int32{1, 2, 3}) || dc.ControllerID < 1 {
		t.Errorf("describe cluster: error %d, cluster %q, brokers %v, controller %d", dc.ErrorCode, dc.ClusterID, ids, dc.ControllerID)
	}

	// DeleteRecords below offset 3 of adm-0, which holds 5 records.
	produceValues(t, cl, "adm", 0, "a", "b", "c", "d")
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "adm", Partition: 0, At: 3})
	drs, err := adm.DeleteRecords(ctx, offs)
	if err != nil || drs.Error() != nil {
		t.Fatalf("delete records: %v %v", err, drs.Error())
	}
	if dr, _ := drs.Lookup("adm", 0); dr.LowWatermark != 3 {
		t.Errorf("delete records: low watermark %d, want 3", dr.LowWatermark)
	}
	waitFor(t, 30*time.Second, "every replica of adm-0 to start at 3", func(ctx context.Context) bool {
		for _, id := range c.NodeIDs() {
			s, err := nodeStatus(ctx, c, id)
			if err != nil {
				return false
			}
			for _, ps := range s.Partitions {
				if ps.Topic == "adm" && ps.Partition == 0 && ps.LogStart != 3 {
					return false
				}
			}
		}
		return true
	})
	starts, err := adm.ListStartOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup("adm", 0); s.Offset != 3 {
		t.Errorf("list start offsets: %d, want 3", s.Offset)
	}
	b := nodeBroker(t, c, partitionLeader(t, c, "adm", 0))
	if sp := fetchPartition(t, b, "adm", 0, 1, -1); sp.ErrorCode != kerr.OffsetOutOfRange.Code || sp.LogStartOffset != 3 {
		t.Errorf("fetch below the new log start: %v, log start %d", kerr.ErrorForCode(sp.ErrorCode), sp.LogStartOffset)
	}
	reader := e2eClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"adm": {0: kgo.NewOffset().AtStart()}}))
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("reading from the start after DeleteRecords: %v, want [c d]", got)
	}
	for p := range int32(3) {
		waitReplicasEqual(t, c, "adm", p, c.NodeIDs())
	}
	checkNoCrashes(t, c)
}

// topicConfig returns a topic config's value and source, or the zero
// values when it cannot be described.
func topicConfig(ctx context.Context, adm *kadm.Client, topic, key string) (string, kmsg.ConfigSource) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", 0
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", 0
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == key {
			return cfg.MaybeValue(), cfg.Source
		}
	}
	return "", 0
}

// saramaAdminReads runs sarama ClusterAdmin's read calls against the
// cluster TestE2E_Admin built: topic adm with 3 partitions and
// segment.bytes=2097152 on three brokers.
func saramaAdminReads(t *testing.T, sadm sarama.ClusterAdmin) {
	t.Helper()
	topics, err := sadm.ListTopics()
	if d, ok := topics["adm"]; err != nil || !ok || d.NumPartitions != 3 || d.ReplicationFactor != 3 {
		t.Errorf("sarama ListTopics: %v, adm %+v", err, d)
	}
	entries, err := sadm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "adm"})
	found := false
	for _, e := range entries {
		found = found || e.Name == "segment.bytes" && e.Value == "2097152"
	}
	if err != nil || !found {
		t.Errorf("sarama DescribeConfig: %v, segment.bytes=2097152 found %v", err, found)
	}
	brokers, _, err := sadm.DescribeCluster()
	if err != nil || len(brokers) != 3 {
		t.Errorf("sarama DescribeCluster: %v, %d brokers", err, len(brokers))
	}
	dirs, err := sadm.DescribeLogDirs([]int32{1, 2, 3})
	if err != nil || len(dirs) != 3 {
		t.Fatalf("sarama DescribeLogDirs: %v, %d brokers", err, len(dirs))
	}
	for b, ds := range dirs {
		parts := 0
		for _, d := range ds {
			for _, tp := range d.Topics {
				if tp.Topic == "adm" {
					parts += len(tp.Partitions)
				}
			}
		}
		if parts != 3 {
			t.Errorf("sarama DescribeLogDirs: broker %d holds %d adm partitions, want 3", b, parts)
		}
	}
}
