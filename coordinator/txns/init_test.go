package txns

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestMachine_InitProducerIDRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    InitProducerID
		want *kerr.Error
	}{
		{"empty transactional id", InitProducerID{TimeoutMs: timeout, MaxTimeoutMs: maxTO, ProducerID: -1, ProducerEpoch: -1}, kerr.InvalidRequest},
		{"zero timeout", InitProducerID{TransactionalID: "a", MaxTimeoutMs: maxTO, ProducerID: -1, ProducerEpoch: -1}, kerr.InvalidTransactionTimeout},
		{"timeout above the max", InitProducerID{TransactionalID: "a", TimeoutMs: maxTO + 1, MaxTimeoutMs: maxTO, ProducerID: -1, ProducerEpoch: -1}, kerr.InvalidTransactionTimeout},
		{"producer id without epoch", InitProducerID{TransactionalID: "a", TimeoutMs: timeout, MaxTimeoutMs: maxTO, ProducerID: 5, ProducerEpoch: -1}, kerr.InvalidRequest},
		{"epoch without producer id", InitProducerID{TransactionalID: "a", TimeoutMs: timeout, MaxTimeoutMs: maxTO, ProducerID: -1, ProducerEpoch: 3}, kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			before := h.snapshot()
			c := tc.c
			r := h.apply(&Command{InitProducerID: &c})
			wantCode(t, "init", r.Code, tc.want)
			if r.ProducerID != -1 || r.ProducerEpoch != -1 {
				t.Fatalf("refused init answered producer %d epoch %d, want -1 -1", r.ProducerID, r.ProducerEpoch)
			}
			if h.snapshot() != before {
				t.Fatal("a refused init changed the state")
			}
		})
	}
}

func TestMachine_InitProducerIDNewAndBump(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.producer("a")
	if pid != 1000 || epoch != 0 {
		t.Fatalf("first init: producer %d epoch %d, want 1000 0", pid, epoch)
	}
	tx := h.txn("a")
	if tx.State != StateEmpty || tx.StartMs != -1 || tx.TimeoutMs != timeout || tx.LastUpdateMs != h.now || tx.LastProducerEpoch != -1 {
		t.Fatalf("after the first init: %+v", tx)
	}
	if pid2, _ := h.producer("b"); pid2 != 1001 {
		t.Fatalf("second id got producer %d, want 1001", pid2)
	}
	// Empty → Empty: same producer id, next epoch; no retry epoch kept.
	h.now += 10
	if pid2, epoch2 := h.producer("a"); pid2 != pid || epoch2 != 1 {
		t.Fatalf("re-init: producer %d epoch %d, want %d 1", pid2, epoch2, pid)
	}
	if tx := h.txn("a"); tx.LastProducerEpoch != -1 || tx.LastProducerID != pid || tx.LastUpdateMs != h.now {
		t.Fatalf("after re-init: %+v", tx)
	}
	// Complete* → Empty at the next epoch, with a new timeout.
	for _, commit := range []bool{true, false} {
		pid, epoch := h.ongoing("a")
		wantCode(t, "end", h.end("a", pid, epoch, commit), nil)
		wantCode(t, "markers", h.finish("a"), nil)
		r := h.apply(&Command{InitProducerID: &InitProducerID{TransactionalID: "a", TimeoutMs: 5000, MaxTimeoutMs: maxTO,
			ProducerID: -1, ProducerEpoch: -1, NowMs: h.now}})
		if r.Code != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
			t.Fatalf("init after complete (commit %v): %+v, want producer %d epoch %d", commit, r, pid, epoch+1)
		}
		if tx := h.txn("a"); tx.State != StateEmpty || tx.TimeoutMs != 5000 || tx.Partitions.Len() != 0 || tx.StartMs != -1 {
			t.Fatalf("after init: %+v", tx)
		}
	}
}

