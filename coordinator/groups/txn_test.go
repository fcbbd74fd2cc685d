package groups

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func (h *harness) txnCommit(group string, pid int64, epoch int16, member string, gen int32, offsets map[int32]int64) int16 {
	req := TxnCommitRequest{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch, Group: group, Generation: gen, MemberID: member}
	for p, o := range offsets {
		req.Offsets = append(req.Offsets, CommitOffset{TopicPartition: TopicPartition{"t", p}, Offset: o, Metadata: "txn"})
	}
	return h.c.TxnCommit(req)
}

func (h *harness) offset(group string, p int32) int64 {
	h.t.Helper()
	o, ok := h.log.m.Offset(group, TopicPartition{"t", p})
	if !ok {
		return -1
	}
	return o.Offset
}

func TestCoordinator_TxnCommitPendingUntilMarker(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit bool
		want   int64
	}{
		{"commit", true, 7},
		{"abort", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.commit("g", "", -1, 3)
			if code := h.txnCommit("g", 100, 0, "", -1, map[int32]int64{0: 7, 1: 9}); code != 0 {
				t.Fatalf("txn commit: %d", code)
			}
			if got, want := h.offset("g", 0), int64(3); got != want {
				t.Fatalf("offset before the marker = %d, want %d (pending offsets are invisible)", got, want)
			}
			if got := h.log.m.Unstable("g", []TopicPartition{{"t", 0}, {"t", 2}}); !got[TopicPartition{"t", 0}] || len(got) != 1 {
				t.Fatalf("unstable = %v, want only t-0", got)
			}
			if code := h.c.TxnMarker(100, 0, tc.commit); code != 0 {
				t.Fatalf("marker: %d", code)
			}
			if got := h.offset("g", 0); got != tc.want {
				t.Fatalf("offset after the marker = %d, want %d", got, tc.want)
			}
			if got, want := h.offset("g", 1) == 9, tc.commit; got != want {
				t.Fatalf("t-1 committed = %v, want %v", got, want)
			}
			if got := h.log.m.Unstable("g", nil); len(got) != 0 {
				t.Fatalf("unstable after the marker = %v", got)
			}
		})
	}
}

func TestCoordinator_TxnMarkerOnlyItsProducer(t *testing.T) {
	h := newHarness(t, nil)
	h.txnCommit("g", 1, 0, "", -1, map[int32]int64{0: 5})
	h.txnCommit("g", 2, 0, "", -1, map[int32]int64{1: 6})
	h.txnCommit("other", 1, 0, "", -1, map[int32]int64{0: 8})
	h.c.TxnMarker(1, 0, true)
	if got := h.offset("g", 0); got != 5 {
		t.Fatalf("g t-0 = %d, want 5", got)
	}
	if got := h.offset("other", 0); got != 8 {
		t.Fatalf("other t-0 = %d, want 8: a marker completes every group of the partition", got)
	}
	if got := h.offset("g", 1); got != -1 {
		t.Fatalf("g t-1 = %d, want nothing: producer 2's transaction is open", got)
	}
	if got := len(h.log.m.Pending("g")); got != 1 {
		t.Fatalf("g has %d pending producers, want 1", got)
	}
}

func TestCoordinator_TxnCommitLaterCommitWins(t *testing.T) {
	h := newHarness(t, nil)
	h.txnCommit("g", 1, 0, "", -1, map[int32]int64{0: 5})
	h.commit("g", "", -1, 9) // written after the transaction's offset
	h.c.TxnMarker(1, 0, true)
	if got := h.offset("g", 0); got != 9 {
		t.Fatalf("t-0 = %d, want 9: the later plain commit stays", got)
	}
	h.txnCommit("g", 1, 0, "", -1, map[int32]int64{0: 11})
	h.c.TxnMarker(1, 0, true)
	if got := h.offset("g", 0); got != 11 {
		t.Fatalf("t-0 = %d, want 11: the transaction's offset is newer", got)
	}
}

func TestCoordinator_TxnCommitChecks(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	for _, tc := range []struct {
		name   string
		group  string
		member string
		gen    int32
		epoch  int16
		want   *kerr.Error
	}{
		{"member of the generation", "g", ids[0], gen, 3, nil},
		{"stale generation", "g", ids[0], gen - 1, 3, kerr.IllegalGeneration},
		{"unknown member", "g", "nobody", gen, 3, kerr.UnknownMemberID},
		{"no member (v0-v2)", "g", "", -1, 3, nil},
		{"fenced epoch", "g", ids[0], gen, 2, kerr.InvalidProducerEpoch},
		{"empty group id", "", "", -1, 3, kerr.InvalidGroupID},
		{"new group with a member", "new", "m", 1, 3, kerr.UnknownMemberID},
		{"new group with a generation", "new", "", 1, 3, kerr.IllegalGeneration},
		{"new group at generation 0", "new0", "", 0, 3, nil},
		{"fenced epoch in another group", "new1", "", -1, 0, kerr.InvalidProducerEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.snapshot()
			code := h.txnCommit(tc.group, 100, tc.epoch, tc.member, tc.gen, map[int32]int64{0: 1})
			if want := int16(0); tc.want != nil {
				want = tc.want.Code
				if code != want {
					t.Fatalf("code %d, want %d", code, want)
				}
				if h.snapshot() != before {
					t.Fatal("a refused commit changed the state")
				}
			} else if code != want {
				t.Fatalf("code %d, want 0", code)
			}
		})
	}
	// Apply checks again: a proposal made before a rebalance is refused.
	cmd := &Command{TxnCommit: &TxnCommit{Group: "g", ProducerID: 100, ProducerEpoch: 1, Generation: gen, MemberID: ids[0],
		Offsets: []CommitOffset{{TopicPartition: TopicPartition{"t", 0}, Offset: 1}}}}
	if r := h.log.m.st.apply(cmd, 99); r.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("apply of a fenced epoch: %d", r.Code)
	}
}

