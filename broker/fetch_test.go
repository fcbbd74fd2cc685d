package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func fetchRequest(topic string, p int32, offset int64, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = p, offset, epoch, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchPart(resp kmsg.Response) kmsg.FetchResponseTopicPartition {
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

func TestNode_FetchErrorsAndWatermarks(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "f", 1, 3)
	produceSync(t, cl, "f", 0, "a", "b", "c")
	leader := leaderOfPartition(t, c, "f", 0)
	addr := c.cfgs[leader].KafkaAddr
	term := int32(raftOf(c.nodes[leader].replicaFor("f", 0)).Status().Term)

	p := fetchPart(rawKafka(t, addr, fetchRequest("f", 0, 0, term)))
	if p.ErrorCode != 0 || p.HighWatermark != 3 || p.LastStableOffset != 3 || p.LogStartOffset != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("fetch at 0: code %d hw %d lso %d start %d, %d bytes", p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset, len(p.RecordBatches))
	}
	cases := []struct {
		name   string
		offset int64
		epoch  int32
		want   *kerr.Error
	}{
		{"beyond the high watermark", 10, -1, kerr.OffsetOutOfRange},
		{"negative offset", -5, -1, kerr.OffsetOutOfRange},
		{"stale epoch", 0, term - 1, kerr.FencedLeaderEpoch},
		{"future epoch", 0, term + 1, kerr.UnknownLeaderEpoch},
	}
	for _, tc := range cases {
		if p := fetchPart(rawKafka(t, addr, fetchRequest("f", 0, tc.offset, tc.epoch))); p.ErrorCode != tc.want.Code {
			t.Errorf("%s: code %d, want %s", tc.name, p.ErrorCode, tc.want.Message)
		}
	}
	if p := fetchPart(rawKafka(t, addr, fetchRequest("nope", 0, 0, -1))); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: code %d", p.ErrorCode)
	}
	// At the high watermark a fetch waits MaxWait and returns empty, not null.
	if p := fetchPart(rawKafka(t, addr, fetchRequest("f", 0, 3, -1))); p.ErrorCode != 0 || p.RecordBatches == nil || len(p.RecordBatches) != 0 {
		t.Errorf("fetch at the high watermark: code %d, batches %v", p.ErrorCode, p.RecordBatches)
	}
}

func TestNode_FollowerServesReadsUpToItsApplied(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "fr", 1, 3)
	produceSync(t, cl, "fr", 0, "x", "y")
	leader := leaderOfPartition(t, c, "fr", 0)
	follower := leader%3 + 1
	eventually(t, "the follower to apply both records", func() bool {
		return logOf(c.nodes[follower].replicaFor("fr", 0)).HighWatermark() == 2
	})
	p := fetchPart(rawKafka(t, c.cfgs[follower].KafkaAddr, fetchRequest("fr", 0, 0, -1)))
	if p.ErrorCode != 0 || p.HighWatermark != 2 || len(p.RecordBatches) == 0 {
		t.Errorf("follower fetch: code %d hw %d bytes %d", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}
	if p := fetchPart(rawKafka(t, c.cfgs[follower].KafkaAddr, fetchRequest("fr", 0, 5, -1))); p.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Errorf("follower fetch past its high watermark: code %d, want OFFSET_NOT_AVAILABLE", p.ErrorCode)
	}
}

func TestNode_ListOffsetsAndLeaderEpochs(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "lo", 1, 3)
	produceSync(t, cl, "lo", 0, "a", "b", "c", "d")
	leader := leaderOfPartition(t, c, "lo", 0)
	term := int32(raftOf(c.nodes[leader].replicaFor("lo", 0)).Status().Term)

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo"
	for _, ts := range []int64{-2, -1, 0} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	lo.Topics = append(lo.Topics, rt)
	parts := rawKafka(t, c.cfgs[leader].KafkaAddr, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	for i, want := range []int64{0, 4, 0} {
		if parts[i].ErrorCode != 0 || parts[i].Offset != want || parts[i].LeaderEpoch != term {
			t.Errorf("list offsets %d: code %d offset %d epoch %d, want offset %d epoch %d", i, parts[i].ErrorCode, parts[i].Offset, parts[i].LeaderEpoch, want, term)
		}
	}

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version, oe.ReplicaID = 3, -1
	et := kmsg.NewOffsetForLeaderEpochRequestTopic()
	et.Topic = "lo"
	for _, e := range []int32{term, term - 1, term + 5} {
		ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		ep.CurrentLeaderEpoch, ep.LeaderEpoch = -1, e
		et.Partitions = append(et.Partitions, ep)
	}
	oe.Topics = append(oe.Topics, et)
	eps := rawKafka(t, c.cfgs[leader].KafkaAddr, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions
	if eps[0].LeaderEpoch != term || eps[0].EndOffset != 4 {
		t.Errorf("current epoch %d: got epoch %d end %d, want end 4", term, eps[0].LeaderEpoch, eps[0].EndOffset)
	}
	if eps[1].EndOffset != 0 {
		t.Errorf("epoch before any data: end %d, want 0", eps[1].EndOffset)
	}
	if eps[2].LeaderEpoch != -1 || eps[2].EndOffset != -1 {
		t.Errorf("unknown future epoch: got %d/%d, want -1/-1", eps[2].LeaderEpoch, eps[2].EndOffset)
	}
}
