package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/raftgroup"
)

// produceEntry is the raft entry a proposal of ProduceParts(batch)
// becomes: its parts joined, as raftgroup.Group.Propose joins them.
func produceEntry(batch []byte) []byte {
	return bytes.Join(ProduceParts(batch), nil)
}

// replicaHarness applies entries to a Replica as a raft group would.
type replicaHarness struct {
	t     *testing.T
	r     *Replica
	dir   string
	index uint64
}

func newReplicaHarness(t *testing.T) *replicaHarness {
	t.Helper()
	h := &replicaHarness{t: t, dir: filepath.Join(t.TempDir(), "p-0")}
	h.open()
	return h
}

func (h *replicaHarness) open() {
	h.t.Helper()
	r, err := OpenReplica(ReplicaConfig{Dir: h.dir, Log: DefaultConfig()})
	if err != nil {
		h.t.Fatal(err)
	}
	h.r = r
	h.t.Cleanup(func() { _ = r.Close() })
	h.index = r.Applied()
}

func (h *replicaHarness) apply(term uint64, data []byte) any {
	h.t.Helper()
	h.index++
	res, err := h.r.Apply(raftgroup.Entry{Index: h.index, Term: term, Data: data})
	if err != nil {
		h.t.Fatalf("apply %d: %v", h.index, err)
	}
	return res
}

func (h *replicaHarness) produce(term uint64, batch []byte) *ProduceResult {
	h.t.Helper()
	return h.apply(term, produceEntry(batch)).(*ProduceResult)
}

func plainBatch(t testing.TB, values ...string) []byte {
	return idemBatch(t, -1, 0, 0, values...)
}

func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	var recs []testRecord
	for _, v := range values {
		recs = append(recs, testRecord{ts: 1000, value: []byte(v)})
	}
	return makeBatch(t, batchSpec{records: recs, producerID: pid, producerEpoch: epoch, baseSequence: seq})
}

func TestReplica_AssignsOffsetsAndEpochs(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil) // leader no-op of term 1
	if r := h.produce(1, plainBatch(t, "a", "b")); r.Err != nil || r.Base != 0 || r.Last != 1 {
		t.Fatalf("first batch: %+v", r)
	}
	h.apply(3, nil)
	if r := h.produce(3, plainBatch(t, "c")); r.Base != 2 {
		t.Fatalf("second batch at %d, want 2", r.Base)
	}
	if hw := h.r.Log().HighWatermark(); hw != 3 {
		t.Errorf("high watermark %d, want 3", hw)
	}
	b, err := h.r.Log().Read(2, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := ParseBatchHeader(b)
	if info.LeaderEpoch != 3 || info.BaseOffset != 2 {
		t.Errorf("stored batch has epoch %d base %d, want 3 and 2", info.LeaderEpoch, info.BaseOffset)
	}
	cases := []struct {
		ask       int32
		wantEpoch int32
		wantEnd   int64
	}{{1, 1, 2}, {2, 1, 2}, {3, 3, 3}, {0, 0, 0}, {9, -1, -1}}
	for _, c := range cases {
		if e, end := h.r.EndOffsetFor(c.ask); e != c.wantEpoch || end != c.wantEnd {
			t.Errorf("EndOffsetFor(%d) = %d/%d, want %d/%d", c.ask, e, end, c.wantEpoch, c.wantEnd)
		}
	}
}

func TestReplica_IdempotentProducer(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	first := h.produce(1, idemBatch(t, 5, 0, 0, "a", "b"))
	dup := h.produce(1, idemBatch(t, 5, 0, 0, "a", "b"))
	if !dup.Duplicate || dup.Base != first.Base || dup.Last != first.Last {
		t.Errorf("retry of the first batch: %+v, want a duplicate at %d", dup, first.Base)
	}
	if r := h.produce(1, idemBatch(t, 5, 0, 5, "x")); !errors.Is(r.Err, kerr.OutOfOrderSequenceNumber) {
		t.Errorf("sequence gap: %v", r.Err)
	}
	if r := h.produce(1, idemBatch(t, 5, 1, 3, "x")); !errors.Is(r.Err, kerr.OutOfOrderSequenceNumber) {
		t.Errorf("new epoch not at sequence 0: %v", r.Err)
	}
	if r := h.produce(1, idemBatch(t, 5, 1, 0, "y")); r.Err != nil || r.Base != 2 {
		t.Errorf("new epoch at sequence 0: %+v", r)
	}
	if r := h.produce(1, idemBatch(t, 5, 0, 2, "z")); !errors.Is(r.Err, kerr.InvalidProducerEpoch) {
		t.Errorf("old epoch: %v", r.Err)
	}
	if hw := h.r.Log().HighWatermark(); hw != 3 {
		t.Errorf("high watermark %d, want 3: refused batches must not append", hw)
	}
}

