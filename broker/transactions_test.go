package broker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// markerSink is a test-only WriteTxnMarkers server (the partition side
// serves the real one): it records every marker the transaction
// coordinators send it and answers each partition NONE while accept is
// set, NOT_LEADER_OR_FOLLOWER otherwise.
type markerSink struct {
	srv    *kafka.Server
	accept atomic.Bool

	mu      sync.Mutex
	markers []kmsg.WriteTxnMarkersRequestMarker // every marker received
	written []kmsg.WriteTxnMarkersRequestMarker // those answered NONE
}

func newMarkerSink(t *testing.T) *markerSink {
	t.Helper()
	s := &markerSink{}
	s.accept.Store(true)
	m := kafka.NewMux()
	m.Handle(kafka.APIRange{Key: kmsg.WriteTxnMarkers.Int16(), MaxVersion: 1}, s.serve)
	apis := append(m.APIs(), kafka.APIRange{Key: kmsg.ApiVersions.Int16(), MaxVersion: 3})
	m.Handle(kafka.APIRange{Key: kmsg.ApiVersions.Int16(), MaxVersion: 3}, func(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
		resp := req.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = kafka.APIKeys(apis)
		return kafka.Ready(resp)
	})
	cfg := kafka.DefaultConfig()
	cfg.Addr = freeAddr(t)
	srv, err := kafka.Start(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	s.srv = srv
	return s
}

func (s *markerSink) serve(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	code := kerr.NotLeaderForPartition.Code
	accept := s.accept.Load()
	if accept {
		code = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range r.Markers {
		s.markers = append(s.markers, m)
		if accept {
			s.written = append(s.written, m)
		}
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			for _, p := range mt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return kafka.Ready(resp)
}

// writtenFor returns the markers of producerID answered NONE.
func (s *markerSink) writtenFor(producerID int64) []kmsg.WriteTxnMarkersRequestMarker {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []kmsg.WriteTxnMarkersRequestMarker
	for _, m := range s.written {
		if m.ProducerID == producerID {
			out = append(out, m)
		}
	}
	return out
}

func (s *markerSink) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.markers)
}

// markerPartitions flattens a marker's partitions as "topic-p" strings.
func markerPartitions(m kmsg.WriteTxnMarkersRequestMarker) []string {
	var out []string
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			out = append(out, partName(t.Topic, p))
		}
	}
	slices.Sort(out)
	return out
}

