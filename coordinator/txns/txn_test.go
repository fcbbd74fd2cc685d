package txns

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// producerChecks are the refusals AddPartitions, AddOffsets and
// verification share, in Kafka's order; each is set up on a harness
// whose "a" has producer pid at epoch.
func producerChecks() []struct {
	name  string
	id    string
	pid   func(int64) int64
	epoch func(int16) int16
	state func(h *harness, pid int64, epoch int16)
	want  *kerr.Error
} {
	same := func(p int64) int64 { return p }
	sameE := func(e int16) int16 { return e }
	nothing := func(*harness, int64, int16) {}
	return []struct {
		name  string
		id    string
		pid   func(int64) int64
		epoch func(int16) int16
		state func(h *harness, pid int64, epoch int16)
		want  *kerr.Error
	}{
		{"empty id", "", same, sameE, nothing, kerr.InvalidRequest},
		{"unknown id", "zz", same, sameE, nothing, kerr.InvalidProducerIDMapping},
		{"other producer id", "a", func(p int64) int64 { return p + 1 }, sameE, nothing, kerr.InvalidProducerIDMapping},
		{"older epoch", "a", same, func(e int16) int16 { return e - 1 }, nothing, kerr.ProducerFenced},
		{"newer epoch", "a", same, func(e int16) int16 { return e + 1 }, nothing, kerr.ProducerFenced},
		{"prepare commit", "a", same, sameE, func(h *harness, pid int64, epoch int16) { h.end("a", pid, epoch, true) }, kerr.ConcurrentTransactions},
		{"prepare abort", "a", same, sameE, func(h *harness, pid int64, epoch int16) { h.end("a", pid, epoch, false) }, kerr.ConcurrentTransactions},
	}
}

// twoEpochs gives "a" epoch 1, so that older and newer epochs exist.
func twoEpochs(h *harness) (int64, int16) {
	h.producer("a")
	return h.ongoing("a")
}

func TestMachine_AddPartitionsRefusals(t *testing.T) {
	for _, tc := range producerChecks() {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pid, epoch := twoEpochs(h)
			tc.state(h, pid, epoch)
			before := h.snapshot()
			r := h.add(tc.id, tc.pid(pid), tc.epoch(epoch), Partitions{"t": {5}, "u": {0, 1}})
			wantCode(t, "add", r.Code, tc.want)
			want := map[string]map[int32]int16{"t": {5: tc.want.Code}, "u": {0: tc.want.Code, 1: tc.want.Code}}
			if !reflect.DeepEqual(r.Partitions, want) {
				t.Fatalf("per-partition codes %v, want %v", r.Partitions, want)
			}
			if h.snapshot() != before {
				t.Fatal("a refused add changed the state")
			}
		})
	}
	t.Run("malformed partitions", func(t *testing.T) {
		h := newHarness(t)
		pid, epoch := h.producer("a")
		for _, p := range []Partitions{{"": {0}}, {"t": {-1}}} {
			wantCode(t, "add", h.add("a", pid, epoch, p).Code, kerr.InvalidRequest)
		}
		if tx := h.txn("a"); tx.State != StateEmpty {
			t.Fatalf("malformed add changed the state: %+v", tx)
		}
	})
}

func TestMachine_AddPartitionsTransitions(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.producer("a")
	h.now += 5
	start := h.now
	wantCode(t, "first add", h.add("a", pid, epoch, Partitions{"t": {3, 1, 3}}).Code, nil)
	tx := h.txn("a")
	if tx.State != StateOngoing || tx.StartMs != start || tx.LastUpdateMs != start ||
		!reflect.DeepEqual(tx.Partitions, Partitions{"t": {1, 3}}) {
		t.Fatalf("after the first add: %+v", tx)
	}
	// Already in the transaction: answered at once, nothing changes (not
	// even the update time, as Kafka's shortcut).
	h.now += 5
	before := h.snapshot()
	wantCode(t, "re-add", h.add("a", pid, epoch, Partitions{"t": {1}}).Code, nil)
	if h.snapshot() != before {
		t.Fatal("adding partitions already in the transaction changed the state")
	}
	// More partitions: added, start time kept.
	wantCode(t, "more", h.add("a", pid, epoch, Partitions{"u": {0}, "t": {2}}).Code, nil)
	tx = h.txn("a")
	if tx.StartMs != start || tx.LastUpdateMs != h.now || !reflect.DeepEqual(tx.Partitions, Partitions{"t": {1, 2, 3}, "u": {0}}) {
		t.Fatalf("after more partitions: %+v", tx)
	}
	// After a completed transaction the next one starts afresh.
	wantCode(t, "commit", h.end("a", pid, epoch, true), nil)
	wantCode(t, "markers", h.finish("a"), nil)
	h.now += 5
	wantCode(t, "next transaction", h.add("a", pid, epoch, Partitions{"v": {9}}).Code, nil)
	if tx := h.txn("a"); tx.StartMs != h.now || !reflect.DeepEqual(tx.Partitions, Partitions{"v": {9}}) || tx.State != StateOngoing {
		t.Fatalf("the next transaction: %+v", tx)
	}
}