func TestCoordinator_TxnPendingKeepsGroupFromExpiring(t *testing.T) {
	h := newHarness(t, nil)
	h.txnCommit("g", 1, 0, "", -1, map[int32]int64{0: 5})
	h.clk.advance(8 * 24 * 3600e9)
	h.c.cfg.ExpireInterval = 1
	h.c.Tick()
	if h.log.m.Group("g") == nil || len(h.log.m.Pending("g")) != 1 {
		t.Fatal("a group with pending transactional offsets expired")
	}
	if h.log.m.wouldExpire(h.clk.Now().UnixMilli(), 1) {
		t.Fatal("wouldExpire is true for a group kept by its pending offsets: Expire would be proposed forever")
	}
	h.c.TxnMarker(1, 0, false)
	if h.log.m.Group("g") != nil {
		t.Fatal("an aborted transaction left an empty group without offsets")
	}
	// DeleteGroups deletes an empty group whatever it has pending, as Kafka.
	h.txnCommit("d", 1, 0, "", -1, map[int32]int64{0: 5})
	if codes := h.c.DeleteGroups([]string{"d"}); codes["d"] != 0 {
		t.Fatalf("delete: %v", codes)
	}
	h.c.TxnMarker(1, 0, true)
	if h.log.m.Group("d") != nil || h.offset("d", 0) != -1 {
		t.Fatal("a marker revived a deleted group")
	}
}

func TestCoordinator_TxnZombieAfterMarker(t *testing.T) {
	h := newHarness(t, nil)
	h.txnCommit("g", 1, 0, "", -1, map[int32]int64{0: 5})
	// InitProducerId bumped the epoch and aborted: the marker carries 1.
	h.c.TxnMarker(1, 1, false)
	if code := h.txnCommit("g", 1, 0, "", -1, map[int32]int64{1: 9}); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie after its abort: %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if got := h.log.m.Unstable("g", nil); len(got) != 0 {
		t.Fatalf("a zombie's offsets are pending: %v", got)
	}
	if code := h.txnCommit("g", 1, 1, "", -1, map[int32]int64{1: 9}); code != 0 {
		t.Fatalf("the current epoch: %d", code)
	}
	h.c.TxnMarker(1, 1, true)
	// The producer is forgotten a retention after it was last seen.
	h.clk.advance(h.c.cfg.OffsetsRetention)
	if !h.log.m.wouldExpire(h.clk.Now().UnixMilli(), h.c.cfg.OffsetsRetention.Milliseconds()) {
		t.Fatal("an idle producer does not make Expire due")
	}
	h.log.m.st.apply(&Command{Expire: &Expire{NowMs: h.clk.Now().UnixMilli(), RetentionMs: h.c.cfg.OffsetsRetention.Milliseconds()}}, 1000)
	if _, ok := h.log.m.Producer(1); ok {
		t.Fatal("an idle producer outlived the retention")
	}
}

func TestMachine_TxnSnapshotKeepsPending(t *testing.T) {
	h := newHarness(t, nil)
	h.txnCommit("g", 1, 4, "", -1, map[int32]int64{0: 5, 1: 6})
	h.txnCommit("g", 2, 0, "", -1, map[int32]int64{2: 7})
	snap := h.snapshot()
	st, err := decodeSnapshot([]byte(snap))
	if err != nil {
		t.Fatal(err)
	}
	m := &Machine{st: st}
	if got := m.Pending("g"); len(got) != 2 || got[1].ProducerEpoch != 4 || got[1].Offsets[TopicPartition{"t", 1}].Offset != 6 {
		t.Fatalf("restored pending = %+v", got)
	}
	if p, ok := m.Producer(1); !ok || p.Epoch != 4 {
		t.Fatalf("restored producer 1 = %+v %v, want epoch 4", p, ok)
	}
	if b, _ := m.Snapshot(); string(b) != snap {
		t.Fatalf("snapshot of the restored state differs:\n%s\n%s", b, snap)
	}
}

func TestCheckTxnCommit(t *testing.T) {
	g := &Group{Name: "g", Phase: PhaseCompleting, Generation: 4, Members: map[string]*Member{
		"m1": {ID: "m1", InstanceID: "i1"}, "m2": {ID: "m2"}}}
	for _, tc := range []struct {
		name     string
		gen      int32
		member   string
		instance string
		want     *kerr.Error
	}{
		{"member during CompletingRebalance", 4, "m2", "", nil},
		{"static member", 4, "m1", "i1", nil},
		{"fenced instance", 4, "m2", "i1", kerr.FencedInstanceID},
		{"unknown member", 4, "m9", "", kerr.UnknownMemberID},
		{"stale generation", 3, "m2", "", kerr.IllegalGeneration},
		{"no member in a group with members", -1, "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := int16(0)
			if tc.want != nil {
				want = tc.want.Code
			}
			if got := CheckTxnCommit(g, tc.gen, tc.member, tc.instance); got != want {
				t.Fatalf("code %d, want %d", got, want)
			}
		})
	}
}
