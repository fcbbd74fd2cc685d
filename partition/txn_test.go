package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/internal/vfs"
)

// txnBatch is a transactional data batch of producer pid.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	var recs []testRecord
	for _, v := range values {
		recs = append(recs, testRecord{ts: 1000, value: []byte(v)})
	}
	return makeBatch(t, batchSpec{records: recs, producerID: pid, producerEpoch: epoch, baseSequence: seq, attributes: attrTransactional})
}

func commitMarker(pid int64, epoch int16) []byte { return ControlBatch(pid, epoch, true, 3, 2000) }
func abortMarker(pid int64, epoch int16) []byte  { return ControlBatch(pid, epoch, false, 3, 2000) }

func TestControlBatch_IsAKafkaMarker(t *testing.T) {
	b := ControlBatch(42, 7, true, 9, 1234)
	info, err := ValidateBatch(b, 1<<20)
	if err != nil {
		t.Fatalf("ValidateBatch: %v", err)
	}
	if !info.Control() || !info.Transactional() || info.ProducerID != 42 || info.ProducerEpoch != 7 || info.BaseSequence != -1 || info.MaxTimestamp != 1234 {
		t.Fatalf("header %+v", info)
	}
	// franz-go reads it as Kafka's EndTransactionMarker.
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	var rec kmsg.Record
	if err := rec.ReadFrom(rb.Records); err != nil {
		t.Fatal(err)
	}
	var val kmsg.EndTxnMarker
	if err := val.ReadFrom(rec.Value); err != nil {
		t.Fatal(err)
	}
	if got, want := int16(binary.BigEndian.Uint16(rec.Key[2:])), ControlCommit; got != want {
		t.Errorf("marker type %d, want %d", got, want)
	}
	if val.CoordinatorEpoch != 9 {
		t.Errorf("coordinator epoch %d, want 9", val.CoordinatorEpoch)
	}
	m, err := ParseControlBatch(b)
	if err != nil || !m.Commit || m.CoordinatorEpoch != 9 {
		t.Fatalf("ParseControlBatch = %+v, %v", m, err)
	}
	if m, err := ParseControlBatch(ControlBatch(1, 0, false, -1, 0)); err != nil || m.Commit || m.CoordinatorEpoch != -1 {
		t.Fatalf("abort marker = %+v, %v", m, err)
	}
}