func TestMachine_AddPartitionsBatch(t *testing.T) {
	h := newHarness(t)
	pa, ea := h.producer("a")
	pb, eb := h.ongoing("b")
	r := h.apply(&Command{AddPartitions: &AddPartitions{NowMs: h.now, Txns: []AddTxn{
		{TransactionalID: "a", ProducerID: pa, ProducerEpoch: ea, Partitions: Partitions{"t": {0}}},
		{TransactionalID: "b", ProducerID: pb, ProducerEpoch: eb, VerifyOnly: true, Partitions: Partitions{"t": {0, 7}}},
		{TransactionalID: "c", ProducerID: 1, ProducerEpoch: 0, Partitions: Partitions{"t": {0}}},
	}}})
	want := []TxnResult{
		{TransactionalID: "a", Partitions: map[string]map[int32]int16{"t": {0: 0}}},
		{TransactionalID: "b", Partitions: map[string]map[int32]int16{"t": {0: 0, 7: kerr.TransactionAbortable.Code}}},
		{TransactionalID: "c", Code: kerr.InvalidProducerIDMapping.Code, Partitions: map[string]map[int32]int16{"t": {0: kerr.InvalidProducerIDMapping.Code}}},
	}
	if r.Code != 0 || !reflect.DeepEqual(r.Txns, want) {
		t.Fatalf("batch: %+v\nwant %+v", r.Txns, want)
	}
	if tx := h.txn("a"); tx.State != StateOngoing {
		t.Fatalf("the batch's add did not apply: %+v", tx)
	}
	if tx := h.txn("b"); tx.Partitions.Contains("t", 7) {
		t.Fatal("a verify-only check added a partition")
	}
}

// TestMachine_Verify is KIP-890's verify-only check, by command and by
// the local read, which must agree.
func TestMachine_Verify(t *testing.T) {
	for _, tc := range producerChecks() {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pid, epoch := twoEpochs(h)
			tc.state(h, pid, epoch)
			parts := Partitions{"t": {0, 9}}
			local := h.m.Verify(tc.id, tc.pid(pid), tc.epoch(epoch), parts)
			before := h.snapshot()
			r := h.verify(tc.id, tc.pid(pid), tc.epoch(epoch), parts)
			wantCode(t, "verify", r.Code, tc.want)
			if want := map[string]map[int32]int16{"t": {0: tc.want.Code, 9: tc.want.Code}}; !reflect.DeepEqual(r.Partitions, want) {
				t.Fatalf("per-partition codes %v, want %v", r.Partitions, want)
			}
			if !reflect.DeepEqual(local, r) || h.snapshot() != before {
				t.Fatalf("local verify %+v, command %+v; state changed %v", local, r, h.snapshot() != before)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		setup func(h *harness, pid int64, epoch int16)
		want  map[int32]int16
	}{
		{"ongoing", func(*harness, int64, int16) {}, map[int32]int16{0: 0, 1: 0, 9: kerr.TransactionAbortable.Code}},
		{"empty", func(h *harness, pid int64, epoch int16) {
			h.end("a", pid, epoch, true)
			h.finish("a")
		}, map[int32]int16{0: kerr.TransactionAbortable.Code, 1: kerr.TransactionAbortable.Code, 9: kerr.TransactionAbortable.Code}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pid, epoch := h.ongoing("a")
			tc.setup(h, pid, epoch)
			before := h.snapshot()
			r := h.verify("a", pid, epoch, Partitions{"t": {0, 1, 9}})
			if r.Code != 0 || !reflect.DeepEqual(r.Partitions["t"], tc.want) {
				t.Fatalf("verify: %+v, want %v", r, tc.want)
			}
			if h.snapshot() != before {
				t.Fatal("verification changed the state")
			}
		})
	}
}

