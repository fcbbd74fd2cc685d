package broker

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// Records deleted since the partition's last snapshot do not keep its
// replicas from restarting: every node comes back, and the log keeps its
// new start and its records.
func TestNode_RestartAfterDeleteRecords(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "dr", 1, 3)
	produceSync(t, cl, "dr", 0, "a", "b", "c", "d", "e")
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 3})
	if drs, err := kadm.NewClient(cl).DeleteRecords(testCtx(t), offs); err != nil || drs.Error() != nil {
		t.Fatalf("delete records: %v %v", err, drs.Error())
	}
	c.everyLog(t, "every replica to move its log start", "dr", 0, func(l *partition.Log) bool { return l.StartOffset() == 3 })
	c.restartAll()
	produceSync(t, cl, "dr", 0, "f")
	c.everyLog(t, "every restarted replica to hold offsets 3-5 from start 3", "dr", 0, func(l *partition.Log) bool {
		return l.StartOffset() == 3 && l.HighWatermark() == 6
	})
}

// A cluster restarted after every kind of topic change comes back whole:
// partitions added, a topic deleted and created again under its name, and
// retention that moved a log start since the last snapshot. Every
// partition then takes writes, and its replicas agree.
func TestNode_RestartAfterAdminChanges(t *testing.T) {
	walLayouts(t, func(t *testing.T, mod func(*Config)) {
		c := newTestCluster(t, 3, func(cfg *Config) {
			cfg.RetentionCheckInterval = 100 * time.Millisecond
			if mod != nil {
				mod(cfg)
			}
		})
		cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		adm := kadm.NewClient(cl)
		ctx := testCtx(t)
		createTopic(t, cl, "keep", 2, 3)
		produceSync(t, cl, "keep", 0, "a", "b")
		if _, err := adm.CreatePartitions(ctx, 2, "keep"); err != nil {
			t.Fatal(err)
		}
		createTopic(t, cl, "again", 1, 3)
		produceSync(t, cl, "again", 0, "old1", "old2", "old3")
		if _, err := adm.DeleteTopics(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deleted topic's replicas to go", func() bool {
			for _, n := range c.nodes {
				if n.replicaFor("again", 0) != nil {
					return false
				}
			}
			return true
		})
		createTopic(t, cl, "again", 1, 3)
		// kgo fails a topic whose id changed under it (deleted and
		// recreated) until it is purged: a new client for the new topic.
		cl2 := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produceSync(t, cl2, "again", 0, "new1")
		res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"segment.bytes": new("1024"), "retention.bytes": new("2048")}, "ret")
		if err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
		for i := range 40 {
			produceSync(t, cl, "ret", 0, fmt.Sprintf("%0100d", i))
		}
		c.everyLog(t, "retention to move the start", "ret", 0, func(l *partition.Log) bool { return l.StartOffset() > 0 })
		c.restartAll()
		for p := int32(0); p < 4; p++ {
			produceSync(t, cl, "keep", p, "after")
		}
		produceSync(t, cl2, "again", 0, "new2")
		produceSync(t, cl, "ret", 0, "after")
		recs := consumeAll(t, c, "again", 0, 2)
		if string(recs[0].Value) != "new1" || string(recs[1].Value) != "new2" {
			t.Fatalf("again: %q %q", recs[0].Value, recs[1].Value)
		}
		eventually(t, "all replicas of every partition to agree", func() bool {
			for _, tp := range []struct {
				name string
				p    int32
			}{{"keep", 0}, {"keep", 3}, {"again", 0}, {"ret", 0}} {
				var hw []int64
				for _, n := range c.nodes {
					r := n.replicaFor(tp.name, tp.p)
					if r == nil {
						return false
					}
					hw = append(hw, logOf(r).HighWatermark())
				}
				if hw[0] != hw[1] || hw[1] != hw[2] {
					return false
				}
			}
			return true
		})
	})
}

// An altered topic config takes effect on the running replicas, as in
// Kafka, without a restart: a lower max.message.bytes refuses a batch
// that passed before, and a retention.bytes set later deletes segments
// that a smaller segment.bytes rolled.
func TestNode_AlteredConfigsApplyWhileRunning(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.RetentionCheckInterval = 100 * time.Millisecond })
	// Uncompressed, so that batch sizes are the records' (the limits
	// apply to batches as sent).
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	createTopic(t, cl, "live", 1, 3)
	big := fmt.Sprintf("%02000d", 0)
	produceSync(t, cl, "live", 0, big)

	alter := func(kv ...string) {
		t.Helper()
		var acs []kadm.AlterConfig
		for i := 0; i < len(kv); i += 2 {
			acs = append(acs, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[i], Value: &kv[i+1]})
		}
		res, err := adm.AlterTopicConfigs(ctx, acs, "live")
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatalf("alter %v: %v", kv, err)
		}
	}
	alter("max.message.bytes", "1024")
	eventually(t, "a 2 KB record to be refused", func() bool {
		res := cl.ProduceSync(ctx, &kgo.Record{Topic: "live", Partition: 0, Value: []byte(big)})
		return errors.Is(res.FirstErr(), kerr.MessageTooLarge)
	})

	alter("max.message.bytes", "1048588", "segment.bytes", "4096")
	c.everyLog(t, "every replica to take the new segment size", "live", 0, func(l *partition.Log) bool { return l.Limits().SegmentBytes == 4096 })
	for i := range 20 {
		produceSync(t, cl, "live", 0, fmt.Sprintf("%01000d", i))
	}
	alter("retention.bytes", "8192")
	c.everyLog(t, "retention to delete the oldest segments on every replica", "live", 0, func(l *partition.Log) bool {
		return l.StartOffset() > 0 && len(l.Segments()) <= 4
	})
}