func TestMachine_InitProducerIDWithoutProducerIDs(t *testing.T) {
	h := newHarness(t)
	h.ok(&Command{GrantProducerIDs: &GrantProducerIDs{ProducerIDBlock{Start: 5000, Count: 1}}})
	for i := 0; i < 101; i++ { // the harness's 100 ids and this one
		h.producer(string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	before := h.snapshot()
	r := h.init("late")
	wantCode(t, "init with no ids left", r.Code, kerr.CoordinatorLoadInProgress)
	if !r.NeedProducerIDs || h.snapshot() != before {
		t.Fatalf("init with no ids: %+v, state changed %v", r, h.snapshot() != before)
	}
	if got := h.m.FreeProducerIDs(); got != 0 {
		t.Fatalf("free ids %d, want 0", got)
	}
	h.ok(&Command{GrantProducerIDs: &GrantProducerIDs{ProducerIDBlock{Start: 9000, Count: 10}}})
	if pid, _ := h.producer("late"); pid != 9000 {
		t.Fatalf("after a grant: producer %d, want 9000", pid)
	}
}

func TestMachine_InitProducerIDFencesOngoing(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.ongoing("a")
	h.addOffsets("a", pid, epoch, "g")
	h.now += 100
	// The new producer's init aborts the zombie's transaction at a bumped
	// epoch and is told to retry.
	r := h.init("a")
	wantCode(t, "init over an ongoing transaction", r.Code, kerr.ConcurrentTransactions)
	tx := h.txn("a")
	if tx.State != StatePrepareAbort || tx.ProducerEpoch != epoch+1 || tx.ProducerID != pid || tx.LastProducerEpoch != -1 {
		t.Fatalf("after fencing: %+v", tx)
	}
	if tx.Partitions.Len() != 2 || len(tx.Groups) != 1 || tx.LastUpdateMs != h.now {
		t.Fatalf("the aborted transaction lost its partitions or groups: %+v", tx)
	}
	p := h.m.Pending()
	if len(p) != 1 || p[0].Commit || p[0].ProducerEpoch != epoch+1 || p[0].Partitions.Len() != 2 || len(p[0].Groups) != 1 {
		t.Fatalf("pending: %+v", p)
	}
	// The zombie is fenced everywhere.
	wantCode(t, "zombie add", h.add("a", pid, epoch, Partitions{"t": {2}}).Code, kerr.ProducerFenced)
	wantCode(t, "zombie commit", h.end("a", pid, epoch, true), kerr.ProducerFenced)
	wantCode(t, "zombie offsets", h.addOffsets("a", pid, epoch, "g2"), kerr.ProducerFenced)
	// Retries wait for the markers.
	wantCode(t, "retry while aborting", h.init("a").Code, kerr.ConcurrentTransactions)
	wantCode(t, "markers", h.finish("a"), nil)
	if tx := h.txn("a"); tx.State != StateCompleteAbort || tx.Partitions.Len() != 0 || tx.Groups != nil {
		t.Fatalf("after the markers: %+v", tx)
	}
	r = h.init("a")
	if r.Code != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+2 {
		t.Fatalf("retried init: %+v, want producer %d epoch %d", r, pid, epoch+2)
	}
	wantCode(t, "old epoch after the bump", h.add("a", pid, epoch+1, Partitions{"t": {0}}).Code, kerr.ProducerFenced)
	wantCode(t, "new epoch", h.add("a", pid, epoch+2, Partitions{"t": {0}}).Code, nil)
}

func TestMachine_InitProducerIDWhilePreparing(t *testing.T) {
	for _, commit := range []bool{true, false} {
		h := newHarness(t)
		pid, epoch := h.ongoing("a")
		wantCode(t, "end", h.end("a", pid, epoch, commit), nil)
		before := h.snapshot()
		wantCode(t, "init while preparing", h.init("a").Code, kerr.ConcurrentTransactions)
		wantCode(t, "KIP-360 init while preparing", h.initAs("a", pid, epoch).Code, kerr.ConcurrentTransactions)
		if h.snapshot() != before {
			t.Fatal("init while preparing changed the state")
		}
	}
}

// TestMachine_InitProducerIDRecovery is KIP-360: a producer presents its
// id and epoch to bump its epoch after an abortable error.
func TestMachine_InitProducerIDRecovery(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.producer("a")
	r := h.initAs("a", pid, epoch)
	if r.Code != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
		t.Fatalf("recovery: %+v", r)
	}
	if tx := h.txn("a"); tx.LastProducerEpoch != epoch {
		t.Fatalf("recovery kept last epoch %d, want %d", tx.LastProducerEpoch, epoch)
	}
	// The same request retried (its answer lost) gets the same answer.
	before := h.snapshot()
	if r2 := h.initAs("a", pid, epoch); !reflect.DeepEqual(r2, r) {
		t.Fatalf("retried recovery: %+v, want %+v", r2, r)
	}
	if h.snapshot() != before {
		t.Fatal("a retried recovery changed the state")
	}
	for _, tc := range []struct {
		name  string
		pid   int64
		epoch int16
	}{
		{"an epoch neither current nor last", pid, epoch + 5},
		{"another producer id", pid + 1, epoch + 1},
	} {
		wantCode(t, tc.name, h.initAs("a", tc.pid, tc.epoch).Code, kerr.ProducerFenced)
	}
	// A plain init forgets the last epoch: the old one is fenced.
	h.producer("a")
	wantCode(t, "recovery after another producer's init", h.initAs("a", pid, epoch).Code, kerr.ProducerFenced)
	// An unknown id with a presented producer gets a fresh one.
	r = h.initAs("new", 77, 3)
	if r.Code != 0 || r.ProducerEpoch != 0 || r.ProducerID == 77 {
		t.Fatalf("recovery of an unknown id: %+v", r)
	}
}

func TestMachine_InitProducerIDEpochOverflow(t *testing.T) {
	exhausted := func(h *harness, epoch int16) {
		h.seed(&Txn{ID: "a", ProducerID: 7, ProducerEpoch: epoch, LastProducerID: 7, LastProducerEpoch: -1,
			TimeoutMs: timeout, State: StateCompleteCommit, StartMs: t0 - 5, LastUpdateMs: t0})
	}
	t.Run("the last epoch a client gets", func(t *testing.T) {
		h := newHarness(t)
		exhausted(h, maxEpoch-2)
		if r := h.init("a"); r.ProducerID != 7 || r.ProducerEpoch != maxEpoch-1 {
			t.Fatalf("init at epoch %d: %+v", maxEpoch-2, r)
		}
	})
	t.Run("rotation", func(t *testing.T) {
		h := newHarness(t)
		exhausted(h, maxEpoch-1)
		r := h.init("a")
		if r.Code != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
			t.Fatalf("init at an exhausted epoch: %+v, want producer 1000 epoch 0", r)
		}
		if tx := h.txn("a"); tx.LastProducerID != 7 || tx.LastProducerEpoch != -1 || tx.State != StateEmpty {
			t.Fatalf("after rotation: %+v", tx)
		}
		wantCode(t, "the old producer id", h.add("a", 7, maxEpoch-1, Partitions{"t": {0}}).Code, kerr.InvalidProducerIDMapping)
	})
	t.Run("KIP-360 rotation and its retry", func(t *testing.T) {
		h := newHarness(t)
		exhausted(h, maxEpoch-1)
		r := h.initAs("a", 7, maxEpoch-1)
		if r.Code != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
			t.Fatalf("recovery at an exhausted epoch: %+v", r)
		}
		if tx := h.txn("a"); tx.LastProducerID != 7 || tx.LastProducerEpoch != maxEpoch-1 {
			t.Fatalf("after rotation: %+v", tx)
		}
		if r2 := h.initAs("a", 7, maxEpoch-1); !reflect.DeepEqual(r2, r) {
			t.Fatalf("retried rotation: %+v, want %+v", r2, r)
		}
		if free := h.m.FreeProducerIDs(); free != 99 {
			t.Fatalf("the retry took another id: %d free", free)
		}
	})
	t.Run("a retried bump to the last epoch", func(t *testing.T) {
		// Kafka's prepareIncrementProducerEpoch throws here; the retry of
		// the KIP-360 bump that reached the exhausted epoch gets its answer
		// again, and any other epoch is fenced.
		h := newHarness(t)
		exhausted(h, maxEpoch-2)
		r := h.initAs("a", 7, maxEpoch-2)
		if r.Code != 0 || r.ProducerID != 7 || r.ProducerEpoch != maxEpoch-1 {
			t.Fatalf("bump to the last epoch: %+v", r)
		}
		if r2 := h.initAs("a", 7, maxEpoch-2); !reflect.DeepEqual(r2, r) {
			t.Fatalf("its retry: %+v, want %+v", r2, r)
		}
		wantCode(t, "a stale epoch", h.initAs("a", 7, 12).Code, kerr.ProducerFenced)
	})
	t.Run("rotation without producer ids", func(t *testing.T) {
		h := newHarness(t)
		h.m.mu.Lock()
		h.m.st.free = nil
		h.m.mu.Unlock()
		exhausted(h, maxEpoch-1)
		before := h.snapshot()
		if r := h.init("a"); !r.NeedProducerIDs || r.Code != kerr.CoordinatorLoadInProgress.Code {
			t.Fatalf("rotation with no ids: %+v", r)
		}
		if h.snapshot() != before {
			t.Fatal("a rotation without ids changed the state")
		}
	})
	t.Run("fencing the last epoch", func(t *testing.T) {
		h := newHarness(t)
		h.seed(&Txn{ID: "a", ProducerID: 7, ProducerEpoch: maxEpoch - 1, LastProducerID: 7, LastProducerEpoch: -1,
			TimeoutMs: timeout, State: StateOngoing, Partitions: Partitions{"t": {0}}, StartMs: t0, LastUpdateMs: t0})
		wantCode(t, "init over ongoing", h.init("a").Code, kerr.ConcurrentTransactions)
		if tx := h.txn("a"); tx.ProducerEpoch != maxEpoch || tx.State != StatePrepareAbort {
			t.Fatalf("fence at the last epoch: %+v", tx)
		}
		wantCode(t, "markers", h.finish("a"), nil)
		if r := h.init("a"); r.Code != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
			t.Fatalf("init after fencing the last epoch: %+v", r)
		}
	})
}