func TestMachine_AddOffsets(t *testing.T) {
	for _, tc := range producerChecks() {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pid, epoch := twoEpochs(h)
			tc.state(h, pid, epoch)
			before := h.snapshot()
			wantCode(t, "add offsets", h.addOffsets(tc.id, tc.pid(pid), tc.epoch(epoch), "g"), tc.want)
			if h.snapshot() != before {
				t.Fatal("refused AddOffsets changed the state")
			}
		})
	}
	h := newHarness(t)
	pid, epoch := h.producer("a")
	wantCode(t, "empty group", h.addOffsets("a", pid, epoch, ""), kerr.InvalidRequest)
	h.now += 3
	wantCode(t, "offsets open a transaction", h.addOffsets("a", pid, epoch, "g2"), nil)
	if tx := h.txn("a"); tx.State != StateOngoing || tx.StartMs != h.now || !reflect.DeepEqual(tx.Groups, []string{"g2"}) {
		t.Fatalf("after AddOffsets: %+v", tx)
	}
	wantCode(t, "second group", h.addOffsets("a", pid, epoch, "g1"), nil)
	before := h.snapshot()
	wantCode(t, "a group again", h.addOffsets("a", pid, epoch, "g2"), nil)
	if h.snapshot() != before {
		t.Fatal("adding a group already in the transaction changed the state")
	}
	if tx := h.txn("a"); !reflect.DeepEqual(tx.Groups, []string{"g1", "g2"}) {
		t.Fatalf("groups %v, want sorted [g1 g2]", tx.Groups)
	}
	// A transaction of offsets alone commits like any other.
	wantCode(t, "commit", h.end("a", pid, epoch, true), nil)
	if p := h.m.Pending(); len(p) != 1 || !reflect.DeepEqual(p[0].Groups, []string{"g1", "g2"}) || p[0].Partitions.Len() != 0 {
		t.Fatalf("pending: %+v", p)
	}
}

func TestMachine_EndTxn(t *testing.T) {
	// to brings "a" into a state; each returns the producer's id and epoch.
	to := map[State]func(h *harness) (int64, int16){
		StateEmpty:   func(h *harness) (int64, int16) { return h.producer("a") },
		StateOngoing: func(h *harness) (int64, int16) { return h.ongoing("a") },
	}
	for _, s := range []State{StatePrepareCommit, StatePrepareAbort, StateCompleteCommit, StateCompleteAbort} {
		commit, complete := s == StatePrepareCommit || s == StateCompleteCommit, s == StateCompleteCommit || s == StateCompleteAbort
		to[s] = func(h *harness) (int64, int16) {
			pid, epoch := h.ongoing("a")
			h.end("a", pid, epoch, commit)
			if complete {
				h.finish("a")
			}
			return pid, epoch
		}
	}
	for _, tc := range []struct {
		from   State
		commit bool
		want   *kerr.Error
		to     State
	}{
		{StateEmpty, true, kerr.InvalidTxnState, StateEmpty},
		{StateEmpty, false, kerr.InvalidTxnState, StateEmpty},
		{StateOngoing, true, nil, StatePrepareCommit},
		{StateOngoing, false, nil, StatePrepareAbort},
		{StatePrepareCommit, true, kerr.ConcurrentTransactions, StatePrepareCommit},
		{StatePrepareCommit, false, kerr.InvalidTxnState, StatePrepareCommit},
		{StatePrepareAbort, false, kerr.ConcurrentTransactions, StatePrepareAbort},
		{StatePrepareAbort, true, kerr.InvalidTxnState, StatePrepareAbort},
		{StateCompleteCommit, true, nil, StateCompleteCommit}, // a retry after completion
		{StateCompleteCommit, false, kerr.InvalidTxnState, StateCompleteCommit},
		{StateCompleteAbort, false, nil, StateCompleteAbort},
		{StateCompleteAbort, true, kerr.InvalidTxnState, StateCompleteAbort},
	} {
		t.Run(string(tc.from)+map[bool]string{true: "+commit", false: "+abort"}[tc.commit], func(t *testing.T) {
			h := newHarness(t)
			pid, epoch := to[tc.from](h)
			if got := h.txn("a").State; got != tc.from {
				t.Fatalf("setup reached %s, want %s", got, tc.from)
			}
			before := h.txn("a")
			h.now += 7
			wantCode(t, "end", h.end("a", pid, epoch, tc.commit), tc.want)
			after := h.txn("a")
			if after.State != tc.to {
				t.Fatalf("state %s, want %s", after.State, tc.to)
			}
			if tc.to == tc.from && !reflect.DeepEqual(after, before) {
				t.Fatalf("a refused or repeated EndTxn changed the transaction:\n%+v\n%+v", after, before)
			}
			if tc.to != tc.from && (after.LastUpdateMs != h.now || after.Partitions.Len() != 2 || after.StartMs != before.StartMs) {
				t.Fatalf("prepared: %+v", after)
			}
		})
	}
	t.Run("producer checks", func(t *testing.T) {
		h := newHarness(t)
		pid, epoch := twoEpochs(h)
		wantCode(t, "empty id", h.end("", pid, epoch, true), kerr.InvalidRequest)
		wantCode(t, "unknown id", h.end("zz", pid, epoch, true), kerr.InvalidProducerIDMapping)
		wantCode(t, "other producer", h.end("a", pid+1, epoch, true), kerr.InvalidProducerIDMapping)
		wantCode(t, "older epoch", h.end("a", pid, epoch-1, true), kerr.ProducerFenced)
		wantCode(t, "newer epoch", h.end("a", pid, epoch+1, true), kerr.ProducerFenced)
		if tx := h.txn("a"); tx.State != StateOngoing {
			t.Fatalf("refused EndTxn changed the state to %s", tx.State)
		}
	})
}