func TestParseControlRecord_Refuses(t *testing.T) {
	for name, kv := range map[string][2][]byte{
		"short key":     {{0, 0, 0}, {0, 0, 0, 0, 0, 0}},
		"key version":   {{0xff, 0xff, 0, 1}, {0, 0, 0, 0, 0, 0}},
		"unknown type":  {{0, 0, 0, 2}, {0, 0, 0, 0, 0, 0}},
		"short value":   {{0, 0, 0, 1}, {0, 0, 0, 0, 0}},
		"value version": {{0, 0, 0, 0}, {0x80, 0, 0, 0, 0, 0}},
	} {
		if _, err := ParseControlRecord(kv[0], kv[1]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if m, err := ParseControlRecord([]byte{0, 1, 0, 1, 9}, []byte{0, 1, 0, 0, 0, 5, 7}); err != nil || !m.Commit || m.CoordinatorEpoch != 5 {
		t.Errorf("newer versions are read by their prefix: %+v, %v", m, err)
	}
}

func TestLog_AppendRefusesABadControlBatch(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	notMarker := makeBatch(t, batchSpec{records: []testRecord{{ts: 1, key: []byte{0, 0, 0, 5}, value: []byte{0, 0, 0, 0, 0, 0}}}, producerID: 1, attributes: attrControl})
	if _, _, err := l.Append(notMarker, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("control batch of type 5: %v", err)
	}
	noPID := makeBatch(t, batchSpec{records: []testRecord{{ts: 1, value: []byte("x")}}, producerID: -1, attributes: attrTransactional})
	if _, _, err := l.Append(noPID, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("transactional batch without producer: %v", err)
	}
	if l.EndOffset() != 0 {
		t.Fatalf("refused batches were appended: end %d", l.EndOffset())
	}
}

// txnView is what a test compares of a log's transaction state.
type txnView struct {
	LSO     int64
	Ongoing []OngoingTxn
	Aborted []AbortedTxn
}

func viewTxns(l *Log) txnView {
	return txnView{LSO: l.LastStableOffset(), Ongoing: l.OngoingTransactions(), Aborted: l.AbortedTransactions(l.StartOffset(), l.EndOffset())}
}

func TestReplica_TransactionsCommitAbortAndLSO(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	l := h.r.Log()
	h.produce(1, plainBatch(t, "a"))                    // 0
	h.produce(1, txnBatch(t, 10, 0, 0, "t1-0", "t1-1")) // 1-2: p10 opens at 1
	h.produce(1, plainBatch(t, "b"))                    // 3
	h.produce(1, txnBatch(t, 20, 0, 0, "t2-0"))         // 4: p20 opens at 4
	h.produce(1, txnBatch(t, 10, 0, 2, "t1-2"))         // 5: extends p10
	// A non-transactional batch of a producer inside a transaction is
	// refused, as Kafka does.
	if r := h.produce(1, idemBatch(t, 10, 0, 3, "outside")); !errors.Is(r.Err, kerr.InvalidTxnState) {
		t.Fatalf("plain batch of p10 while its transaction is open: %+v", r)
	}
	if got, want := l.HighWatermark(), int64(6); got != want {
		t.Fatalf("hw %d, want %d", got, want)
	}
	if got, want := l.LastStableOffset(), int64(1); got != want {
		t.Fatalf("LSO %d with p10 open at 1, want %d", got, want)
	}
	if got, want := l.ReadLimit(ReadCommitted), int64(1); got != want {
		t.Errorf("ReadLimit(read_committed) %d, want %d", got, want)
	}
	if got, want := l.ReadLimit(ReadUncommitted), int64(6); got != want {
		t.Errorf("ReadLimit(read_uncommitted) %d, want %d", got, want)
	}
	lso, changed := l.WatchLastStableOffset()
	if r := h.produce(1, commitMarker(10, 0)); r.Err != nil || r.Base != 6 { // 6
		t.Fatalf("commit p10: %+v", r)
	}
	select {
	case <-changed:
	default:
		t.Fatalf("LSO watch (at %d) not woken by the commit", lso)
	}
	if got, want := l.LastStableOffset(), int64(4); got != want {
		t.Fatalf("LSO %d after p10 committed, p20 open at 4; want %d", got, want)
	}
	h.produce(1, abortMarker(20, 0)) // 7
	want := txnView{LSO: 8, Aborted: []AbortedTxn{{ProducerID: 20, FirstOffset: 4, LastOffset: 7, LastStableOffset: 8}}}
	if got := viewTxns(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("after abort: %+v, want %+v", got, want)
	}
	// The sequence carries on across transactions of one epoch.
	if r := h.produce(1, txnBatch(t, 10, 0, 3, "t3")); r.Err != nil { // 8
		t.Fatalf("next transaction of p10: %+v", r)
	}
	if got, want := l.LastStableOffset(), int64(8); got != want {
		t.Fatalf("LSO %d, want %d", got, want)
	}
	got, _, err := l.ListOffset(ListLatest, l.ReadLimit(ReadCommitted))
	if err != nil || got != 8 {
		t.Errorf("ListOffsets latest read_committed = %d, %v; want 8", got, err)
	}
}

func TestReplica_TransactionFencing(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	h.produce(1, txnBatch(t, 5, 1, 0, "x")) // 0, epoch 1
	for name, b := range map[string][]byte{
		"marker":      abortMarker(5, 0),
		"data":        txnBatch(t, 5, 0, 1, "zombie"),
		"plain batch": idemBatch(t, 5, 0, 1, "zombie"),
	} {
		r := h.produce(1, b)
		if !errors.Is(r.Err, kerr.InvalidProducerEpoch) || ErrorCode(r.Err) != kerr.InvalidProducerEpoch.Code {
			t.Errorf("%s of epoch 0 after epoch 1: %+v (code %d)", name, r, ErrorCode(r.Err))
		}
	}
	// The coordinator fences with a bumped epoch and aborts.
	if r := h.produce(1, abortMarker(5, 2)); r.Err != nil {
		t.Fatalf("abort with the bumped epoch: %+v", r)
	}
	if r := h.produce(1, txnBatch(t, 5, 1, 1, "old")); !errors.Is(r.Err, kerr.InvalidProducerEpoch) {
		t.Errorf("epoch 1 after the marker of epoch 2: %+v", r)
	}
	if r := h.produce(1, txnBatch(t, 5, 2, 0, "new")); r.Err != nil {
		t.Errorf("epoch 2 from sequence 0: %+v", r)
	}
	l := h.r.Log()
	want := []AbortedTxn{{ProducerID: 5, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}}
	if got := l.AbortedTransactions(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Errorf("aborted %+v, want %+v", got, want)
	}
}

func TestReplica_MarkerWithoutTransactionIsANoOp(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	h.produce(1, plainBatch(t, "a"))
	if r := h.produce(1, abortMarker(9, 0)); r.Err != nil || r.Base != 1 {
		t.Fatalf("marker for a producer without a transaction: %+v", r)
	}
	if r := h.produce(1, commitMarker(9, 0)); r.Err != nil {
		t.Fatalf("second marker: %+v", r)
	}
	if got, want := viewTxns(h.r.Log()), (txnView{LSO: 3}); !reflect.DeepEqual(got, want) {
		t.Fatalf("state %+v, want %+v", got, want)
	}
}

func TestReplica_RetriedTransactionalBatchIsADuplicate(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	h.produce(1, plainBatch(t, "a"))
	b := txnBatch(t, 3, 0, 0, "x", "y")
	first := h.produce(1, b)
	retry := h.produce(1, b)
	if !retry.Duplicate || retry.Base != first.Base || retry.Last != first.Last {
		t.Fatalf("retry %+v of %+v", retry, first)
	}
	l := h.r.Log()
	if got, want := l.OngoingTransactions(), []OngoingTxn{{ProducerID: 3, FirstOffset: 1}}; !reflect.DeepEqual(got, want) || l.EndOffset() != 3 {
		t.Fatalf("ongoing %+v end %d, want %+v end 3", got, l.EndOffset(), want)
	}
}

func TestLog_AbortedTransactionsRange(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 400, 400 // a few batches a segment
	l := openLog(t, t.TempDir(), cfg)
	// p1 aborts [0, 3]; p2 opens at 4 and aborts at 9 while p3 (6..8)
	// commits; p4 aborts [10, 11].
	for _, b := range [][]byte{
		txnBatch(t, 1, 0, 0, "a"), txnBatch(t, 1, 0, 1, "b"), txnBatch(t, 1, 0, 2, "c"), abortMarker(1, 0),
		txnBatch(t, 2, 0, 0, "d"), plainBatch(t, "e"), txnBatch(t, 3, 0, 0, "f"), txnBatch(t, 2, 0, 1, "g"),
		commitMarker(3, 0), abortMarker(2, 0), txnBatch(t, 4, 0, 0, "h"), abortMarker(4, 0),
	} {
		mustAppend(t, l, b, 0)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	if err := l.SetHighWatermark(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	a1 := AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 3, LastStableOffset: 4}
	a2 := AbortedTxn{ProducerID: 2, FirstOffset: 4, LastOffset: 9, LastStableOffset: 10}
	a4 := AbortedTxn{ProducerID: 4, FirstOffset: 10, LastOffset: 11, LastStableOffset: 12}
	for _, c := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 12, []AbortedTxn{a1, a2, a4}},
		{0, 1, []AbortedTxn{a1}},
		{3, 4, []AbortedTxn{a1}},
		{4, 5, []AbortedTxn{a2}},
		{5, 9, []AbortedTxn{a2}},
		{9, 11, []AbortedTxn{a2, a4}},
		{10, 12, []AbortedTxn{a4}},
		{12, 12, nil},
	} {
		if got := l.AbortedTransactions(c.from, c.to); !reflect.DeepEqual(got, c.want) {
			t.Errorf("AbortedTransactions(%d, %d) = %+v, want %+v", c.from, c.to, got, c.want)
		}
	}
}

func TestLog_TruncateRollsBackTransactions(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 300, 300
	l := openLog(t, t.TempDir(), cfg)
	mustAppend(t, l, plainBatch(t, "a"), 0)        // 0
	mustAppend(t, l, txnBatch(t, 1, 0, 0, "b"), 0) // 1
	mustAppend(t, l, plainBatch(t, "c"), 0)        // 2
	mustAppend(t, l, plainBatch(t, "c"), 0)        // 3
	mustAppend(t, l, txnBatch(t, 2, 0, 0, "d"), 0) // 4
	mustAppend(t, l, abortMarker(1, 0), 0)         // 5
	mustAppend(t, l, plainBatch(t, "e"), 0)        // 6
	mustAppend(t, l, abortMarker(2, 0), 0)         // 7
	if err := l.SetHighWatermark(8); err != nil {
		t.Fatal(err)
	}
	full := txnView{LSO: 8, Aborted: []AbortedTxn{
		{ProducerID: 1, FirstOffset: 1, LastOffset: 5, LastStableOffset: 4},
		{ProducerID: 2, FirstOffset: 4, LastOffset: 7, LastStableOffset: 8},
	}}
	if got := viewTxns(l); !reflect.DeepEqual(got, full) {
		t.Fatalf("before: %+v, want %+v", got, full)
	}
	if len(l.Segments()) < 2 {
		t.Fatalf("want the transactions to span segments, got %d", len(l.Segments()))
	}
	for _, c := range []struct {
		at   int64
		want txnView
	}{
		{7, txnView{LSO: 4, Ongoing: []OngoingTxn{{2, 4}}, Aborted: full.Aborted[:1]}},
		{5, txnView{LSO: 1, Ongoing: []OngoingTxn{{1, 1}, {2, 4}}}},
		{4, txnView{LSO: 1, Ongoing: []OngoingTxn{{1, 1}}}},
		{1, txnView{LSO: 1}},
	} {
		if _, err := l.Truncate(c.at); err != nil {
			t.Fatal(err)
		}
		if got := viewTxns(l); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("truncated to %d: %+v, want %+v", c.at, got, c.want)
		}
	}
}

