package main

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/chaos"
)

// TestE2E_BadInput sends the list of bad input to real raftq
// processes. Each must get a Kafka error code or a closed connection,
// never a crash and never a corrupted log: after each case the cluster
// still takes and serves records, and the records written before it are
// all there, in order. At the end every replica's segments are compared
// byte for byte and no process may have exited.
func TestE2E_BadInput(t *testing.T) { runBadInput(t, nil) }

// runBadInput is TestE2E_BadInput with its topics created with tc's
// configs.
func runBadInput(t *testing.T, tc topicConfigs) {
	c := e2eCluster(t, 3)
	bi := newBadInput(t, c, tc)
	cases := []struct {
		name string
		run  func(t *testing.T, bi *badInput)
	}{
		{"garbage", testGarbage},
		{"oversized-frame", testOversizedFrame},
		{"unknown-topic", testUnknownTopic},
		{"bad-batch", testBadBatch},
		{"out-of-range-offset", testOutOfRangeOffset},
		{"non-leader", testNonLeader},
		{"stale-epoch", testStaleEpoch},
		{"duplicate-node-id", testDuplicateNodeID},
		{"wiped-node-rejoins", testWipedNodeRejoins},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, bi)
			bi.stillServes(t, tc.name)
		})
	}
	for p := range int32(2) {
		waitReplicasEqual(t, c, bi.topic, p, c.NodeIDs())
	}
	checkNoCrashes(t, c)
}

// badInput holds the cluster and a topic whose contents the test knows.
type badInput struct {
	c       *chaos.Cluster
	cl      *kgo.Client
	topic   string             // 2 partitions, RF 3
	solo    string             // 1 partition, RF 1: most nodes host no replica
	written map[int32][]string // every value written to topic, by partition
	isr     bool               // the topics are ISR topics
}

func newBadInput(t *testing.T, c *chaos.Cluster, tc topicConfigs) *badInput {
	bi := &badInput{c: c, topic: "intact", solo: "solo", written: map[int32][]string{}, isr: tc["replication.mode"] == "isr"}
	createTopic(t, c, bi.topic, 2, 3, tc.with(nil))
	solo := tc.with(nil)
	if len(tc) > 0 {
		one := "1"
		solo["min.insync.replicas"] = &one // RF 1
	}
	createTopic(t, c, bi.solo, 1, 1, solo)
	bi.cl = e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		vals := seq("before-p"+string(rune('0'+p)), 20)
		produceValues(t, bi.cl, bi.topic, p, vals...)
		bi.written[p] = append(bi.written[p], vals...)
	}
	return bi
}

// stillServes produces one more record to each partition and reads every
// partition back in full: nothing written before may be lost or changed.
func (bi *badInput) stillServes(t *testing.T, after string) {
	t.Helper()
	for p := range int32(2) {
		v := after + "-p" + string(rune('0'+p))
		produceValues(t, bi.cl, bi.topic, p, v)
		bi.written[p] = append(bi.written[p], v)
		got, _ := readPartition(t, bi.c, bi.topic, p)
		if !slices.Equal(got, bi.written[p]) {
			t.Fatalf("after %s, %s-%d holds %v, want %v", after, bi.topic, p, got, bi.written[p])
		}
	}
}

