package txns

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomCommand is a plausible command on a few ids, with producer ids
// and epochs near the real ones, so that most transitions happen.
func randomCommand(r *rand.Rand, h *harness) *Command {
	id := fmt.Sprintf("id-%d", r.IntN(4))
	pid, epoch := int64(r.IntN(3)+1000), int16(r.IntN(3))
	if t := h.m.Txn(id); t != nil && r.IntN(4) > 0 {
		pid, epoch = t.ProducerID, t.ProducerEpoch
	}
	parts := Partitions{"t": {int32(r.IntN(3))}, "u": {int32(r.IntN(2))}}
	h.now += int64(r.IntN(3_000))
	switch r.IntN(10) {
	case 0:
		c := &InitProducerID{TransactionalID: id, TimeoutMs: timeout, MaxTimeoutMs: maxTO, ProducerID: -1, ProducerEpoch: -1, NowMs: h.now}
		if r.IntN(3) == 0 {
			c.ProducerID, c.ProducerEpoch = pid, epoch-int16(r.IntN(2))
		}
		return &Command{InitProducerID: c}
	case 1, 2, 3:
		return &Command{AddPartitions: &AddPartitions{NowMs: h.now, Txns: []AddTxn{
			{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, VerifyOnly: r.IntN(4) == 0, Partitions: parts}}}}
	case 4:
		return &Command{AddOffsets: &AddOffsets{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Group: fmt.Sprintf("g%d", r.IntN(2)), NowMs: h.now}}
	case 5, 8:
		return &Command{EndTxn: &EndTxn{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: r.IntN(2) == 0, NowMs: h.now}}
	case 6, 7:
		for _, p := range h.m.Pending() {
			if r.IntN(2) == 0 {
				return &Command{MarkersWritten: &MarkersWritten{TransactionalID: p.TransactionalID, ProducerID: p.ProducerID,
					ProducerEpoch: p.ProducerEpoch, Commit: p.Commit, Partitions: Partitions{"t": p.Partitions["t"]}, Groups: p.Groups, NowMs: h.now}}
			}
		}
		return &Command{MarkersWritten: &MarkersWritten{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: r.IntN(2) == 0,
			Partitions: parts, NowMs: h.now}}
	}
	if r.IntN(10) == 0 {
		return &Command{GrantProducerIDs: &GrantProducerIDs{ProducerIDBlock{Start: h.m.st.granted + int64(r.IntN(3)), Count: 5}}}
	}
	return &Command{Tick: &Tick{NowMs: h.now, ExpirationMs: 400_000}}
}

// checkInvariants asserts doc.go's invariants over the whole state, and
// that producer epochs only grow against prev (the state before).
func checkInvariants(t *testing.T, h *harness, prev map[string]*Txn, handed map[int64]string) {
	t.Helper()
	for _, tx := range h.m.Txns() {
		norm, ok := tx.Partitions.normalized()
		switch {
		case !tx.State.valid():
			t.Fatalf("%s stored in state %q", tx.ID, tx.State)
		case !ok || norm.Len() != tx.Partitions.Len() || !slices.IsSorted(tx.Groups) || len(slices.Compact(slices.Clone(tx.Groups))) != len(tx.Groups):
			t.Fatalf("%s: partitions or groups not a sorted set: %+v", tx.ID, tx)
		case tx.State == StateEmpty && (tx.Partitions.Len() > 0 || len(tx.Groups) > 0 || tx.StartMs != -1):
			t.Fatalf("%s: Empty with a transaction: %+v", tx.ID, tx)
		case (tx.State == StateCompleteCommit || tx.State == StateCompleteAbort) && (tx.Partitions.Len() > 0 || len(tx.Groups) > 0):
			t.Fatalf("%s: complete with partitions: %+v", tx.ID, tx)
		case tx.ProducerEpoch < 0 || tx.ProducerEpoch > maxEpoch:
			t.Fatalf("%s: epoch %d", tx.ID, tx.ProducerEpoch)
		}
		if owner, ok := handed[tx.ProducerID]; ok && owner != tx.ID {
			t.Fatalf("producer id %d handed to %s and %s", tx.ProducerID, owner, tx.ID)
		}
		handed[tx.ProducerID] = tx.ID
		if p := prev[tx.ID]; p != nil && p.ProducerID == tx.ProducerID && tx.ProducerEpoch < p.ProducerEpoch {
			t.Fatalf("%s: epoch went back from %d to %d", tx.ID, p.ProducerEpoch, tx.ProducerEpoch)
		}
		if p := prev[tx.ID]; p != nil && p.State.preparing() && (tx.ProducerID != p.ProducerID || tx.ProducerEpoch != p.ProducerEpoch) {
			t.Fatalf("%s: producer changed while preparing: %+v → %+v", tx.ID, p, tx)
		}
	}
}

func TestMachine_InvariantsUnderRandomCommands(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		h := newHarness(t)
		r := rand.New(rand.NewPCG(seed, 26))
		handed := map[int64]string{}
		states := map[State]bool{}
		for i := 0; i < 1500; i++ {
			prev := map[string]*Txn{}
			for _, tx := range h.m.Txns() {
				prev[tx.ID] = tx
			}
			h.apply(randomCommand(r, h))
			checkInvariants(t, h, prev, handed)
			for _, tx := range h.m.Txns() {
				states[tx.State] = true
			}
		}
		if len(states) != 6 {
			t.Fatalf("seed %d reached only %v", seed, states)
		}
		replay := NewMachine()
		for _, e := range h.log {
			_, _ = replay.Apply(e)
		}
		if got := string(snapshotOf(t, replay)); got != h.snapshot() {
			t.Fatalf("seed %d: replay differs", seed)
		}
	}
}
