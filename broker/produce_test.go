package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
)

func createTopic(t testing.TB, cl *kgo.Client, name string, parts int32, rf int16) {
	t.Helper()
	res, err := kadm.NewClient(cl).CreateTopic(testCtx(t), parts, rf, nil, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// produceSync produces values to topic partition p and returns their offsets.
func produceSync(t testing.TB, cl *kgo.Client, topic string, p int32, values ...string) []int64 {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
	}
	res := cl.ProduceSync(testCtx(t), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	offs := make([]int64, len(res))
	for i, r := range res {
		offs[i] = r.Record.Offset
	}
	return offs
}

// consumeAll reads partition p of topic from offset 0 until want records.
func consumeAll(t testing.TB, c *testCluster, topic string, p int32, want int) []*kgo.Record {
	t.Helper()
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}))
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(out), want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestNode_ProduceConsumeAcksAll(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "t", 3, 3)
	for p := int32(0); p < 3; p++ {
		var vals []string
		for i := range 50 {
			vals = append(vals, fmt.Sprintf("p%d-%d", p, i))
		}
		offs := produceSync(t, cl, "t", p, vals...)
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d record %d got offset %d", p, i, o)
			}
		}
		recs := consumeAll(t, c, "t", p, 50)
		for i, r := range recs {
			if string(r.Value) != vals[i] || r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d is %q at %d, want %q at %d", p, i, r.Value, r.Offset, vals[i], i)
			}
		}
	}
}

func TestNode_Acks1OffsetsMatchLog(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	createTopic(t, cl, "a1", 1, 3)
	var vals []string
	for i := range 200 {
		vals = append(vals, fmt.Sprintf("v%d", i))
	}
	offs := produceSync(t, cl, "a1", 0, vals...)
	recs := consumeAll(t, c, "a1", 0, len(vals))
	byValue := map[string]int64{}
	for _, r := range recs {
		byValue[string(r.Value)] = r.Offset
	}
	for i, v := range vals {
		if got, ok := byValue[v]; !ok || got != offs[i] {
			t.Fatalf("acks=1 answered offset %d for %s; the log has it at %d (present %v)", offs[i], v, got, ok)
		}
	}
}

// rawRequest sends req to the node with the given id, through a kgo
// client: kgo gives a ProduceRequest the client's own acks (all) whatever
// req says, so rawKafka sends other acks.
func rawRequest(t testing.TB, c *testCluster, id uint64, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl := c.client()
	resp, err := cl.Broker(int(id)).Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("request to node %d: %v", id, err)
	}
	return resp
}

func leaderOfPartition(t testing.TB, c *testCluster, topic string, p int32) uint64 {
	t.Helper()
	var leader uint64
	eventually(t, "a partition leader", func() bool {
		for id, n := range c.nodes {
			if r := n.replicaFor(topic, p); r != nil && raftOf(r).Status().IsLeader() {
				leader = id
				return true
			}
		}
		return false
	})
	return leader
}

func produceRequest(topic string, p int32, acks int16, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func produceCode(resp kmsg.Response) (int16, int64) {
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

func TestNode_ProduceErrors(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client()
	createTopic(t, cl, "e", 1, 3)
	leader := leaderOfPartition(t, c, "e", 0)
	follower := leader%3 + 1
	good := testBatch(t, -1, 0, 0, "a", "b")

	code, _ := produceCode(rawRequest(t, c, follower, produceRequest("e", 0, -1, good)))
	if code != kerr.NotLeaderForPartition.Code {
		t.Errorf("produce to follower: code %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	code, _ = produceCode(rawRequest(t, c, leader, produceRequest("nope", 0, -1, good)))
	if code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("produce to unknown topic: code %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff // the CRC no longer matches
	code, _ = produceCode(rawRequest(t, c, leader, produceRequest("e", 0, -1, bad)))
	if code != kerr.CorruptMessage.Code {
		t.Errorf("corrupt batch: code %d, want CORRUPT_MESSAGE", code)
	}
	code, _ = produceCode(rawRequest(t, c, leader, produceRequest(groups.OffsetsTopic, 0, -1, good)))
	if code != kerr.InvalidTopicException.Code {
		t.Errorf("produce to %s: code %d, want INVALID_TOPIC_EXCEPTION", groups.OffsetsTopic, code)
	}
	code, _ = produceCode(rawKafka(t, c.cfgs[leader].KafkaAddr, produceRequest("e", 0, 2, good)))
	if code != kerr.InvalidRequiredAcks.Code {
		t.Errorf("acks=2: code %d, want INVALID_REQUIRED_ACKS", code)
	}
	if hw := logOf(c.nodes[leader].replicaFor("e", 0)).HighWatermark(); hw != 0 {
		t.Errorf("refused batches reached the log: high watermark %d", hw)
	}
	code, off := produceCode(rawRequest(t, c, leader, produceRequest("e", 0, -1, good)))
	if code != 0 || off != 0 {
		t.Errorf("good batch after the bad ones: code %d offset %d", code, off)
	}
}

func TestNode_IdempotentRetryGetsOriginalOffset(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client()
	createTopic(t, cl, "idem", 1, 3)
	leader := leaderOfPartition(t, c, "idem", 0)
	const pid = 77
	first := testBatch(t, pid, 0, 0, "a", "b", "c")
	second := testBatch(t, pid, 0, 3, "d")
	for i, b := range [][]byte{first, second, first, second} {
		code, off := produceCode(rawRequest(t, c, leader, produceRequest("idem", 0, -1, b)))
		want := []int64{0, 3, 0, 3}[i]
		if code != 0 || off != want {
			t.Fatalf("send %d: code %d offset %d, want offset %d", i, code, off, want)
		}
	}
	gap := testBatch(t, pid, 0, 9, "x")
	if code, _ := produceCode(rawRequest(t, c, leader, produceRequest("idem", 0, -1, gap))); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Errorf("sequence gap: code %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", code)
	}
	if hw := logOf(c.nodes[leader].replicaFor("idem", 0)).HighWatermark(); hw != 4 {
		t.Errorf("high watermark %d after dedup, want 4", hw)
	}
}

// testBatch builds a valid v2 batch with the franz-go encoder.
func testBatch(t testing.TB, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	rb := kmsg.RecordBatch{Magic: 2, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		LastOffsetDelta: int32(len(values) - 1), NumRecords: int32(len(values))}
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		recs = appendRecord(recs, r)
	}
	rb.Records = recs
	return encodeBatch(rb)
}
