package txns

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestMachine_TickAbortsTimedOut(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.ongoing("a")
	start := h.now
	h.ongoing("b")
	h.now = start + int64(timeout)
	if h.m.TickDue(h.now, week) {
		t.Fatal("a tick is due at exactly the timeout")
	}
	if r := h.tick(week); r.Aborted != nil || h.txn("a").State != StateOngoing {
		t.Fatalf("aborted at exactly the timeout: %+v", r)
	}
	wantCode(t, "add just before the timeout", h.add("b", h.txn("b").ProducerID, h.txn("b").ProducerEpoch, Partitions{"t": {7}}).Code, nil)
	h.now++
	if !h.m.TickDue(h.now, week) {
		t.Fatal("no tick due past the timeout")
	}
	r := h.tick(week)
	if !reflect.DeepEqual(r.Aborted, []string{"a", "b"}) || r.Expired != nil {
		t.Fatalf("tick past the timeout: %+v", r)
	}
	tx := h.txn("a")
	if tx.State != StatePrepareAbort || tx.ProducerEpoch != epoch+1 || tx.LastProducerEpoch != -1 || tx.LastUpdateMs != h.now || tx.Partitions.Len() != 2 {
		t.Fatalf("timed-out transaction: %+v", tx)
	}
	// The producer that timed out is fenced, as Kafka's timeout abort
	// fences it; its transaction's markers are pending.
	wantCode(t, "commit after the timeout", h.end("a", pid, epoch, true), kerr.ProducerFenced)
	wantCode(t, "abort after the timeout", h.end("a", pid, epoch, false), kerr.ProducerFenced)
	if p := h.m.Pending(); len(p) != 2 || p[0].Commit || p[0].ProducerEpoch != epoch+1 {
		t.Fatalf("pending: %+v", p)
	}
	// Prepare* does not time out again.
	h.now += 10 * int64(timeout)
	if r := h.tick(0); r.Aborted != nil {
		t.Fatalf("a preparing transaction aborted again: %+v", r)
	}
}

func TestMachine_TickExpiresIdleIDs(t *testing.T) {
	h := newHarness(t)
	h.producer("empty")
	pc, ec := h.ongoing("committed")
	h.end("committed", pc, ec, true)
	h.finish("committed")
	pa, ea := h.ongoing("aborted")
	h.end("aborted", pa, ea, false)
	h.finish("aborted")
	pp, ep := h.ongoing("preparing")
	h.end("preparing", pp, ep, true)
	// An Ongoing transaction with a timeout longer than the expiration.
	h.seed(&Txn{ID: "ongoing", ProducerID: 5, ProducerEpoch: 0, LastProducerID: 5, LastProducerEpoch: -1,
		TimeoutMs: 1<<31 - 1, State: StateOngoing, Partitions: Partitions{"t": {0}}, StartMs: h.now, LastUpdateMs: h.now})
	last := h.now
	h.now = last + week - 1
	if h.m.TickDue(h.now, week) {
		t.Fatal("expiry due a millisecond early")
	}
	h.now = last + week
	if h.m.TickDue(h.now, 0) {
		t.Fatal("expiry due with expiration disabled")
	}
	if r := h.tick(0); r.Expired != nil {
		t.Fatalf("expired with expiration disabled: %+v", r)
	}
	r := h.tick(week)
	if want := []string{"aborted", "committed", "empty"}; !reflect.DeepEqual(r.Expired, want) || r.Aborted != nil {
		t.Fatalf("tick: %+v, want expired %v", r, want)
	}
	for _, id := range []string{"aborted", "committed", "empty"} {
		if h.m.Txn(id) != nil {
			t.Fatalf("%s survived its expiry", id)
		}
		if _, code := h.m.Describe(id); code != kerr.TransactionalIDNotFound.Code {
			t.Fatalf("describe of expired %s: code %d", id, code)
		}
	}
	for _, id := range []string{"preparing", "ongoing"} {
		if h.m.Txn(id) == nil {
			t.Fatalf("%s expired with a transaction open", id)
		}
	}
	// An expired id starts over with a new producer id.
	if pid, epoch := h.producer("committed"); pid == pc || epoch != 0 {
		t.Fatalf("expired id re-initialised as producer %d epoch %d", pid, epoch)
	}
}

func TestMachine_GrantProducerIDs(t *testing.T) {
	h := newHarness(t) // granted [1000, 1100)
	for _, b := range []ProducerIDBlock{{1050, 10}, {1099, 1}, {2000, 0}, {2000, -1}, {-5, 3}, {2000, maxBlock + 1}} {
		before := h.snapshot()
		wantCode(t, "bad grant", h.apply(&Command{GrantProducerIDs: &GrantProducerIDs{b}}).Code, kerr.InvalidRequest)
		if h.snapshot() != before {
			t.Fatalf("a refused grant %+v changed the state", b)
		}
	}
	h.ok(&Command{GrantProducerIDs: &GrantProducerIDs{ProducerIDBlock{1100, 2}}})
	h.ok(&Command{GrantProducerIDs: &GrantProducerIDs{ProducerIDBlock{5000, 3}}})
	if got := h.m.FreeProducerIDs(); got != 105 {
		t.Fatalf("free ids %d, want 105", got)
	}
	seen := map[int64]bool{}
	for i := 0; i < 105; i++ {
		pid, _ := h.producer(string(rune(0x4e00 + i)))
		if seen[pid] || pid < 1000 || pid >= 1102 && pid < 5000 || pid >= 5003 {
			t.Fatalf("producer id %d handed out twice or outside the grants", pid)
		}
		seen[pid] = true
	}
	if r := h.init("one more"); !r.NeedProducerIDs {
		t.Fatalf("init past the grants: %+v", r)
	}
}

func TestMachine_Barrier(t *testing.T) {
	h := newHarness(t)
	h.ok(&Command{Barrier: &Barrier{Term: 7}})
	if got := h.m.CoordinatorEpoch(); got != 7 {
		t.Fatalf("coordinator epoch %d, want 7", got)
	}
	h.ok(&Command{Barrier: &Barrier{Term: 3}})
	if got := h.m.CoordinatorEpoch(); got != 7 {
		t.Fatalf("coordinator epoch went back to %d", got)
	}
}