func TestLog_RecoveryRebuildsTransactions(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 300, 300
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	mustAppend(t, l, txnBatch(t, 1, 0, 0, "a"), 0) // 0: p1 stays open
	for i := range 6 {
		mustAppend(t, l, txnBatch(t, 2, 0, int32(i), "b"), 0) // p2 opens at 1
	}
	mustAppend(t, l, abortMarker(2, 0), 0) // 7
	mustAppend(t, l, txnBatch(t, 3, 0, 0, "c"), 0)
	if err := l.SetHighWatermark(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	// Retention past p1's first batch: its .txnindex carries it.
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	if err := l.AdvanceStart(segs[1].Base); err != nil {
		t.Fatal(err)
	}
	before := viewTxns(l)
	if before.LSO != segs[1].Base || len(before.Ongoing) != 2 || len(before.Aborted) != 1 {
		t.Fatalf("unexpected state before the crash: %+v", before)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	abandon(l) // a crash: no Close, no checkpoint at the end
	for _, name := range []string{"after the crash", "after a clean close", "trusting files (UnsafeSkipCRCChecks)"} {
		cfg.UnsafeSkipCRCChecks = name[0] == 't'
		l = openLog(t, dir, cfg)
		if err := l.SetHighWatermark(l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		if got := viewTxns(l); !reflect.DeepEqual(got, before) {
			t.Fatalf("reopen %s: %+v, want %+v", name, got, before)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A plain log leaves no .txnindex behind.
	plainDir := t.TempDir()
	p := openLog(t, plainDir, cfg)
	for range 10 {
		mustAppend(t, p, plainBatch(t, "x"), 0)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(plainDir, "*"+txnIndexSuffix)); len(m) != 0 {
		t.Errorf("non-transactional log has %v", m)
	}
}

func TestReplica_SnapshotCarriesOpenTransactions(t *testing.T) {
	leader := newReplicaHarness(t)
	leader.apply(2, nil)
	leader.produce(2, plainBatch(t, "a"))              // 0
	leader.produce(2, txnBatch(t, 7, 0, 0, "open"))    // 1: p7 stays open across the snapshot
	leader.produce(2, txnBatch(t, 8, 0, 0, "aborted")) // 2: p8 aborts after the new start
	for i := range 5 {
		leader.produce(2, plainBatch(t, fmt.Sprint(i))) // 3-7
	}
	leader.produce(2, abortMarker(8, 0)) // 8
	if res := leader.apply(2, AdvanceStartEntry(5)); res != nil {
		t.Fatalf("advance start: %v", res)
	}
	data, err := leader.r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(leader.index), Term: new(uint64(2))}}
	body, err := leader.r.SnapshotBody(snap)
	if err != nil {
		t.Fatal(err)
	}
	follower := newReplicaHarness(t)
	if err := follower.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	if err := follower.r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	follower.index = leader.index
	want := txnView{LSO: 5, Ongoing: []OngoingTxn{{7, 1}}, Aborted: []AbortedTxn{{ProducerID: 8, FirstOffset: 2, LastOffset: 8, LastStableOffset: 1}}}
	check := func(when string, h *replicaHarness, want txnView) {
		t.Helper()
		if got := viewTxns(h.r.Log()); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, want %+v", when, got, want)
		}
	}
	check("leader", leader, want)
	check("follower after restore", follower, want)
	for _, h := range []*replicaHarness{leader, follower} {
		h.produce(2, commitMarker(7, 0)) // 9
	}
	want = txnView{LSO: 10, Aborted: want.Aborted}
	check("leader after commit", leader, want)
	check("follower after commit", follower, want)
	if err := follower.r.Close(); err != nil {
		t.Fatal(err)
	}
	follower.open()
	if err := follower.r.Log().SetHighWatermark(9); err != nil {
		t.Fatal(err)
	}
	// Reopened at the snapshot: the commit is replayed by raft.
	check("follower reopened at the snapshot", follower, txnView{LSO: 5, Ongoing: []OngoingTxn{{7, 1}}, Aborted: want.Aborted})
}

func TestReplica_RewindSeedsTransactionsPastTheCheckpoint(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	h.produce(1, txnBatch(t, 4, 0, 0, "open")) // 0
	h.produce(1, plainBatch(t, "a"))           // 1
	if _, err := h.r.Snapshot(); err != nil {  // checkpoint at 2, p4 open
		t.Fatal(err)
	}
	h.produce(1, plainBatch(t, "b")) // 2
	h.apply(1, AdvanceStartEntry(3))
	if err := h.r.Log().Sync(); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
	h.open() // the start passed the checkpoint: the log restarts empty at 2
	l := h.r.Log()
	if got, want := l.OngoingTransactions(), []OngoingTxn{{4, 0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after rewind: ongoing %+v, want %+v", got, want)
	}
	// raft replays the entries after the checkpoint
	h.produce(1, plainBatch(t, "b"))
	h.apply(1, AdvanceStartEntry(3))
	h.produce(1, abortMarker(4, 0)) // 3
	want := []AbortedTxn{{ProducerID: 4, FirstOffset: 0, LastOffset: 3, LastStableOffset: 4}}
	if got := l.AbortedTransactions(3, 4); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
}

func TestISRLog_Transactions(t *testing.T) {
	dir := t.TempDir()
	leader := openISR(t, dir, testConfig())
	follower := openISR(t, t.TempDir(), testConfig())
	if err := leader.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, leader, txnBatch(t, 1, 0, 0, "a"), 1) // 0
	mustProduce(t, leader, txnBatch(t, 2, 0, 0, "b"), 1) // 1
	mustProduce(t, leader, abortMarker(1, 0), 1)         // 2
	if r := produce(t, leader, commitMarker(2, 0), 1); r.Err != nil || r.Duplicate {
		t.Fatalf("commit: %+v", r) // 3
	}
	mustProduce(t, leader, txnBatch(t, 2, 0, 1, "c"), 1) // 4: p2's next transaction
	if r := produce(t, leader, txnBatch(t, 2, 0, 1, "c"), 1); !r.Duplicate || r.Base != 4 {
		t.Fatalf("retry: %+v", r)
	}
	mustProduce(t, leader, abortMarker(1, 3), 1) // 5: the coordinator bumped p1 to epoch 3
	if r := produce(t, leader, txnBatch(t, 1, 2, 0, "zombie"), 1); !errors.Is(r.Err, kerr.InvalidProducerEpoch) {
		t.Fatalf("epoch 2 after the epoch 3 marker: %+v", r)
	}
	catchUp(t, follower, leader)
	for _, r := range []*ISRLog{leader, follower} {
		if _, err := r.SetHighWatermark(r.EndOffset()); err != nil {
			t.Fatal(err)
		}
	}
	want := txnView{LSO: 4, Ongoing: []OngoingTxn{{2, 4}}, Aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 2, LastStableOffset: 1}}}
	for name, r := range map[string]*ISRLog{"leader": leader, "follower": follower} {
		if got := viewTxns(r.Log()); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
		if st := r.Producer(1); st == nil || st.Epoch != 3 {
			t.Errorf("%s: producer 1 %+v, want epoch 3", name, st)
		}
	}
	// The follower diverged after the commit: cut back, p2's second
	// transaction and p1's epoch bump are gone.
	if err := follower.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if got, want := viewTxns(follower.Log()), (txnView{LSO: 4, Aborted: want.Aborted}); !reflect.DeepEqual(got, want) {
		t.Errorf("follower truncated to 4: %+v, want %+v", got, want)
	}
	if st := follower.Producer(1); st == nil || st.Epoch != 0 {
		t.Errorf("follower truncated to 4: producer 1 %+v, want epoch 0", st)
	}
	// Reopen: the producers' epochs come back from the batches' headers.
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	leader = openISR(t, dir, testConfig())
	if st := leader.Producer(1); st == nil || st.Epoch != 3 {
		t.Errorf("reopened leader: producer 1 %+v, want epoch 3", st)
	}
	if got := leader.Log().OngoingTransactions(); !reflect.DeepEqual(got, want.Ongoing) {
		t.Errorf("reopened leader: ongoing %+v, want %+v", got, want.Ongoing)
	}
}