func TestReplica_OnlyFiveBatchesAreRemembered(t *testing.T) {
	h := newReplicaHarness(t)
	for i := range 7 {
		h.produce(1, idemBatch(t, 9, 0, int32(i), fmt.Sprint(i)))
	}
	if r := h.produce(1, idemBatch(t, 9, 0, 2, "2")); !r.Duplicate || r.Base != 2 {
		t.Errorf("batch 2 of 7 should still be a known duplicate: %+v", r)
	}
	if r := h.produce(1, idemBatch(t, 9, 0, 1, "1")); r.Duplicate || r.Err == nil {
		t.Errorf("batch 1 of 7 is past the five remembered; got %+v", r)
	}
}

func TestReplica_ReopenCutsBackToCheckpoint(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	h.produce(1, idemBatch(t, 3, 0, 0, "a"))
	if _, err := h.r.Snapshot(); err != nil { // checkpoint at index 2, offset 1
		t.Fatal(err)
	}
	h.produce(1, idemBatch(t, 3, 0, 1, "b"))
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
	h.open()
	if got := h.r.Applied(); got != 2 {
		t.Fatalf("Applied() = %d after reopen, want the checkpoint's 2", got)
	}
	if end := h.r.Log().EndOffset(); end != 1 {
		t.Fatalf("log ends at %d after reopen, want 1 (raft replays the rest)", end)
	}
	// The replay of entry 3 appends it again, at the same offset.
	if r := h.produce(1, idemBatch(t, 3, 0, 1, "b")); r.Err != nil || r.Duplicate || r.Base != 1 {
		t.Fatalf("replayed entry: %+v", r)
	}
}

// A log start moved past the checkpoint (DeleteRecords or retention
// applied since the last snapshot) does not keep the replica from
// reopening: it restarts its log at the checkpoint, and the replay of the
// entries after it, the move included, brings it back to the same state.
func TestReplica_ReopenAfterStartPassedCheckpoint(t *testing.T) {
	for _, snapshotFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshotFirst), func(t *testing.T) {
			h := newReplicaHarness(t)
			var log [][]byte
			apply := func(data []byte) { log = append(log, data); h.apply(1, data) }
			apply(nil)
			apply(produceEntry(plainBatch(t, "a", "b")))
			cpIndex := uint64(0) // no checkpoint yet
			if snapshotFirst {
				if _, err := h.r.Snapshot(); err != nil { // checkpoint at offset 2
					t.Fatal(err)
				}
				cpIndex = h.r.Applied()
			}
			apply(produceEntry(plainBatch(t, "c", "d", "e")))
			apply(AdvanceStartEntry(4))
			want := replicaImage(t, h.r)
			if err := h.r.Close(); err != nil {
				t.Fatal(err)
			}
			h.open()
			if got := h.r.Applied(); got != cpIndex {
				t.Fatalf("reopened at entry %d, want the checkpoint's %d", got, cpIndex)
			}
			for _, data := range log[cpIndex:] {
				h.apply(1, data)
			}
			got := replicaImage(t, h.r)
			if got.start != 4 || got.end != 5 || got.hw != 5 || !bytes.HasSuffix(want.log, got.log) || len(got.log) == 0 {
				t.Fatalf("after the replay: start %d end %d hw %d, %d log bytes; want 4, 5, 5 and the last records as before (%d bytes)",
					got.start, got.end, got.hw, len(got.log), len(want.log))
			}
		})
	}
}