// hw is topic-p's high watermark on its leader.
func (bi *badInput) hw(t *testing.T, topic string, p int32) int64 {
	t.Helper()
	leader := partitionLeader(t, bi.c, topic, p)
	sp := listOffset(t, nodeBroker(t, bi.c, leader), topic, p, -1, -1)
	if sp.ErrorCode != 0 {
		t.Fatalf("list offsets %s-%d: %v", topic, p, kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.Offset
}

// rawConn dials node 1's Kafka port directly.
func rawConn(t *testing.T, c *chaos.Cluster) net.Conn {
	t.Helper()
	n, _ := c.Node(1)
	conn, err := c.DialContext(context.Background(), "tcp", n.KafkaAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// expectClosed reads from conn until the server closes it, allowing any
// complete response frames before that, and fails if it stays open.
func expectClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var buf [4096]byte
	for {
		_, err := conn.Read(buf[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: the server kept the connection open", what)
		}
		return // EOF or reset: closed
	}
}

func testGarbage(t *testing.T, bi *badInput) {
	// Not Kafka at all: an HTTP request's first four bytes read as a
	// ~1.1 GB frame size.
	conn := rawConn(t, bi.c)
	_, _ = conn.Write([]byte("GET / HTTP/1.1\r\nHost: raftq\r\n\r\n"))
	expectClosed(t, conn, "HTTP request")

	// A well-sized frame whose header lies: ApiVersions v3 with a client
	// id longer than the frame.
	conn = rawConn(t, bi.c)
	frame := binary.BigEndian.AppendUint32(nil, 10)
	frame = binary.BigEndian.AppendUint16(frame, 18)
	frame = binary.BigEndian.AppendUint16(frame, 3)
	frame = binary.BigEndian.AppendUint32(frame, 7)
	frame = binary.BigEndian.AppendUint16(frame, 0x7fff)
	_, _ = conn.Write(frame)
	expectClosed(t, conn, "lying header")

	// An API key no Kafka has.
	conn = rawConn(t, bi.c)
	frame = binary.BigEndian.AppendUint32(nil, 10)
	frame = binary.BigEndian.AppendUint16(frame, 9999)
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 8)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client id
	_, _ = conn.Write(frame)
	expectClosed(t, conn, "unknown API key")

	// Random frames of random bytes from a fixed seed: each is answered or
	// its connection closed; none may stop the node.
	rng := rand.New(rand.NewPCG(4, 4))
	for range 50 {
		conn := rawConn(t, bi.c)
		body := make([]byte, 8+rng.IntN(200))
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint16(body[0:], uint16(rng.IntN(80))) // mostly real keys
		binary.BigEndian.PutUint16(body[2:], uint16(rng.IntN(16)))
		_, _ = conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
		_ = conn.(interface{ CloseWrite() error }).CloseWrite()
		expectClosed(t, conn, "random frame")
	}
}

func testOversizedFrame(t *testing.T, bi *badInput) {
	for _, size := range []uint32{100<<20 + 1, 0x7fffffff, 0xffffffff /* negative */, 3 /* below a header */} {
		conn := rawConn(t, bi.c)
		_, _ = conn.Write(binary.BigEndian.AppendUint32(nil, size))
		_, _ = conn.Write(make([]byte, 64<<10)) // the server must not wait for, or buffer, the rest
		expectClosed(t, conn, "frame size "+strconv.FormatUint(uint64(size), 10))
	}
	// A frame cut short: the size promises more than ever arrives.
	conn := rawConn(t, bi.c)
	_, _ = conn.Write(binary.BigEndian.AppendUint32(nil, 1000))
	_, _ = conn.Write(make([]byte, 10))
	_ = conn.(interface{ CloseWrite() error }).CloseWrite()
	expectClosed(t, conn, "truncated frame")
}

func testUnknownTopic(t *testing.T, bi *badInput) {
	b := nodeBroker(t, bi.c, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"no-such-topic", 0}, {bi.topic, 99}, {bi.topic, -1}} {
		if code := produceCode(t, b, tp.topic, tp.p, validBatch("x")); code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("produce to %s-%d: %v, want UNKNOWN_TOPIC_OR_PARTITION", tp.topic, tp.p, kerr.ErrorForCode(code))
		}
		if sp := fetchPartition(t, b, tp.topic, tp.p, 0, -1); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("fetch %s-%d: %v, want UNKNOWN_TOPIC_OR_PARTITION", tp.topic, tp.p, kerr.ErrorForCode(sp.ErrorCode))
		}
		if sp := listOffset(t, b, tp.topic, tp.p, -1, -1); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("list offsets %s-%d: %v, want UNKNOWN_TOPIC_OR_PARTITION", tp.topic, tp.p, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	// Metadata does not create it: auto-creation is off by default.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("no-such-topic")
	req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), true
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if mt := resp.(*kmsg.MetadataResponse).Topics; len(mt) != 1 || mt[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("metadata for an unknown topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", mt)
	}
	// Fetch by a topic id nobody has (Fetch v13+ names topics by id).
	b = nodeBroker(t, bi.c, 1, kmsg.Fetch.Int16(), 16)
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxWaitMillis, freq.MinBytes, freq.MaxBytes = 0, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = [16]byte{1, 2, 3}
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := b.Request(ctx, freq)
	if err != nil {
		t.Fatal(err)
	}
	if got := fresp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownTopicID.Code {
		t.Errorf("fetch by an unknown topic id: %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(got))
	}
}

func testBadBatch(t *testing.T, bi *badInput) {
	leader := partitionLeader(t, bi.c, bi.topic, 0)
	b := nodeBroker(t, bi.c, leader)
	before := bi.hw(t, bi.topic, 0)
	cases := []struct {
		name  string
		batch []byte
		want  *kerr.Error
	}{
		{"bad CRC", flipValueByte(validBatch("a", "b")), kerr.CorruptMessage},
		{"record count above lastOffsetDelta", withHeader(validBatch("a", "b"), func(rb *kmsg.RecordBatch) { rb.NumRecords = 3 }), kerr.InvalidRecord},
		{"record count above the records", withHeader(validBatch("a", "b"), func(rb *kmsg.RecordBatch) { rb.NumRecords, rb.LastOffsetDelta = 3, 2 }), kerr.CorruptMessage},
		{"record count below the records", withHeader(validBatch("a", "b"), func(rb *kmsg.RecordBatch) { rb.NumRecords, rb.LastOffsetDelta = 1, 0 }), kerr.CorruptMessage},
		{"zero records", withHeader(validBatch("a"), func(rb *kmsg.RecordBatch) { rb.NumRecords, rb.LastOffsetDelta, rb.Records = 0, -1, nil }), kerr.InvalidRecord},
		{"magic 1", messageSetV1("a"), kerr.InvalidRecord},
		{"magic 2 header, magic 3", withHeader(validBatch("a"), func(rb *kmsg.RecordBatch) { rb.Magic = 3 }), kerr.InvalidRecord},
		{"length past the end", validBatch("a")[:40], kerr.CorruptMessage},
		{"two batches", append(validBatch("a"), validBatch("b")...), kerr.InvalidRecord},
		{"control batch", withHeader(validBatch("a"), func(rb *kmsg.RecordBatch) { rb.Attributes |= 0x20 }), kerr.InvalidRecord},
		{"empty", []byte{}, kerr.CorruptMessage},
	}
	for _, tc := range cases {
		if got := produceCode(t, b, bi.topic, 0, tc.batch); got != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), tc.want)
		}
	}
	// A v1 message set sent at Produce v2, the last version that allowed
	// it, is refused too: raftq stores v2 batches only.
	b2 := nodeBroker(t, bi.c, leader, kmsg.Produce.Int16(), 2)
	if got := produceCode(t, b2, bi.topic, 0, messageSetV1("old")); got == 0 {
		t.Error("a magic 1 message set at Produce v2 was accepted")
	}
	if after := bi.hw(t, bi.topic, 0); after != before {
		t.Errorf("high watermark moved from %d to %d: a bad batch was appended", before, after)
	}
}