func partName(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

// txnCluster is a cluster of n nodes whose transaction coordinators send
// their markers to sink.
func txnCluster(t *testing.T, n int, sink *markerSink, mod func(*Config)) *testCluster {
	t.Helper()
	addr := sink.srv.Addr().String()
	return txnClusterRouted(t, n, func(uint64) string { return addr }, mod)
}

// txnClusterRouted is a cluster of n nodes whose transaction
// coordinators send the markers for the partitions broker b leads to
// route(b).
func txnClusterRouted(t *testing.T, n int, route func(broker uint64) string, mod func(*Config)) *testCluster {
	t.Helper()
	return newTestCluster(t, n, func(cfg *Config) {
		cfg.TransactionPartitions = 3
		cfg.txnMarkerAddr = route
		if mod != nil {
			mod(cfg)
		}
	})
}

// txnCoordinatorNode waits until some node coordinates id, as
// FindCoordinator (asked of node ask) names it, and returns it.
func txnCoordinatorNode(t *testing.T, c *testCluster, ask uint64, id string) uint64 {
	t.Helper()
	var coord uint64
	eventually(t, "a transaction coordinator for "+id, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(6)
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
		co := rawKafka(t, c.cfgs[ask].KafkaAddr, req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
		if co.ErrorCode != 0 {
			return false
		}
		coord = uint64(co.NodeID)
		n := c.nodes[coord]
		if n == nil {
			return false
		}
		_, code := n.txnCoordinator(id)
		return code == 0
	})
	return coord
}

// txnClient speaks the transactional protocol to one node at a time.
type txnClient struct {
	t    *testing.T
	addr string
	id   string
	pid  int64
	ep   int16
}

func (x *txnClient) initProducer(timeoutMs int32) int16 {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(5)
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(x.id), timeoutMs
	resp := rawKafka(x.t, x.addr, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode == 0 {
		x.pid, x.ep = resp.ProducerID, resp.ProducerEpoch
	}
	return resp.ErrorCode
}

// initUntilDone retries InitProducerId while the coordinator aborts or
// completes an earlier transaction.
func (x *txnClient) initUntilDone(timeoutMs int32) {
	x.t.Helper()
	var code int16
	eventually(x.t, "init producer id", func() bool {
		code = x.initProducer(timeoutMs)
		return code != kerr.ConcurrentTransactions.Code && code != kerr.CoordinatorLoadInProgress.Code
	})
	if code != 0 {
		x.t.Fatalf("init producer id: %v", kerr.ErrorForCode(code))
	}
}

func (x *txnClient) addPartitions(version int16, topic string, parts ...int32) []int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(version)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = x.id, x.pid, x.ep
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{rt}
	resp := rawKafka(x.t, x.addr, req).(*kmsg.AddPartitionsToTxnResponse)
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

func (x *txnClient) addOffsets(version int16, group string) int16 {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.SetVersion(version)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = x.id, x.pid, x.ep, group
	return rawKafka(x.t, x.addr, req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

func (x *txnClient) endTxn(version int16, commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(version)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.id, x.pid, x.ep, commit
	return rawKafka(x.t, x.addr, req).(*kmsg.EndTxnResponse).ErrorCode
}

func (x *txnClient) describe() kmsg.DescribeTransactionsResponseTransactionState {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{x.id}
	return rawKafka(x.t, x.addr, req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

func (x *txnClient) waitState(state string) kmsg.DescribeTransactionsResponseTransactionState {
	x.t.Helper()
	var d kmsg.DescribeTransactionsResponseTransactionState
	eventually(x.t, x.id+" in state "+state, func() bool {
		d = x.describe()
		return d.ErrorCode == 0 && d.State == state
	})
	return d
}

func wantCodes(t *testing.T, what string, got []int16, want ...int16) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: codes %v, want %v", what, got, want)
	}
}

func TestTxnCoord_FindCoordinator(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run(fmt.Sprintf("%dnodes", size), func(t *testing.T) {
			c := txnCluster(t, size, newMarkerSink(t), nil)
			coord := txnCoordinatorNode(t, c, 1, "tx-find")
			idx := txns.PartitionFor("tx-find", 3)
			r := c.nodes[coord].replicaFor(txns.TransactionTopic, idx)
			if r == nil || !r.txns.group.Leadership().IsLeader {
				t.Fatalf("node %d does not lead %s-%d", coord, txns.TransactionTopic, idx)
			}
			for ask := range c.nodes {
				for v := int16(1); v <= 6; v++ { // v0 has no key type: groups only
					req := kmsg.NewPtrFindCoordinatorRequest()
					req.SetVersion(v)
					req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 1, "tx-find", []string{"tx-find"}
					resp := rawKafka(t, c.cfgs[ask].KafkaAddr, req).(*kmsg.FindCoordinatorResponse)
					code, node := resp.ErrorCode, resp.NodeID
					if v >= 4 {
						code, node = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
					}
					if code != 0 || uint64(node) != coord {
						t.Errorf("node %d v%d: %v node %d, want node %d", ask, v, kerr.ErrorForCode(code), node, coord)
					}
				}
			}
			if tp := c.nodes[1].meta.View().Topics[txns.TransactionTopic]; !tp.Internal || tp.IsISR() || len(tp.Partitions) != 3 || tp.ReplicationFactor() != size {
				t.Errorf("%s: internal %v isr %v, %d partitions, rf %d", txns.TransactionTopic, tp.Internal, tp.IsISR(), len(tp.Partitions), tp.ReplicationFactor())
			}
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(4)
			req.CoordinatorType, req.CoordinatorKeys = 1, []string{""}
			if co := rawKafka(t, c.cfgs[1].KafkaAddr, req).(*kmsg.FindCoordinatorResponse).Coordinators[0]; co.ErrorCode != kerr.InvalidRequest.Code {
				t.Errorf("empty transactional id: %v, want INVALID_REQUEST", kerr.ErrorForCode(co.ErrorCode))
			}
		})
	}
}

// TestTxnCoord_FranzGo runs a franz-go transactional producer through a
// transaction. Its records' produce may be refused (transactional batches
// are the partition side's): the transaction then aborts. Either way
// EndTransaction returns once the coordinator has the outcome, and the
// markers reach the leader of the partition.
func TestTxnCoord_FranzGo(t *testing.T) {
	sink := newMarkerSink(t)
	c := txnCluster(t, 1, sink, nil)
	createTopic(t, c.client(), "txf", 2, 1)
	cl := c.client(kgo.TransactionalID("tx-franz"), kgo.TransactionTimeout(10*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2))
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin transaction: %v", err)
	}
	perr := cl.ProduceSync(ctx, &kgo.Record{Topic: "txf", Partition: 1, Value: []byte("v")}).FirstErr()
	commit := kgo.TryCommit
	if perr != nil {
		t.Logf("transactional produce: %v (aborting)", perr)
		commit = kgo.TryAbort
	}
	if err := cl.EndTransaction(ctx, commit); err != nil {
		t.Fatalf("end transaction: %v", err)
	}
	coord := txnCoordinatorNode(t, c, 1, "tx-franz")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-franz"}
	want := "CompleteCommit"
	if commit == kgo.TryAbort {
		want = "CompleteAbort"
	}
	d := x.waitState(want)
	ms := sink.writtenFor(d.ProducerID)
	if len(ms) != 1 || ms[0].Committed != (commit == kgo.TryCommit) || ms[0].ProducerEpoch != d.ProducerEpoch ||
		!slices.Equal(markerPartitions(ms[0]), []string{"txf-1"}) || ms[0].CoordinatorEpoch < 1 {
		t.Fatalf("markers written %+v, want one %s marker for txf-1 at epoch %d", ms, want, d.ProducerEpoch)
	}
}

// TestTxnCoord_CommitWritesMarkers commits a transaction over the raw
// protocol: EndTxn answers once PrepareCommit is replicated, and the
// transaction completes only once every leader took its marker, one
// request per leader.
func TestTxnCoord_CommitWritesMarkers(t *testing.T) {
	sink := newMarkerSink(t)
	c := txnCluster(t, 1, sink, nil)
	createTopic(t, c.client(), "txc", 3, 1)
	coord := txnCoordinatorNode(t, c, 1, "tx-commit")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-commit"}
	x.initUntilDone(60000)
	if x.ep != 0 {
		t.Fatalf("first epoch %d, want 0", x.ep)
	}
	wantCodes(t, "add partitions v3", x.addPartitions(3, "txc", 0, 2), 0, 0)
	wantCodes(t, "add partitions v0", x.addPartitions(0, "txc", 1), 0)
	wantCodes(t, "unknown topic", x.addPartitions(3, "nope", 0), kerr.UnknownTopicOrPartition.Code)
	wantCodes(t, "unknown partition", x.addPartitions(3, "txc", 1, 9), kerr.OperationNotAttempted.Code, kerr.UnknownTopicOrPartition.Code)
	d := x.describe()
	if d.State != "Ongoing" || len(d.Topics) != 1 || !slices.Equal(d.Topics[0].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("described %s %+v, want Ongoing with txc 0,1,2", d.State, d.Topics)
	}
	// The group's offsets (none, and no __consumer_offsets topic) do not
	// hold the commit back.
	if code := x.addOffsets(3, "txc-group"); code != 0 {
		t.Fatalf("add offsets: %v", kerr.ErrorForCode(code))
	}
	if code := x.addOffsets(0, ""); code != kerr.InvalidRequest.Code {
		t.Errorf("add offsets without a group: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	sink.accept.Store(false)
	if code := x.endTxn(4, true); code != 0 {
		t.Fatalf("end txn: %v", kerr.ErrorForCode(code))
	}
	eventually(t, "a refused marker", func() bool { return sink.received() > 0 })
	if d := x.describe(); d.State != "PrepareCommit" {
		t.Fatalf("state %s with markers refused, want PrepareCommit", d.State)
	}
	if code := x.endTxn(4, true); code != kerr.ConcurrentTransactions.Code {
		t.Errorf("end txn retried while the markers are written: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(code))
	}
	sink.accept.Store(true)
	x.waitState("CompleteCommit")
	ms := sink.writtenFor(x.pid)
	if len(ms) != 1 || !ms[0].Committed || !slices.Equal(markerPartitions(ms[0]), []string{"txc-0", "txc-1", "txc-2"}) {
		t.Fatalf("markers written %+v, want one commit marker for txc 0-2", ms)
	}
	if code := x.endTxn(4, true); code != 0 {
		t.Errorf("end txn retried after completion: %v, want NONE", kerr.ErrorForCode(code))
	}
	if code := x.endTxn(4, false); code != kerr.InvalidTxnState.Code {
		t.Errorf("abort after the commit: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
}

// TestTxnCoord_MarkersGoToLeaders: each partition's marker goes to its
// leader, in one request per leader.
func TestTxnCoord_MarkersGoToLeaders(t *testing.T) {
	sinks := map[uint64]*markerSink{1: newMarkerSink(t), 2: newMarkerSink(t), 3: newMarkerSink(t)}
	c := txnClusterRouted(t, 3, func(b uint64) string {
		if s := sinks[b]; s != nil {
			return s.srv.Addr().String()
		}
		return ""
	}, nil)
	createTopic(t, c.client(), "txm", 6, 1)
	led := map[uint64][]string{}
	for p := int32(0); p < 6; p++ {
		l := leaderOfPartition(t, c, "txm", p)
		led[l] = append(led[l], partName("txm", p))
	}
	if len(led) < 2 {
		t.Fatalf("leaders %v: want partitions led by two nodes at least", led)
	}
	coord := txnCoordinatorNode(t, c, 1, "tx-route")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-route"}
	x.initUntilDone(60000)
	wantCodes(t, "add partitions", x.addPartitions(3, "txm", 0, 1, 2, 3, 4, 5), 0, 0, 0, 0, 0, 0)
	if code := x.endTxn(4, false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	x.waitState("CompleteAbort")
	for b, s := range sinks {
		ms := s.writtenFor(x.pid)
		if len(led[b]) == 0 {
			if len(ms) != 0 {
				t.Errorf("node %d leads nothing and got markers %+v", b, ms)
			}
			continue
		}
		if len(ms) != 1 || ms[0].Committed || !slices.Equal(markerPartitions(ms[0]), led[b]) {
			t.Errorf("node %d got markers %+v, want one abort for %v", b, ms, led[b])
		}
	}
}

// TestTxnCoord_Fencing: a second InitProducerId of the id bumps the epoch,
// aborting the first producer's open transaction, and the first producer
// is fenced: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH to versions before
// KIP-588.
func TestTxnCoord_Fencing(t *testing.T) {
	sink := newMarkerSink(t)
	c := txnCluster(t, 1, sink, nil)
	createTopic(t, c.client(), "txz", 1, 1)
	coord := txnCoordinatorNode(t, c, 1, "tx-fence")
	first := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-fence"}
	first.initUntilDone(60000)
	wantCodes(t, "add partitions", first.addPartitions(3, "txz", 0), 0)
	second := &txnClient{t: t, addr: first.addr, id: first.id}
	if code := second.initProducer(60000); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init while the first producer's transaction is open: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(code))
	}
	second.initUntilDone(60000)
	if second.pid != first.pid || second.ep <= first.ep {
		t.Fatalf("second producer %d/%d, want %d at an epoch above %d", second.pid, second.ep, first.pid, first.ep)
	}
	if ms := sink.writtenFor(first.pid); len(ms) != 1 || ms[0].Committed || ms[0].ProducerEpoch != first.ep+1 {
		t.Fatalf("markers %+v, want the fenced transaction's abort at epoch %d", ms, first.ep+1)
	}
	if code := first.endTxn(4, true); code != kerr.ProducerFenced.Code {
		t.Errorf("fenced EndTxn v4: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
	if code := first.endTxn(1, true); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("fenced EndTxn v1: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	wantCodes(t, "fenced AddPartitionsToTxn v1", first.addPartitions(1, "txz", 0), kerr.InvalidProducerEpoch.Code)
	// KIP-360: the fenced producer presenting its old epoch is fenced too.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = kmsg.StringPtr(first.id), 60000, first.pid, first.ep
	if resp := rawKafka(t, first.addr, req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("KIP-360 init at the fenced epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(resp.ErrorCode))
	}
	wantCodes(t, "second producer adds", second.addPartitions(3, "txz", 0), 0)
	if code := second.endTxn(4, false); code != 0 {
		t.Fatalf("second producer's abort: %v", kerr.ErrorForCode(code))
	}
	second.waitState("CompleteAbort")
}

// TestTxnCoord_FranzGoFenced: a franz-go producer fenced by a second one
// with the same id fails its EndTransaction with PRODUCER_FENCED.
func TestTxnCoord_FranzGoFenced(t *testing.T) {
	c := txnCluster(t, 1, newMarkerSink(t), nil)
	createTopic(t, c.client(), "txg", 1, 1)
	coord := txnCoordinatorNode(t, c, 1, "tx-zombie")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-zombie"}
	zombie := c.client(kgo.TransactionalID("tx-zombie"), kgo.TransactionTimeout(10*time.Second))
	ctx := testCtx(t)
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// The zombie's producer id comes with its first produce.
	_ = zombie.ProduceSync(ctx, &kgo.Record{Topic: "txg", Value: []byte("z")}).FirstErr()
	x.initUntilDone(10000) // the successor
	err := zombie.EndTransaction(ctx, kgo.TryAbort)
	if !isKerr(err, kerr.ProducerFenced, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie's EndTransaction: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
}

func isKerr(err error, want ...*kerr.Error) bool {
	return slices.ContainsFunc(want, func(w *kerr.Error) bool { return errors.Is(err, w) })
}

// TestTxnCoord_Timeout: a transaction left open past its timeout is
// aborted by the coordinator's Tick, with the producer fenced.
func TestTxnCoord_Timeout(t *testing.T) {
	sink := newMarkerSink(t)
	c := txnCluster(t, 1, sink, nil)
	createTopic(t, c.client(), "txt", 1, 1)
	coord := txnCoordinatorNode(t, c, 1, "tx-timeout")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-timeout"}
	x.initUntilDone(300)
	wantCodes(t, "add partitions", x.addPartitions(3, "txt", 0), 0)
	d := x.waitState("CompleteAbort")
	if d.ProducerEpoch != x.ep+1 {
		t.Errorf("epoch after the timeout %d, want %d", d.ProducerEpoch, x.ep+1)
	}
	if ms := sink.writtenFor(x.pid); len(ms) != 1 || ms[0].Committed || ms[0].ProducerEpoch != x.ep+1 {
		t.Fatalf("markers %+v, want one abort at epoch %d", ms, x.ep+1)
	}
	if code := x.endTxn(4, true); code != kerr.ProducerFenced.Code {
		t.Errorf("commit after the timeout: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
	if code := x.initProducer(int32((16 * time.Minute).Milliseconds())); code != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("timeout above transaction.max.timeout.ms: %v, want INVALID_TRANSACTION_TIMEOUT", kerr.ErrorForCode(code))
	}
}

// TestTxnCoord_Failover: the coordinator dies after PrepareCommit with
// its markers unwritten; the next leader of its transaction partition
// writes them, with the transaction's number as their coordinator epoch
// as before (partitions take each number's marker once), and completes
// the commit.
func TestTxnCoord_Failover(t *testing.T) {
	sink := newMarkerSink(t)
	c := txnCluster(t, 3, sink, nil)
	createTopic(t, c.client(), "txo", 2, 3)
	coord := txnCoordinatorNode(t, c, 1, "tx-failover")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-failover"}
	x.initUntilDone(60000)
	wantCodes(t, "add partitions", x.addPartitions(3, "txo", 0, 1), 0, 0)
	sink.accept.Store(false)
	if code := x.endTxn(4, true); code != 0 {
		t.Fatalf("end txn: %v", kerr.ErrorForCode(code))
	}
	eventually(t, "a refused marker", func() bool { return sink.received() > 0 })
	sink.mu.Lock()
	oldEpoch := sink.markers[0].CoordinatorEpoch
	sink.mu.Unlock()
	c.stop(coord)
	sink.accept.Store(true)
	ask := uint64(1)
	if ask == coord {
		ask = 2
	}
	next := txnCoordinatorNode(t, c, ask, "tx-failover")
	if next == coord {
		t.Fatalf("node %d still coordinates after it stopped", next)
	}
	y := &txnClient{t: t, addr: c.cfgs[next].KafkaAddr, id: x.id}
	y.waitState("CompleteCommit")
	ms := sink.writtenFor(x.pid)
	if len(ms) == 0 {
		t.Fatal("no marker written after the failover")
	}
	got := map[string]bool{}
	for _, m := range ms {
		if !m.Committed || m.CoordinatorEpoch != oldEpoch || partition.MarkerSeq(m.CoordinatorEpoch) != 1 {
			t.Errorf("marker %+v: want a commit of transaction number 1, as before the failover (%d)", m, oldEpoch)
		}
		for _, p := range markerPartitions(m) {
			got[p] = true
		}
	}
	if !got["txo-0"] || !got["txo-1"] {
		t.Errorf("markers written for %v, want txo-0 and txo-1", got)
	}
}

// TestTxnCoord_Restart: a node's transaction state is its raft log's, so
// an open transaction survives a restart and is then committed.
func TestTxnCoord_Restart(t *testing.T) {
	sink := newMarkerSink(t)
	c := txnCluster(t, 1, sink, nil)
	createTopic(t, c.client(), "txr", 1, 1)
	coord := txnCoordinatorNode(t, c, 1, "tx-restart")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-restart"}
	x.initUntilDone(60000)
	wantCodes(t, "add partitions", x.addPartitions(3, "txr", 0), 0)
	c.stop(1)
	c.start(1)
	txnCoordinatorNode(t, c, 1, "tx-restart")
	d := x.describe()
	if d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != x.pid || d.ProducerEpoch != x.ep || len(d.Topics) != 1 {
		t.Fatalf("after the restart: %v %s %d/%d %+v, want Ongoing at %d/%d with txr-0", kerr.ErrorForCode(d.ErrorCode), d.State,
			d.ProducerID, d.ProducerEpoch, d.Topics, x.pid, x.ep)
	}
	if code := x.endTxn(4, true); code != 0 {
		t.Fatalf("commit after the restart: %v", kerr.ErrorForCode(code))
	}
	x.waitState("CompleteCommit")
	if ms := sink.writtenFor(x.pid); len(ms) != 1 || !ms[0].Committed {
		t.Fatalf("markers %+v, want one commit", ms)
	}
}

// TestTxnCoord_VerifyTxn: KIP-890's verification answers NONE for a
// partition in the transaction and an error for one that is not, asked
// of the coordinator's own node and of another over AddPartitionsToTxn
// v4+ verify-only.
func TestTxnCoord_VerifyTxn(t *testing.T) {
	c := txnCluster(t, 3, newMarkerSink(t), nil)
	createTopic(t, c.client(), "txv", 2, 3)
	coord := txnCoordinatorNode(t, c, 1, "tx-verify")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-verify"}
	x.initUntilDone(60000)
	wantCodes(t, "add partitions", x.addPartitions(3, "txv", 0), 0)
	other := uint64(1)
	if other == coord {
		other = 2
	}
	ctx := testCtx(t)
	for _, id := range []uint64{coord, other} {
		n := c.nodes[id]
		for _, tc := range []struct {
			what  string
			id    string
			epoch int16
			part  int32
			want  int16
		}{
			{"added", x.id, x.ep, 0, 0},
			{"not added", x.id, x.ep, 1, kerr.TransactionAbortable.Code},
			{"old epoch", x.id, x.ep - 1, 0, kerr.ProducerFenced.Code},
			{"unknown id", "tx-none", 0, 0, kerr.InvalidProducerIDMapping.Code},
		} {
			// NOT_ENOUGH_REPLICAS is the retriable answer while the
			// id's coordinator loads (tx-none's partition may be
			// another, not yet active).
			var got int16
			eventually(t, "an answer other than NOT_ENOUGH_REPLICAS", func() bool {
				got = n.askTxnCoordinator(ctx, tc.id, x.pid, tc.epoch, "txv", tc.part)
				return got != kerr.NotEnoughReplicas.Code
			})
			if got != tc.want {
				t.Errorf("node %d (coordinator %d) %s: %v, want %v", id, coord, tc.what, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
			}
		}
	}
	if d := x.describe(); len(d.Topics) != 1 || !slices.Equal(d.Topics[0].Partitions, []int32{0}) {
		t.Errorf("verification changed the transaction: %+v", d.Topics)
	}
	// Another node sends the client to the coordinator.
	y := &txnClient{t: t, addr: c.cfgs[other].KafkaAddr, id: x.id, pid: x.pid, ep: x.ep}
	if code := y.initProducer(60000); code != kerr.NotCoordinator.Code {
		t.Errorf("init producer id at node %d: %v, want NOT_COORDINATOR", other, kerr.ErrorForCode(code))
	}
	wantCodes(t, "add partitions elsewhere", y.addPartitions(3, "txv", 1), kerr.NotCoordinator.Code)
	if code := y.endTxn(4, true); code != kerr.NotCoordinator.Code {
		t.Errorf("end txn at node %d: %v, want NOT_COORDINATOR", other, kerr.ErrorForCode(code))
	}
	if d := y.describe(); d.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("describe at node %d: %v, want NOT_COORDINATOR", other, kerr.ErrorForCode(d.ErrorCode))
	}
	// The batched broker form, with a transaction another node
	// coordinates answered NOT_COORDINATOR.
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	for _, id := range []string{x.id, otherCoordinated(t, c, coord)} {
		rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
		rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, x.pid, x.ep, true
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "txv", []int32{0, 1}
		rt.Topics = append(rt.Topics, tt)
		req.Transactions = append(req.Transactions, rt)
	}
	resp := rawKafka(t, x.addr, req).(*kmsg.AddPartitionsToTxnResponse)
	var got [][]int16
	for _, txn := range resp.Transactions {
		var codes []int16
		for _, p := range txn.Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		got = append(got, codes)
	}
	want := [][]int16{{0, kerr.TransactionAbortable.Code}, {kerr.NotCoordinator.Code, kerr.NotCoordinator.Code}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batched verify: %v, want %v", got, want)
	}
}

// otherCoordinated returns a transactional id that node coord does not
// coordinate.
func otherCoordinated(t *testing.T, c *testCluster, coord uint64) string {
	t.Helper()
	for i := range 100 {
		id := fmt.Sprintf("tx-elsewhere-%d", i)
		if _, code := c.nodes[coord].txnCoordinator(id); code == kerr.NotCoordinator.Code {
			return id
		}
	}
	t.Fatal("every id hashes to the coordinator's partitions")
	return ""
}

// TestTxnCoord_ListAndExpire lists transactions by state and forgets an
// idle id after transactional.id.expiration.ms.
func TestTxnCoord_ListAndExpire(t *testing.T) {
	c := txnCluster(t, 1, newMarkerSink(t), func(cfg *Config) { cfg.TransactionalIDExpiration = time.Second })
	createTopic(t, c.client(), "txl", 1, 1)
	coord := txnCoordinatorNode(t, c, 1, "tx-list")
	x := &txnClient{t: t, addr: c.cfgs[coord].KafkaAddr, id: "tx-list"}
	x.initUntilDone(60000)
	wantCodes(t, "add partitions", x.addPartitions(3, "txl", 0), 0)
	// Every transaction partition the node leads must have loaded: as
	// Kafka, ListTransactions answers COORDINATOR_LOAD_IN_PROGRESS until.
	eventually(t, "every local transaction coordinator loaded", func() bool {
		_, loading := c.nodes[coord].localTxnCoordinators()
		return !loading
	})
	list := func(states ...string) (*kmsg.ListTransactionsResponse, []string) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.StateFilters = states
		resp := rawKafka(t, x.addr, req).(*kmsg.ListTransactionsResponse)
		var ids []string
		for _, s := range resp.TransactionStates {
			ids = append(ids, s.TransactionalID+"/"+s.TransactionState)
		}
		return resp, ids
	}
	if resp, ids := list("Ongoing", "Bogus"); resp.ErrorCode != 0 || !slices.Equal(ids, []string{"tx-list/Ongoing"}) ||
		!slices.Equal(resp.UnknownStateFilters, []string{"Bogus"}) {
		t.Errorf("list Ongoing: %v %v unknown %v", kerr.ErrorForCode(resp.ErrorCode), ids, resp.UnknownStateFilters)
	}
	if _, ids := list("Empty"); len(ids) != 0 {
		t.Errorf("list Empty: %v, want none", ids)
	}
	listV2 := func(pattern string, minMs int64) (int16, int) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.SetVersion(2)
		req.TransactionalIDPattern, req.DurationFilterMillis = &pattern, minMs
		resp := rawKafka(t, x.addr, req).(*kmsg.ListTransactionsResponse)
		return resp.ErrorCode, len(resp.TransactionStates)
	}
	for _, tc := range []struct {
		pattern   string
		minMs     int64
		wantCode  int16
		wantCount int
	}{
		{"^tx-l", -1, 0, 1},
		{"^zz", -1, 0, 0},
		{"(", -1, kerr.InvalidRegularExpression.Code, 0},
		{"", 0, 0, 1},
		{"", time.Hour.Milliseconds(), 0, 0},
	} {
		if code, n := listV2(tc.pattern, tc.minMs); code != tc.wantCode || n != tc.wantCount {
			t.Errorf("list v2 pattern %q duration %d: %v, %d listed, want %v, %d", tc.pattern, tc.minMs, kerr.ErrorForCode(code), n, kerr.ErrorForCode(tc.wantCode), tc.wantCount)
		}
	}
	if code := x.endTxn(4, true); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	x.waitState("CompleteCommit")
	eventually(t, "the idle id expired", func() bool {
		return x.describe().ErrorCode == kerr.TransactionalIDNotFound.Code
	})
	if _, ids := list(); len(ids) != 0 {
		t.Errorf("listed after expiry: %v", ids)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
