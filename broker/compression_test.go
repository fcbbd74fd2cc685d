package broker

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// A topic whose compression.type names a codec stores every batch in it
// on every replica, whatever the producer sent, and consumers read the
// records as produced; set back to producer, batches stay as sent.
func TestNode_TopicCompressionType(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	plain := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	lz4 := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	adm := kadm.NewClient(plain)
	ctx := testCtx(t)
	zstd := "zstd"
	res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"compression.type": &zstd}, "z")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("record-%03d-%s", i, "some compressible text, some compressible text"))
	}
	produceSync(t, plain, "z", 0, want[:20]...)
	produceSync(t, lz4, "z", 0, want[20:]...)
	c.everyLog(t, "every replica to hold 40 records", "z", 0, func(l *partition.Log) bool { return l.HighWatermark() == 40 })
	for _, n := range c.nodes {
		if got := codecs(t, logOf(n.replicaFor("z", 0)), 0); fmt.Sprint(got) != "[4 4]" {
			t.Errorf("a replica stores codecs %v, want zstd (4) for both batches", got)
		}
	}
	recs := consumeAll(t, c, "z", 0, 40)
	for i, r := range recs {
		if string(r.Value) != want[i] {
			t.Fatalf("record %d is %q, want %q", i, r.Value, want[i])
		}
	}

	// A consumer too old for zstd (Fetch below v10) is told so, as Kafka
	// tells it; v10 reads the records.
	addr, _, _ := c.nodes[leaderOfPartition(t, c, "z", 0)].Addrs()
	old := fetchRequest("z", 0, 0, -1)
	old.Version = 9
	if code := fetchPart(rawKafka(t, addr, old)).ErrorCode; code != kerr.UnsupportedCompressionType.Code {
		t.Errorf("Fetch v9 of a zstd topic: error %d, want UNSUPPORTED_COMPRESSION_TYPE", code)
	}
	if p := fetchPart(rawKafka(t, addr, fetchRequest("z", 0, 0, -1))); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("Fetch v11 of a zstd topic: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}

	producer := "producer"
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: &producer}}, "z")
	if err == nil {
		err = ar[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader to keep lz4 batches as sent", func() bool {
		produceSync(t, lz4, "z", 0, want...) // compressible: kgo sends a batch uncompressed when lz4 would not shrink it
		l := logOf(c.nodes[leaderOfPartition(t, c, "z", 0)].replicaFor("z", 0))
		got := codecs(t, l, l.HighWatermark()-1)
		return len(got) == 1 && got[0] == partition.CodecLz4
	})
}

// codecs lists the codec of each batch in l from offset on.
func codecs(t *testing.T, l *partition.Log, offset int64) []partition.Codec {
	t.Helper()
	b, err := l.Read(offset, 1<<20, l.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	var out []partition.Codec
	for len(b) > 0 {
		size := 12 + int(binary.BigEndian.Uint32(b[8:])) // base offset, length, then what length counts
		info, err := partition.ParseBatchHeader(b[:size])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info.Compression())
		b = b[size:]
	}
	return out
}

// A topic with message.timestamp.type=LogAppendTime: the leader's clock
// stamps each batch (after recompressing it, here to gzip), the produce
// answer carries that time, and consumers read it as every record's
// timestamp, of type LogAppendTime.
func TestNode_LogAppendTime(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testCtx(t)
	// gzip too: a batch is recompressed, then stamped.
	typ, gz := "LogAppendTime", "gzip"
	res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"message.timestamp.type": &typ, "compression.type": &gz}, "lat")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	before := time.Now().Truncate(time.Millisecond)
	pr := cl.ProduceSync(ctx, &kgo.Record{Topic: "lat", Partition: 0, Value: []byte("a"), Timestamp: old},
		&kgo.Record{Topic: "lat", Partition: 0, Value: []byte("b"), Timestamp: old})
	if err := pr.FirstErr(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for _, r := range consumeAll(t, c, "lat", 0, 2) {
		if r.Timestamp.Before(before) || r.Timestamp.After(after) || r.Attrs.TimestampType() != 1 {
			t.Errorf("record %q: timestamp %v of type %d, want one of type 1 (LogAppendTime) between %v and %v",
				r.Value, r.Timestamp, r.Attrs.TimestampType(), before, after)
		}
	}
	c.everyLog(t, "every replica to hold the batch", "lat", 0, func(l *partition.Log) bool { return l.HighWatermark() == 2 })
	if got := codecs(t, logOf(c.nodes[1].replicaFor("lat", 0)), 0); len(got) != 1 || got[0] != partition.CodecGzip {
		t.Errorf("stored codecs %v, want one gzip batch", got)
	}
	// kgo does not read the answer's LogAppendTime: ask directly, with
	// acks=all and acks=1, and retry an idempotent batch, which is
	// answered with the time it got the first time.
	addr, _, _ := c.nodes[leaderOfPartition(t, c, "lat", 0)].Addrs()
	answer := func(acks int16, batch []byte) int64 {
		t.Helper()
		before := time.Now().Truncate(time.Millisecond)
		req := produceRequest("lat", 0, acks, batch)
		req.Version = 9 // LogAppendTime is in answers from v2
		resp := rawKafka(t, addr, req)
		after := time.Now()
		sp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if got := time.UnixMilli(sp.LogAppendTime); sp.ErrorCode != 0 || got.Before(before) || got.After(after) {
			t.Errorf("acks=%d: error %d, LogAppendTime %v; want the append time, between %v and %v", acks, sp.ErrorCode, got, before, after)
		}
		return sp.LogAppendTime
	}
	answer(1, testBatch(t, -1, -1, -1, "c"))
	first := answer(-1, testBatch(t, 4242, 0, 0, "d"))
	for time.Now().UnixMilli() <= first { // a fresh stamp would differ from the first
		time.Sleep(time.Millisecond)
	}
	req := produceRequest("lat", 0, -1, testBatch(t, 4242, 0, 0, "d"))
	req.Version = 9
	resp := rawKafka(t, addr, req)
	if sp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; sp.ErrorCode != 0 || sp.LogAppendTime != first {
		t.Errorf("retried batch: error %d, LogAppendTime %d; want the first answer's %d", sp.ErrorCode, sp.LogAppendTime, first)
	}
}

// A compressed batch whose payload no consumer could decode is refused at
// produce with CORRUPT_MESSAGE, as Kafka refuses it, on a topic that keeps
// the producer's codec too; nothing reaches the log.
func TestNode_CorruptCompressedBatchRefused(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "gz", 1, 3)
	bad := encodeBatch(kmsg.RecordBatch{Magic: 2, Attributes: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: []byte("this is not gzip")})
	addr, _, _ := c.nodes[leaderOfPartition(t, c, "gz", 0)].Addrs()
	if code, _ := produceCode(rawKafka(t, addr, produceRequest("gz", 0, -1, bad))); code != kerr.CorruptMessage.Code {
		t.Fatalf("a batch marked gzip that is not gzip: error %d, want CORRUPT_MESSAGE (%d)", code, kerr.CorruptMessage.Code)
	}
	produceSync(t, cl, "gz", 0, "good")
	if recs := consumeAll(t, c, "gz", 0, 1); string(recs[0].Value) != "good" || recs[0].Offset != 0 {
		t.Errorf("read %q at offset %d, want the good record at 0", recs[0].Value, recs[0].Offset)
	}
}