func testOutOfRangeOffset(t *testing.T, bi *badInput) {
	leader := partitionLeader(t, bi.c, bi.topic, 0)
	b := nodeBroker(t, bi.c, leader)
	hw := bi.hw(t, bi.topic, 0)
	for _, off := range []int64{hw + 1, hw + 1000, -5, 1 << 62} {
		sp := fetchPartition(t, b, bi.topic, 0, off, -1)
		if sp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Errorf("fetch at %d (high watermark %d): %v, want OFFSET_OUT_OF_RANGE", off, hw, kerr.ErrorForCode(sp.ErrorCode))
		}
		if sp.HighWatermark != hw || len(sp.RecordBatches) != 0 {
			t.Errorf("fetch at %d: high watermark %d and %d bytes, want %d and none", off, sp.HighWatermark, len(sp.RecordBatches), hw)
		}
	}
	// At the high watermark itself there is simply nothing yet.
	if sp := fetchPartition(t, b, bi.topic, 0, hw, -1); sp.ErrorCode != 0 {
		t.Errorf("fetch at the high watermark: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	// Timestamps in the future and odd sentinel values find nothing or
	// something sensible, never an error other than a Kafka code.
	for _, ts := range []int64{time.Now().Add(time.Hour).UnixMilli(), -4, -5, -100} {
		sp := listOffset(t, b, bi.topic, 0, ts, -1)
		if sp.ErrorCode != 0 && kerr.ErrorForCode(sp.ErrorCode) == kerr.UnknownServerError {
			t.Errorf("list offsets at timestamp %d: UNKNOWN_SERVER_ERROR", ts)
		}
	}
}

func testNonLeader(t *testing.T, bi *badInput) {
	leader := partitionLeader(t, bi.c, bi.topic, 0)
	follower := leader%3 + 1
	fb := nodeBroker(t, bi.c, follower)
	resp := produceResp(t, fb, bi.topic, 0, validBatch("to-a-follower"))
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("produce to follower %d: %v, want NOT_LEADER_OR_FOLLOWER", follower, kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp.CurrentLeader.LeaderID != int32(leader) {
		t.Errorf("produce to follower %d: leader hint %d, want %d", follower, sp.CurrentLeader.LeaderID, leader)
	}
	if lp := listOffset(t, fb, bi.topic, 0, -1, -1); lp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("list offsets on follower %d: %v, want NOT_LEADER_OR_FOLLOWER", follower, kerr.ErrorForCode(lp.ErrorCode))
	}
	// A follower serves reads up to its own high watermark.
	if fp := fetchPartition(t, fb, bi.topic, 0, 0, -1); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
		t.Errorf("fetch from follower %d: %v with %d bytes", follower, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
	// The single-replica topic: every other node hosts nothing of it.
	host := partitionLeader(t, bi.c, bi.solo, 0)
	other := host%3 + 1
	ob := nodeBroker(t, bi.c, other)
	resp = produceResp(t, ob, bi.solo, 0, validBatch("to-no-replica"))
	sp = resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != int32(host) {
		t.Errorf("produce to node %d without a replica: %v, leader hint %d; want NOT_LEADER_OR_FOLLOWER and %d",
			other, kerr.ErrorForCode(sp.ErrorCode), sp.CurrentLeader.LeaderID, host)
	}
	if fp := fetchPartition(t, ob, bi.solo, 0, 0, -1); fp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("fetch from node %d without a replica: %v, want NOT_LEADER_OR_FOLLOWER", other, kerr.ErrorForCode(fp.ErrorCode))
	}
	if got, _ := readPartition(t, bi.c, bi.solo, 0); len(got) != 0 {
		t.Errorf("refused produces reached %s: %v", bi.solo, got)
	}
}

func testStaleEpoch(t *testing.T, bi *badInput) {
	leader := partitionLeader(t, bi.c, bi.topic, 0)
	b := nodeBroker(t, bi.c, leader)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, epoch, err := metadataLeader(ctx, b, bi.topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if epoch == 0 && bi.isr {
		// Group 0 elects an ISR partition's first leader at epoch 0, as
		// Kafka does: a failover gives one with a stale epoch below it.
		leader = bumpLeaderEpoch(t, bi.c, bi.topic, 0, leader)
		b = nodeBroker(t, bi.c, leader)
		if _, epoch, err = metadataLeader(ctx, b, bi.topic, 0); err != nil {
			t.Fatal(err)
		}
	}
	if epoch < 1 {
		t.Fatalf("leader epoch %d: want a raft term of at least 1", epoch)
	}
	if sp := fetchPartition(t, b, bi.topic, 0, 0, epoch); sp.ErrorCode != 0 {
		t.Errorf("fetch with the current epoch %d: %v", epoch, kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := fetchPartition(t, b, bi.topic, 0, 0, epoch-1); sp.ErrorCode != kerr.FencedLeaderEpoch.Code || len(sp.RecordBatches) != 0 {
		t.Errorf("fetch with stale epoch %d (current %d): %v, want FENCED_LEADER_EPOCH and no records", epoch-1, epoch, kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := fetchPartition(t, b, bi.topic, 0, 0, epoch+1); sp.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("fetch with future epoch %d (current %d): %v, want UNKNOWN_LEADER_EPOCH", epoch+1, epoch, kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := listOffset(t, b, bi.topic, 0, -1, epoch-1); sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Errorf("list offsets with stale epoch: %v, want FENCED_LEADER_EPOCH", kerr.ErrorForCode(sp.ErrorCode))
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = bi.topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = epoch-1, epoch-1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode; got != kerr.FencedLeaderEpoch.Code {
		t.Errorf("offset for leader epoch with stale current epoch: %v, want FENCED_LEADER_EPOCH", kerr.ErrorForCode(got))
	}
}

// validBatch is an uncompressed, non-idempotent v2 batch of values with a
// correct length and CRC.
func validBatch(values ...string) []byte {
	var recs []byte
	for i, v := range values {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // null key
		body = binary.AppendVarint(body, int64(len(v)))
		body = append(body, v...)
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: recs,
	}
	return sealBatch(&rb)
}

// sealBatch encodes rb with its length and CRC-32C filled in.
func sealBatch(rb *kmsg.RecordBatch) []byte {
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// withHeader decodes a batch, lets edit change it and re-seals it, so that
// the CRC is right and only the edited rule is broken.
func withHeader(b []byte, edit func(*kmsg.RecordBatch)) []byte {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		panic(err)
	}
	edit(&rb)
	return sealBatch(&rb)
}

// flipValueByte changes the last byte of the batch, inside the last
// record, without fixing the CRC.
func flipValueByte(b []byte) []byte {
	b[len(b)-2] ^= 0xff
	return b
}

// messageSetV1 is a one-message magic-1 message set (Kafka 0.10).
func messageSetV1(value string) []byte {
	m := kmsg.MessageV1{Magic: 1, Timestamp: time.Now().UnixMilli(), Value: []byte(value)}
	b := m.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
	return b
}

func produceCode(t *testing.T, b *kgo.Broker, topic string, p int32, batch []byte) int16 {
	t.Helper()
	resp := produceResp(t, b, topic, p, batch)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response for one partition: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func produceResp(t *testing.T, b *kgo.Broker, topic string, p int32, batch []byte) *kmsg.ProduceResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.(*kmsg.ProduceResponse)
}

func fetchPartition(t *testing.T, b *kgo.Broker, topic string, p int32, offset int64, epoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = p, offset, epoch, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response for one partition: %+v", fr)
	}
	return fr.Topics[0].Partitions[0]
}

func listOffset(t *testing.T, b *kgo.Broker, topic string, p int32, ts int64, epoch int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}