// A replica that cannot be opened (here its checkpoint names a log end
// far beyond its log and every peer's, a hole no peer can fill: a
// checkpoint that merely fails its CRC is now rebuilt from raft) is
// reported, not hidden: Metadata from its node shows it offline and never
// names the node leader, /v1/status and raftq_offline_replicas name it,
// and once the damage is gone the node's retry brings it back.
func TestNode_ReplicaThatCannotOpenIsOffline(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "sick", 1, 3)
	produceSync(t, cl, "sick", 0, "a", "b")
	const sick = 3
	dir := c.nodes[sick].logDir("sick", 0)
	c.stop(sick)
	bad := filepath.Join(dir, "replica.checkpoint")
	body := `{"applied":3,"start":0,"next":1000}`
	sealed := fmt.Sprintf("%s\n%08x\n", body, crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(bad, []byte(sealed), 0o644); err != nil {
		t.Fatal(err)
	}
	c.start(sick)
	n := c.nodes[sick]
	eventually(t, "node 3 to report its replica offline", func() bool {
		off := n.Status().Offline
		return len(off) == 1 && off[0].Topic == "sick" && strings.Contains(off[0].Error, "below its checkpoint")
	})
	if got := gaugeValue(t, n.metrics.reg, "raftq_offline_replicas"); got != 1 {
		t.Errorf("raftq_offline_replicas = %v, want 1", got)
	}
	md := requestFrom[*kmsg.MetadataResponse](t, c.client(), sick, kmsg.NewPtrMetadataRequest()) // a new client: cl holds a connection to the old node 3
	for _, tp := range md.Topics {
		if *tp.Topic != "sick" {
			continue
		}
		p := tp.Partitions[0]
		if p.Leader == sick || !slices.Contains(p.OfflineReplicas, sick) || slices.Contains(p.ISR, sick) {
			t.Errorf("node 3's metadata for sick-0: leader %d, isr %v, offline %v; want node 3 offline and not leading", p.Leader, p.ISR, p.OfflineReplicas)
		}
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 3 to open its replica on a retry and catch up", func() bool {
		r := n.replicaFor("sick", 0)
		return len(n.Status().Offline) == 0 && r != nil && logOf(r).HighWatermark() == 2
	})
}

// gaugeValue reads an unlabelled gauge from a registry.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// restartAll stops and starts every node, then waits for all to register.
func (c *testCluster) restartAll() {
	for id := range c.cfgs {
		c.stop(id)
		c.start(id)
	}
	c.waitBrokers(len(c.cfgs))
}

// everyLog waits until every node holds a replica of topic-p whose log
// meets cond.
func (c *testCluster) everyLog(t *testing.T, what, topic string, p int32, cond func(*partition.Log) bool) {
	t.Helper()
	eventually(t, what, func() bool {
		for _, n := range c.nodes {
			if r := n.replicaFor(topic, p); r == nil || !cond(logOf(r)) {
				return false
			}
		}
		return true
	})
}

// A restarted node registers again with a new StartID (so that group 0
// fences it out of every ISR until it catches up), and its raft
// partitions notice nothing: placement is unchanged, no ISR state
// appears, and every partition takes writes with every record kept.
func TestNode_RestartRegistersANewStart(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "rs", 2, 3)
	produceSync(t, cl, "rs", 0, "a")
	produceSync(t, cl, "rs", 1, "b")
	before := c.nodes[1].Metadata()
	was := before.Brokers[2]
	if len(was.StartID) != 32 {
		t.Fatalf("broker 2 registered with StartID %q, want 32 hex digits", was.StartID)
	}
	c.stop(2)
	c.start(2)
	eventually(t, "node 2's new registration on node 1", func() bool {
		b := c.nodes[1].Metadata().Brokers[2]
		return b.StartID != was.StartID && b.Epoch > was.Epoch && b.Alive
	})
	after := c.nodes[1].Metadata()
	for i, p := range after.Topics["rs"].Partitions {
		q := before.Topics["rs"].Partitions[i]
		if !slices.Equal(p.Replicas, q.Replicas) || p.Group != q.Group || len(p.ISR)+len(p.ELR) != 0 || p.PartitionEpoch != 0 {
			t.Errorf("partition %d after the restart: %+v, was %+v", i, p, q)
		}
	}
	produceSync(t, cl, "rs", 0, "c")
	produceSync(t, cl, "rs", 1, "d")
	if recs := consumeAll(t, c, "rs", 0, 2); string(recs[0].Value) != "a" || string(recs[1].Value) != "c" {
		t.Errorf("rs-0 after the restart: %q %q", recs[0].Value, recs[1].Value)
	}
}