// keyedBatch is a batch of keyed records with attribute bits attrs.
func keyedBatch(t testing.TB, pid int64, attrs int16, kv ...string) []byte {
	t.Helper()
	var recs []testRecord
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, testRecord{ts: 1000, key: []byte(kv[i]), value: []byte(kv[i+1])})
	}
	return makeBatch(t, batchSpec{records: recs, producerID: pid, attributes: attrs})
}

// storedValues returns "key=value" for every record of l below upTo, and
// how many batches hold them.
func storedValues(t testing.TB, l *Log, upTo int64) (kvs []string, batches int) {
	t.Helper()
	for off := l.StartOffset(); off < upTo; {
		for _, b := range splitBatches(t, mustRead(t, l, off, 1<<20, upTo)) {
			info, err := ParseBatchHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			batches++
			off = info.BaseOffset + int64(info.LastOffsetDelta) + 1
			if info.Control() {
				continue
			}
			if err := eachRecord(b, info, func(r record) error {
				kvs = append(kvs, string(r.key)+"="+string(recordValue(t, r.raw)))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return kvs, batches
}

func TestClean_Transactions(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	for _, b := range [][]byte{
		keyedBatch(t, -1, 0, "k2", "v0"),                                // 0
		keyedBatch(t, 1, attrTransactional, "k1", "committed"),          // 1
		commitMarker(1, 0),                                              // 2
		keyedBatch(t, 2, attrTransactional, "k2", "aborted", "k3", "x"), // 3-4
		abortMarker(2, 0),                                               // 5
	} {
		mustAppend(t, l, b, 0)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, keyedBatch(t, 3, attrTransactional, "k4", "open"), 0) // 6
	mustAppend(t, l, keyedBatch(t, -1, 0, "k1", "newer"), 0)               // 7
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, keyedBatch(t, -1, 0, "k6", "v"), 0) // 8
	if err := l.SetHighWatermark(9); err != nil {
		t.Fatal(err)
	}
	before := viewTxns(l)
	if before.LSO != 6 {
		t.Fatalf("LSO %d, want 6", before.LSO)
	}
	st, err := l.Clean(CleanConfig{UpTo: l.HighWatermark(), Now: time.UnixMilli(5000)})
	if err != nil {
		t.Fatal(err)
	}
	// Only the first segment lies below the LSO; the aborted records go,
	// without hiding the older k2, and k1's committed record stays (its
	// newer value is past the LSO, outside the offset map).
	if !st.Cleaned || st.Segments != 1 || st.RecordsDropped != 2 || st.CleanedTo != 6 {
		t.Fatalf("clean: %+v", st)
	}
	kvs, batches := storedValues(t, l, 9)
	if want := []string{"k2=v0", "k1=committed", "k4=open", "k1=newer", "k6=v"}; !reflect.DeepEqual(kvs, want) || batches != 8 {
		t.Fatalf("after clean: %q in %d batches, want %q in 8 (markers and the emptied batch kept)", kvs, batches, want)
	}
	if got := viewTxns(l); !reflect.DeepEqual(got, before) {
		t.Fatalf("transaction state changed by cleaning: %+v, want %+v", got, before)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig())
	if err := l.SetHighWatermark(9); err != nil {
		t.Fatal(err)
	}
	if got := viewTxns(l); !reflect.DeepEqual(got, before) {
		t.Fatalf("after reopening the cleaned log: %+v, want %+v", got, before)
	}
	// Once p3 commits, the second segment is cleanable: k1's committed
	// transactional record is compacted like any other.
	mustAppend(t, l, commitMarker(3, 0), 0) // 9
	if err := l.SetHighWatermark(10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(CleanConfig{UpTo: l.HighWatermark(), Now: time.UnixMilli(5000)}); err != nil {
		t.Fatal(err)
	}
	if kvs, _ := storedValues(t, l, 10); !reflect.DeepEqual(kvs, []string{"k2=v0", "k4=open", "k1=newer", "k6=v"}) {
		t.Fatalf("after the second clean: %q", kvs)
	}
}

func TestLog_WaitLastStableOffset(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, txnBatch(t, 1, 0, 0, "a"), 0) // 0
	mustAppend(t, l, plainBatch(t, "b"), 0)        // 1
	if err := l.SetHighWatermark(2); err != nil {
		t.Fatal(err)
	}
	done := make(chan int64, 1)
	go func() {
		lso, err := l.WaitLastStableOffset(context.Background(), 2)
		if err != nil {
			lso = -1
		}
		done <- lso
	}()
	select {
	case lso := <-done:
		t.Fatalf("wait returned %d while the transaction at 0 is open", lso)
	case <-time.After(20 * time.Millisecond):
	}
	mustAppend(t, l, commitMarker(1, 0), 0) // 2
	if err := l.SetHighWatermark(3); err != nil {
		t.Fatal(err)
	}
	if lso := <-done; lso != 3 {
		t.Fatalf("wait returned %d, want 3", lso)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.WaitLastStableOffset(ctx, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v", err)
	}
}

func TestReplica_RestoresOpenTransactionsOfADamagedTxnIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	cfg := testConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes = 300, 300
	h := &replicaHarness{t: t, dir: dir}
	open := func() {
		r, err := OpenReplica(ReplicaConfig{Dir: dir, Log: cfg})
		if err != nil {
			t.Fatal(err)
		}
		h.r, h.index = r, r.Applied()
	}
	open()
	h.apply(1, nil)
	h.produce(1, txnBatch(t, 1, 0, 0, "open")) // 0: stays open
	for i := range 12 {
		h.produce(1, plainBatch(t, fmt.Sprint(i)))
	}
	segs := h.r.Log().Segments()
	if len(segs) < 3 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	h.apply(1, AdvanceStartEntry(segs[1].Base))
	if _, err := h.r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	first := h.r.Log().Segments()[0]
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
	// Bit rot in the only record of what was open at the first segment's base.
	name := strings.TrimSuffix(first.Path, logSuffix) + txnIndexSuffix
	if err := os.WriteFile(name, []byte("garbage\n00000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.OngoingTransactions(); got != nil {
		t.Fatalf("a bare log rebuilt %+v from a damaged .txnindex", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"reopened over the damage", "reopened again"} {
		open()
		l := h.r.Log()
		if got, want := l.OngoingTransactions(), []OngoingTxn{{1, 0}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: open %+v, want %+v", when, got, want)
		}
		if got, want := l.LastStableOffset(), l.StartOffset(); got != want {
			t.Fatalf("%s: LSO %d, want the start %d", when, got, want)
		}
		if err := h.r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A snapshot whose log start moved on before its body was streamed: the
// body starts later than the checkpoint's start, and the transactions open
// just before it travel in its header.
func TestReplica_SnapshotBodyAfterTheStartMovedOn(t *testing.T) {
	leader := newReplicaHarness(t)
	leader.apply(2, nil)
	leader.produce(2, txnBatch(t, 7, 0, 0, "open")) // 0
	leader.produce(2, txnBatch(t, 8, 0, 0, "gone")) // 1: aborts at 6
	for i := range 4 {
		leader.produce(2, plainBatch(t, fmt.Sprint(i))) // 2-5
	}
	leader.produce(2, abortMarker(8, 0)) // 6
	data, err := leader.r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(leader.index), Term: new(uint64(2))}}
	leader.apply(2, AdvanceStartEntry(4)) // after the snapshot, before its body
	body, err := leader.r.SnapshotBody(snap)
	if err != nil {
		t.Fatal(err)
	}
	follower := newReplicaHarness(t)
	if err := follower.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	if err := follower.r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	fl := follower.r.Log()
	if fl.StartOffset() != 4 {
		t.Fatalf("follower start %d, want 4", fl.StartOffset())
	}
	want := txnView{LSO: 4, Ongoing: []OngoingTxn{{7, 0}}, Aborted: []AbortedTxn{{ProducerID: 8, FirstOffset: 1, LastOffset: 6, LastStableOffset: 0}}}
	if got := viewTxns(fl); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower: %+v, want %+v", got, want)
	}
}

// seqMarker is a marker of transaction number seq (a coordinator epoch
// with the MarkerSeq flag, as coordinator/txns.MarkerEpoch makes).
func seqMarker(pid int64, commit bool, seq int32) []byte {
	return ControlBatch(pid, 0, commit, markerSeqFlag|seq, 2000)
}

// TestReplica_DelayedMarkerCopyIsADuplicate: a copy of a marker already
// taken (the coordinator retried it, and the first request arrived
// late) does not end the producer's next transaction; the next
// transaction's own marker does. A marker of an earlier binary (a term,
// no number) is applied as before.
func TestReplica_DelayedMarkerCopyIsADuplicate(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	l := h.r.Log()
	h.produce(1, txnBatch(t, 10, 0, 0, "t1")) // 0
	h.produce(1, seqMarker(10, false, 1))     // 1: aborts t1
	h.produce(1, txnBatch(t, 10, 0, 1, "t2")) // 2: the next transaction
	if r := h.produce(1, seqMarker(10, false, 1)); !r.Duplicate || r.Err != nil {
		t.Fatalf("late copy of t1's abort: %+v, want a duplicate", r)
	}
	if got := l.OngoingTransactions(); !reflect.DeepEqual(got, []OngoingTxn{{10, 2}}) {
		t.Fatalf("after the late copy: ongoing %+v, want t2 open at 2", got)
	}
	if r := h.produce(1, seqMarker(10, true, 2)); r.Duplicate || r.Err != nil || r.Base != 3 {
		t.Fatalf("t2's commit: %+v", r)
	}
	want := txnView{LSO: 4, Aborted: []AbortedTxn{{ProducerID: 10, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}}}
	if got := viewTxns(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("after t2's commit: %+v, want %+v", got, want)
	}
	h.produce(1, txnBatch(t, 10, 0, 2, "t3")) // 4
	if r := h.produce(1, abortMarker(10, 0)); r.Duplicate || r.Base != 5 {
		t.Fatalf("a marker without a number: %+v, want it applied", r)
	}
}

// TestISRLog_DelayedMarkerCopyIsADuplicate is the same on the ISR path,
// where the leader decides and the follower copies its log, and so its
// producer state.
func TestISRLog_DelayedMarkerCopyIsADuplicate(t *testing.T) {
	leader := openISR(t, t.TempDir(), testConfig())
	follower := openISR(t, t.TempDir(), testConfig())
	if err := leader.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	mustProduce(t, leader, txnBatch(t, 10, 0, 0, "t1"), 1) // 0
	mustProduce(t, leader, seqMarker(10, false, 1), 1)     // 1
	mustProduce(t, leader, txnBatch(t, 10, 0, 1, "t2"), 1) // 2
	if r := produce(t, leader, seqMarker(10, false, 1), 1); !r.Duplicate || r.Err != nil || r.Last < 1 {
		t.Fatalf("late copy: %+v, want a duplicate whose Last covers the marker at 1 (acks=all waits for it)", r)
	}
	catchUp(t, follower, leader)
	for name, r := range map[string]*ISRLog{"leader": leader, "follower": follower} {
		if got := r.Log().OngoingTransactions(); !reflect.DeepEqual(got, []OngoingTxn{{10, 2}}) {
			t.Errorf("%s: ongoing %+v, want t2 open at 2", name, got)
		}
		if st := r.Producer(10); st == nil || st.MarkerSeq != 1 {
			t.Errorf("%s: producer 10 %+v, want marker seq 1", name, st)
		}
	}
}

func TestMarkerSeq(t *testing.T) {
	for ce, want := range map[int32]int32{0: 0, 3: 0, -1: 0, markerSeqFlag | 7: 7, markerSeqFlag: 0} {
		if got := MarkerSeq(ce); got != want {
			t.Errorf("MarkerSeq(%#x) = %d, want %d", ce, got, want)
		}
	}
}

// TestISRLog_MarkerSeqSurvivesARescan: a marker taken after the last ISR
// checkpoint is found again by the rescan at open (headers alone do not
// carry its number), so that a late copy of it stays a duplicate after a
// crash and restart, and a truncation's rebuild keeps it too.
func TestISRLog_MarkerSeqSurvivesARescan(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.FS = fs
	dir := t.TempDir()
	open := func() *ISRLog {
		r, err := OpenISRLog(ISRLogConfig{Dir: dir, Log: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open()
	if err := r.BecomeLeader(1); err != nil { // checkpoints at 0
		t.Fatal(err)
	}
	mustProduce(t, r, txnBatch(t, 10, 0, 0, "t1"), 1) // 0
	mustProduce(t, r, seqMarker(10, false, 1), 1)     // 1
	mustProduce(t, r, txnBatch(t, 10, 0, 1, "t2"), 1) // 2
	if err := r.Log().Sync(); err != nil {
		t.Fatal(err)
	}
	abandon(r.log)
	fs.Crash(rand.New(rand.NewPCG(1, 2)))
	r = open()
	defer r.Close()
	if st := r.Producer(10); st == nil || st.MarkerSeq != 1 {
		t.Fatalf("after the rescan: producer 10 %+v, want marker seq 1", st)
	}
	if err := r.BecomeLeader(2); err != nil {
		t.Fatal(err)
	}
	if res := produce(t, r, seqMarker(10, false, 1), 2); !res.Duplicate || res.Err != nil {
		t.Fatalf("late copy after a restart: %+v, want a duplicate", res)
	}
	if err := r.TruncateTo(2); err != nil { // rebuilds from the checkpoint at 0
		t.Fatal(err)
	}
	if st := r.Producer(10); st == nil || st.MarkerSeq != 1 {
		t.Fatalf("after a truncation: producer 10 %+v, want marker seq 1", st)
	}
}