func TestMachine_MarkersWritten(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.ongoing("a")
	h.add("a", pid, epoch, Partitions{"u": {4}})
	h.addOffsets("a", pid, epoch, "g")
	wantCode(t, "end", h.end("a", pid, epoch, true), nil)
	mw := func(commit bool, e int16, parts Partitions, groups ...string) int16 {
		return h.apply(&Command{MarkersWritten: &MarkersWritten{TransactionalID: "a", ProducerID: pid, ProducerEpoch: e,
			Commit: commit, Partitions: parts, Groups: groups, NowMs: h.now}}).Code
	}
	wantCode(t, "markers of the other result", mw(false, epoch, Partitions{"t": {0}}), kerr.InvalidTxnState)
	wantCode(t, "markers of another epoch", mw(true, epoch+1, Partitions{"t": {0}}), kerr.ProducerFenced)
	wantCode(t, "malformed", mw(true, epoch, Partitions{"t": {-3}}), kerr.InvalidRequest)
	// Part of the markers: the rest stay pending, resumable by a new
	// leader.
	wantCode(t, "some markers", mw(true, epoch, Partitions{"t": {0, 1}, "x": {3}}), nil)
	p := h.m.Pending()
	if len(p) != 1 || !reflect.DeepEqual(p[0].Partitions, Partitions{"u": {4}}) || !reflect.DeepEqual(p[0].Groups, []string{"g"}) || !p[0].Commit {
		t.Fatalf("pending after some markers: %+v", p)
	}
	if h.txn("a").State != StatePrepareCommit {
		t.Fatal("completed before every marker was written")
	}
	wantCode(t, "the partition's marker", mw(true, epoch, Partitions{"u": {4}}), nil)
	if h.txn("a").State != StatePrepareCommit {
		t.Fatal("completed before the group was told")
	}
	h.now += 9
	wantCode(t, "the group", mw(true, epoch, nil, "g"), nil)
	tx := h.txn("a")
	if tx.State != StateCompleteCommit || tx.Partitions.Len() != 0 || tx.Groups != nil || tx.LastUpdateMs != h.now || tx.StartMs < 0 {
		t.Fatalf("after every marker: %+v", tx)
	}
	if len(h.m.Pending()) != 0 {
		t.Fatal("a completed transaction is still pending")
	}
	// A late duplicate (a deposed leader's) changes nothing.
	before := h.snapshot()
	wantCode(t, "duplicate", mw(true, epoch, Partitions{"u": {4}}), kerr.InvalidTxnState)
	wantCode(t, "unknown id", h.apply(&Command{MarkersWritten: &MarkersWritten{TransactionalID: "zz", Commit: true}}).Code, kerr.InvalidProducerIDMapping)
	if h.snapshot() != before {
		t.Fatal("a duplicate report changed the state")
	}
}