func TestReplica_SnapshotTransfer(t *testing.T) {
	leader := newReplicaHarness(t)
	leader.apply(2, nil)
	for i := range 20 {
		leader.produce(2, idemBatch(t, 1, 0, int32(i), fmt.Sprint(i)))
	}
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
	follower.produce(1, plainBatch(t, "stale"))
	if err := follower.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	if got := follower.r.Log().HighWatermark(); got != 1 {
		t.Fatalf("staged data went live before Restore: high watermark %d", got)
	}
	if err := follower.r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	fl, ll := follower.r.Log(), leader.r.Log()
	if fl.StartOffset() != ll.StartOffset() || fl.EndOffset() != ll.EndOffset() || fl.HighWatermark() != 20 {
		t.Fatalf("follower log [%d, %d) hw %d, leader [%d, %d)", fl.StartOffset(), fl.EndOffset(), fl.HighWatermark(), ll.StartOffset(), ll.EndOffset())
	}
	want, _ := ll.Read(ll.StartOffset(), 1<<20, 20)
	got, _ := fl.Read(fl.StartOffset(), 1<<20, 20)
	if !bytes.Equal(got, want) {
		t.Error("follower batches differ from the leader's")
	}
	if r := follower.produce(2, idemBatch(t, 1, 0, 19, "19")); !r.Duplicate {
		t.Errorf("producer state did not travel with the snapshot: %+v", r)
	}
	follower.index = leader.index
	if err := follower.r.Close(); err != nil {
		t.Fatal(err)
	}
	follower.open()
	if follower.r.Applied() != leader.index || follower.r.Log().EndOffset() != 20 {
		t.Errorf("after reopen: applied %d end %d", follower.r.Applied(), follower.r.Log().EndOffset())
	}
}

func TestReplica_StagedSnapshotSurvivesRestart(t *testing.T) {
	leader := newReplicaHarness(t)
	leader.produce(1, plainBatch(t, "a", "b", "c"))
	data, _ := leader.r.Snapshot()
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1))}}
	body, _ := leader.r.SnapshotBody(snap)
	f := newReplicaHarness(t)
	if err := f.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	_ = f.r.Close() // crash after raft saved the snapshot, before Restore
	f.open()
	if err := f.r.Restore(snap); err != nil {
		t.Fatalf("restore after restart: %v", err)
	}
	if f.r.Log().EndOffset() != 3 {
		t.Errorf("end %d, want 3", f.r.Log().EndOffset())
	}
}

func TestReplica_CorruptSnapshotBodyIsRefused(t *testing.T) {
	leader := newReplicaHarness(t)
	leader.produce(1, plainBatch(t, "a", "b"))
	data, _ := leader.r.Snapshot()
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1))}}
	body, _ := leader.r.SnapshotBody(snap)
	raw, _ := io.ReadAll(body)
	f := newReplicaHarness(t)
	for _, cut := range []int{5, snapHeaderSize + 20, len(raw) - 1} {
		if err := f.r.ReceiveSnapshot(snap, bytes.NewReader(raw[:cut])); err == nil {
			t.Errorf("a body cut at %d of %d bytes was accepted", cut, len(raw))
		}
	}
	if matches, _ := filepath.Glob(f.dir + ".snap-*"); len(matches) != 0 {
		t.Errorf("failed stagings left %v behind", matches)
	}
	if _, err := os.Stat(f.dir); err != nil {
		t.Error(err)
	}
}

// A snapshot captured before later applies describes the captured state
// even when it is persisted after them: raft records it at the captured
// index, so a restart must come back exactly there.
func TestReplica_PreparedSnapshotPersistsTheCapturedState(t *testing.T) {
	h := newReplicaHarness(t)
	h.apply(1, nil)
	h.produce(1, idemBatch(t, 3, 0, 0, "a"))
	data, persist, err := h.r.PrepareSnapshot() // index 2, offset 1
	if err != nil {
		t.Fatal(err)
	}
	h.produce(1, idemBatch(t, 3, 0, 1, "b")) // applied before persist runs
	if err := persist(); err != nil {
		t.Fatal(err)
	}
	cp, err := decodeSnapshotData(&raftpb.Snapshot{Data: data})
	if err != nil || cp.Applied != 2 || cp.Next != 1 {
		t.Fatalf("snapshot data %+v (err %v), want applied 2, next 1", cp, err)
	}
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
	h.open()
	if got, end := h.r.Applied(), h.r.Log().EndOffset(); got != 2 || end != 1 {
		t.Fatalf("reopened at applied %d, end %d; want 2 and 1", got, end)
	}
	// The producer table is the captured one: sequence 1 is new again.
	if r := h.produce(1, idemBatch(t, 3, 0, 1, "b")); r.Err != nil || r.Duplicate || r.Base != 1 {
		t.Fatalf("replayed entry: %+v", r)
	}
}
