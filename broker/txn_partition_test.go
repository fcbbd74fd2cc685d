package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/partition"
)

// These drive the partition side of transactions with raw requests, as
// the transaction coordinator and a transactional producer send them:
// transactional Produce, WriteTxnMarkers, read_committed Fetch and
// ListOffsets, DescribeProducers, on raft and ISR topics alike.

// txnBatch is testBatch with the transactional attribute.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	rb := kmsg.RecordBatch{Magic: 2, Attributes: 0x10, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		LastOffsetDelta: int32(len(values) - 1), NumRecords: int32(len(values))}
	var recs []byte
	for i, v := range values {
		recs = appendRecord(recs, kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	rb.Records = recs
	return encodeBatch(rb)
}

// txnProduce sends batch to partition 0 of topic with acks=all and the
// given transactional id (nil: none).
func txnProduce(t testing.TB, addr, topic string, txnID *string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := produceRequest(topic, 0, -1, batch)
	req.SetVersion(9)
	req.TransactionID = txnID
	return rawKafka(t, addr, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// writeMarker sends one WriteTxnMarkers v1 request for partition 0 of
// topic and returns the partition's code.
func writeMarker(t testing.TB, addr, topic string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := markersRequest(pid, epoch, commit, map[string][]int32{topic: {0}})
	resp := rawKafka(t, addr, req).(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		t.Fatalf("WriteTxnMarkers answered %+v", resp)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

func markersRequest(pid int64, epoch int16, commit bool, parts map[string][]int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, 3
	for _, topic := range slices.Sorted(func(yield func(string) bool) {
		for k := range parts {
			if !yield(k) {
				return
			}
		}
	}) {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, parts[topic]
		m.Topics = append(m.Topics, mt)
	}
	req.Markers = append(req.Markers, m)
	return req
}

// fetchTxn fetches partition 0 of topic at offset (Fetch v11, which
// names topics and carries the isolation level).
func fetchTxn(t testing.TB, addr, topic string, offset int64, isolation int8, maxWait time.Duration) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, int32(maxWait.Milliseconds()), 1, 1<<20
	req.IsolationLevel, req.SessionEpoch = isolation, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := rawKafka(t, addr, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch %s at %d: %v", topic, offset, kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp
}

// fetchedValues decodes the data records of a fetch (control batches
// skipped), uncompressing them as a client does.
func fetchedValues(t testing.TB, sp kmsg.FetchResponseTopicPartition) []string {
	t.Helper()
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{IsolationLevel: kgo.ReadUncommitted()}, &sp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("decode fetch: %v", fp.Err)
	}
	var out []string
	for _, r := range fp.Records {
		out = append(out, string(r.Value))
	}
	return out
}

// listLatest answers ListOffsets latest for partition 0 at an isolation
// level.
func listLatest(t testing.TB, addr, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := rawKafka(t, addr, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("list offsets %s: %v", topic, kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.Offset
}

// initPID gets a producer id from InitProducerId without a
// transactional id: the wire tests need only some id.
func initPID(t testing.TB, c *testCluster) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	resp := rawRequest(t, c, 1, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// dataLeader returns the node whose replica of partition 0 leads, in
// either replication mode.
func dataLeader(t testing.TB, c *testCluster, topic string) uint64 {
	t.Helper()
	var leader uint64
	eventually(t, "a leader of "+topic, func() bool {
		for id, n := range c.nodes {
			if r := n.replicaFor(topic, 0); r != nil && r.data != nil && r.data.repl.Leadership().IsLeader {
				leader = id
				return true
			}
		}
		return false
	})
	return leader
}

// consumeCommitted consumes partition 0 of topic from the start with
// read_committed until it sees the value last, and returns what it saw
// before.
func consumeCommitted(t testing.TB, c *testCluster, topic, last string) []string {
	t.Helper()
	cl := c.client(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := testCtx(t)
	var out []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read_committed %s: saw %q, never %q", topic, out, last)
		}
		for _, r := range fs.Records() {
			if string(r.Value) == last {
				return out
			}
			out = append(out, string(r.Value))
		}
	}
}

func TestTxn_PartitionSide(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	// Raw transactional batches with no coordinator behind them: the
	// partition side alone, without KIP-890's verification.
	for _, n := range c.nodes {
		n.txnVerify = nil
	}
	cl := c.client()
	// compression.type makes the broker recompress data batches; a
	// marker must reach the log as it is (a compressed one is refused).
	zstd := "zstd"
	res, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 3, map[string]*string{"compression.type": &zstd}, "txr")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	mode, minISR := coordinator.ModeISR, "2"
	res, err = kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 3, map[string]*string{"compression.type": &zstd,
		"replication.mode": &mode, "min.insync.replicas": &minISR}, "txi")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"txr", "txi"} {
		t.Run(topic, func(t *testing.T) { testTxnPartition(t, c, topic) })
	}
}

func testTxnPartition(t *testing.T, c *testCluster, topic string) {
	leader := dataLeader(t, c, topic)
	addr := c.cfgs[leader].KafkaAddr
	follower := leader%3 + 1
	pid, epoch := initPID(t, c)
	tid := kmsg.StringPtr("tx-" + topic)

	// An open transaction holds the LSO at its first offset.
	if sp := txnProduce(t, addr, topic, tid, txnBatch(t, pid, epoch, 0, "a", "b")); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("transactional produce: %v at %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
	rc := fetchTxn(t, addr, topic, 0, 1, 0)
	if rc.HighWatermark != 2 || rc.LastStableOffset != 0 || len(rc.RecordBatches) != 0 {
		t.Errorf("read_committed in an open transaction: hw %d lso %d, %d bytes; want hw 2 lso 0, nothing", rc.HighWatermark, rc.LastStableOffset, len(rc.RecordBatches))
	}
	ru := fetchTxn(t, addr, topic, 0, 0, 0)
	if got := fetchedValues(t, ru); !slices.Equal(got, []string{"a", "b"}) || ru.LastStableOffset != 0 {
		t.Errorf("read_uncommitted in an open transaction: %q, lso %d; want [a b], lso 0", got, ru.LastStableOffset)
	}
	if got, want := listLatest(t, addr, topic, 1), int64(0); got != want {
		t.Errorf("ListOffsets READ_COMMITTED latest %d, want the LSO %d", got, want)
	}
	if got, want := listLatest(t, addr, topic, 0), int64(2); got != want {
		t.Errorf("ListOffsets READ_UNCOMMITTED latest %d, want the high watermark %d", got, want)
	}
	checkDescribeProducers(t, addr, topic, pid, epoch, 0)
	if code := describeProducersCode(t, c.cfgs[follower].KafkaAddr, topic); code != kerr.NotLeaderForPartition.Code {
		t.Errorf("describe producers on a follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}

	// Markers go to the leader only; an older epoch is fenced.
	if code := writeMarker(t, c.cfgs[follower].KafkaAddr, topic, pid, epoch, true); code != kerr.NotLeaderForPartition.Code {
		t.Errorf("marker to a follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}

	// A read_committed long-poll wakes when the commit moves the LSO.
	polled := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { polled <- fetchTxn(t, addr, topic, 0, 1, 20*time.Second) }()
	time.Sleep(100 * time.Millisecond) // let the poll start waiting (it passes either way)
	if code := writeMarker(t, addr, topic, pid, epoch, true); code != 0 {
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(code))
	}
	if sp := <-polled; !slices.Equal(fetchedValues(t, sp), []string{"a", "b"}) {
		t.Errorf("read_committed long-poll across the commit: %q, want [a b]", fetchedValues(t, sp))
	}
	if code := writeMarker(t, addr, topic, pid, epoch, true); code != 0 {
		t.Errorf("commit marker again: %v, want NONE", kerr.ErrorForCode(code))
	}
	if got, want := listLatest(t, addr, topic, 1), int64(4); got != want {
		t.Errorf("ListOffsets READ_COMMITTED latest %d after the commit, want %d", got, want)
	}

	// An aborted transaction: read_committed gets it in the fetch's
	// aborted list, and its consumer skips it.
	if sp := txnProduce(t, addr, topic, tid, txnBatch(t, pid, epoch, 2, "x")); sp.ErrorCode != 0 || sp.BaseOffset != 4 {
		t.Fatalf("second transaction: %v at %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
	if code := writeMarker(t, addr, topic, pid, epoch, false); code != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(code))
	}
	rc = fetchTxn(t, addr, topic, 0, 1, 0)
	want := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: pid, FirstOffset: 4}}
	if len(rc.AbortedTransactions) != 1 || rc.AbortedTransactions[0].ProducerID != pid || rc.AbortedTransactions[0].FirstOffset != 4 {
		t.Errorf("aborted transactions %+v, want %+v", rc.AbortedTransactions, want)
	}
	if rc.LastStableOffset != 6 {
		t.Errorf("LSO %d after the abort, want 6", rc.LastStableOffset)
	}
	if ru := fetchTxn(t, addr, topic, 0, 0, 0); len(ru.AbortedTransactions) != 0 {
		t.Errorf("read_uncommitted got aborted transactions %+v", ru.AbortedTransactions)
	}
	if sp := txnProduce(t, addr, topic, nil, testBatch(t, -1, 0, 0, "end")); sp.ErrorCode != 0 {
		t.Fatalf("plain produce: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if got := consumeCommitted(t, c, topic, "end"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("read_committed consumer saw %q, want [a b]", got)
	}

	// A marker of an epoch older than the producer's is fenced.
	if sp := txnProduce(t, addr, topic, tid, txnBatch(t, pid, epoch+1, 0, "y")); sp.ErrorCode != 0 {
		t.Fatalf("produce at a new epoch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if code := writeMarker(t, addr, topic, pid, epoch, false); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("marker of an older epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, addr, topic, pid, epoch+1, false); code != 0 {
		t.Errorf("abort at the new epoch: %v", kerr.ErrorForCode(code))
	}
}

func describeProducersCode(t testing.TB, addr, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	return rawKafka(t, addr, req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
}

// checkDescribeProducers asks the leader about partition 0 and wants pid
// with an open transaction from first.
func checkDescribeProducers(t testing.TB, addr, topic string, pid int64, epoch int16, first int64) {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := rawKafka(t, addr, req).(*kmsg.DescribeProducersResponse)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("describe producers: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	for _, p := range sp.ActiveProducers {
		if p.ProducerID == pid {
			if p.ProducerEpoch != int32(epoch) || p.CurrentTxnStartOffset != first || p.LastSequence < 0 {
				t.Errorf("describe producers: %+v, want epoch %d, txn from %d", p, epoch, first)
			}
			return
		}
	}
	t.Errorf("describe producers: %+v lacks producer %d", sp.ActiveProducers, pid)
}

// The produce side's refusals: transactional records without a
// transactional id, a client's control batch, and a KIP-890
// verification that says no (then yes once, kept until a marker).
func TestTxn_ProduceRefusals(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	createTopic(t, c.client(), "txp", 1, 1)
	addr := c.cfgs[1].KafkaAddr
	pid, epoch := initPID(t, c)
	tid := kmsg.StringPtr("tx-p")

	if sp := txnProduce(t, addr, "txp", nil, txnBatch(t, pid, epoch, 0, "a")); sp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("transactional batch without a transactional id: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(sp.ErrorCode))
	}
	marker := partition.ControlBatch(pid, epoch, true, 0, time.Now().UnixMilli())
	if sp := txnProduce(t, addr, "txp", tid, marker); sp.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("client control batch: %v, want INVALID_RECORD", kerr.ErrorForCode(sp.ErrorCode))
	}

	var mu sync.Mutex
	var calls []string
	answer := kerr.InvalidTxnState.Code
	c.nodes[1].txnVerify = func(_ context.Context, id string, p int64, e int16, topic string, part int32) int16 {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("%s %d/%d %s-%d", id, p, e, topic, part))
		return answer
	}
	if sp := txnProduce(t, addr, "txp", tid, txnBatch(t, pid, epoch, 0, "a")); sp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("unverified batch: %v, want the hook's INVALID_TXN_STATE", kerr.ErrorForCode(sp.ErrorCode))
	}
	mu.Lock()
	answer = 0
	mu.Unlock()
	for seq := int32(0); seq < 2; seq++ {
		if sp := txnProduce(t, addr, "txp", tid, txnBatch(t, pid, epoch, seq, "b")); sp.ErrorCode != 0 {
			t.Fatalf("verified batch %d: %v", seq, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	if code := writeMarker(t, addr, "txp", pid, epoch, true); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if sp := txnProduce(t, addr, "txp", tid, txnBatch(t, pid, epoch, 2, "c")); sp.ErrorCode != 0 {
		t.Fatalf("next transaction: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	one := fmt.Sprintf("tx-p %d/%d txp-0", pid, epoch)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{one, one, one}; !slices.Equal(calls, want) {
		t.Errorf("verifications %q, want %q: one refused, one per transaction after", calls, want)
	}
	if hw := logOf(c.nodes[1].replicaFor("txp", 0)).HighWatermark(); hw != 4 {
		t.Errorf("high watermark %d, want 4: refused batches reached the log", hw)
	}
}
