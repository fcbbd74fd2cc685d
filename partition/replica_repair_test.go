package partition

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// twinReplicas applies the same 40 produce entries to two replicas, the
// way two raft replicas of one partition do, checkpoints the first at the
// end (its raft snapshot) and closes it; then two more entries follow,
// applied to the second only. It returns the entries and the snapshot.
func twinReplicas(t *testing.T) (damaged, peer *replicaHarness, log [][]byte, snap *raftpb.Snapshot) {
	t.Helper()
	damaged, peer = newReplicaHarness(t), newReplicaHarness(t)
	add := func(h *replicaHarness, data []byte) { h.apply(1, data) }
	log = append(log, nil)
	for i := range 40 {
		log = append(log, produceEntry(idemBatch(t, 7, 0, int32(i), fmt.Sprintf("value-%03d", i))))
	}
	for _, data := range log {
		add(damaged, data)
		add(peer, data)
	}
	data, err := damaged.r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap = &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(damaged.index), Term: new(uint64(1))}}
	for i := range 2 {
		e := produceEntry(idemBatch(t, 7, 0, int32(40+i), "after"))
		log = append(log, e)
		add(peer, e)
	}
	if err := damaged.r.Close(); err != nil {
		t.Fatal(err)
	}
	return damaged, peer, log, snap
}

func fetchFrom(l *Log) func(from, upTo int64) ([]byte, error) {
	return func(from, upTo int64) ([]byte, error) { return l.Read(from, 300, upTo) } // a few batches a call
}

// TestReplica_DamageBelowTheCheckpointIsFilledFromAPeer flips a bit in a
// batch the checkpoint covers, which raft (compacted behind the
// snapshot) cannot replay: the open refuses with a GapError naming the
// hole, FillReplica copies it from the peer (refusing a damaged copy),
// and the replica then opens at its checkpoint with the peer's bytes.
func TestReplica_DamageBelowTheCheckpointIsFilledFromAPeer(t *testing.T) {
	damaged, peer, log, _ := twinReplicas(t)
	seg := segFile(damaged.dir, 0, logSuffix)
	pos := batchPositions(t, seg)
	flipByte(t, seg, pos[10]+70)
	cfg := ReplicaConfig{Dir: damaged.dir, Log: DefaultConfig()}
	_, err := OpenReplica(cfg)
	var gap *GapError
	if !errors.As(err, &gap) || !errors.Is(err, ErrCorruptLog) || gap.End != 10 || gap.Next != 40 {
		t.Fatalf("OpenReplica = %v, want a GapError for [10, 40)", err)
	}
	// A peer that hands over damage is refused, and nothing of it lands.
	bad := func(from, upTo int64) ([]byte, error) {
		b, err := peer.r.Log().Read(from, 1<<20, upTo)
		b = bytes.Clone(b)
		b[len(b)-5] ^= 1
		return b, err
	}
	if _, err := FillReplica(cfg, bad); err == nil {
		t.Fatal("FillReplica took a damaged batch")
	}
	n, err := FillReplica(cfg, fetchFrom(peer.r.Log()))
	if err != nil || n == 0 {
		t.Fatalf("FillReplica = %d, %v", n, err)
	}
	r, err := OpenReplica(cfg)
	if err != nil {
		t.Fatal(err)
	}
	damaged.r = r
	t.Cleanup(func() { _ = r.Close() })
	if got := r.Applied(); got != 41 {
		t.Fatalf("Applied() = %d, want the checkpoint's 41", got)
	}
	damaged.index = 41
	for _, data := range log[41:] {
		damaged.apply(1, data)
	}
	if got, want := replicaImage(t, r), replicaImage(t, peer.r); !reflect.DeepEqual(got, want) {
		t.Fatalf("repaired replica [%d, %d) hw %d, %d bytes; peer [%d, %d) hw %d, %d bytes",
			got.start, got.end, got.hw, len(got.log), want.start, want.end, want.hw, len(want.log))
	}
}

// TestReplica_DamagedCheckpointStandsOnRaftsSnapshot flips a bit in
// replica.checkpoint: the open does not fail and serves nothing (high
// watermark at the start) until raft restores its snapshot, whose data is
// the same checkpoint; then the file is whole again and the replay of
// the entries after it gives the peer's state.
func TestReplica_DamagedCheckpointStandsOnRaftsSnapshot(t *testing.T) {
	damaged, peer, log, snap := twinReplicas(t)
	flipByte(t, filepath.Join(damaged.dir, replicaCheckpointName), 5)
	damaged.open()
	r := damaged.r
	if r.Applied() != 0 || r.Log().HighWatermark() != r.Log().StartOffset() {
		t.Fatalf("unanchored replica at applied %d serves up to %d", r.Applied(), r.Log().HighWatermark())
	}
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if r.Applied() != 41 || r.Log().EndOffset() != 40 || r.Log().HighWatermark() != 40 {
		t.Fatalf("after the restore: applied %d end %d hw %d", r.Applied(), r.Log().EndOffset(), r.Log().HighWatermark())
	}
	if _, err := readReplicaCheckpoint(OSFS(), damaged.dir); err != nil {
		t.Fatalf("checkpoint not rewritten: %v", err)
	}
	damaged.index = 41
	for _, data := range log[41:] {
		damaged.apply(1, data)
	}
	if got, want := replicaImage(t, r), replicaImage(t, peer.r); !reflect.DeepEqual(got, want) {
		t.Fatalf("replica [%d, %d) hw %d; peer [%d, %d) hw %d", got.start, got.end, got.hw, want.start, want.end, want.hw)
	}
}

// TestReplica_DamagedCheckpointWithoutSnapshotReplaysAll: no raft
// snapshot to restore, raft replays from its first entry, and the log
// starts over for it.
func TestReplica_DamagedCheckpointWithoutSnapshotReplaysAll(t *testing.T) {
	damaged, peer, log, _ := twinReplicas(t)
	flipByte(t, filepath.Join(damaged.dir, replicaCheckpointName), 5)
	damaged.open()
	for _, data := range log {
		damaged.apply(1, data)
	}
	if got, want := replicaImage(t, damaged.r), replicaImage(t, peer.r); !reflect.DeepEqual(got, want) {
		t.Fatalf("replica [%d, %d) hw %d; peer [%d, %d) hw %d", got.start, got.end, got.hw, want.start, want.end, want.hw)
	}
}

// TestReplica_DamagedCheckpointAndSegment: the restore from raft's
// snapshot finds the hole, refuses, and leaves a good checkpoint, so that
// the next open names the hole for FillReplica.
func TestReplica_DamagedCheckpointAndSegment(t *testing.T) {
	damaged, peer, _, snap := twinReplicas(t)
	flipByte(t, filepath.Join(damaged.dir, replicaCheckpointName), 5)
	seg := segFile(damaged.dir, 0, logSuffix)
	flipByte(t, seg, batchPositions(t, seg)[20]+70)
	damaged.open()
	var gap *GapError
	if err := damaged.r.Restore(snap); !errors.As(err, &gap) || gap.End != 20 {
		t.Fatalf("Restore = %v, want a GapError at 20", err)
	}
	if err := damaged.r.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := ReplicaConfig{Dir: damaged.dir, Log: DefaultConfig()}
	if _, err := OpenReplica(cfg); !errors.As(err, &gap) {
		t.Fatalf("reopen = %v, want the GapError", err)
	}
	if _, err := FillReplica(cfg, fetchFrom(peer.r.Log())); err != nil {
		t.Fatal(err)
	}
	damaged.open()
	if damaged.r.Applied() != 41 || damaged.r.Log().EndOffset() != 40 {
		t.Fatalf("after the fill: applied %d end %d", damaged.r.Applied(), damaged.r.Log().EndOffset())
	}
}

// TestReplica_DamagedCheckpointThenReceivedSnapshot: an unanchored replica
// (damaged replica.checkpoint) that installs a snapshot streamed from the
// leader is anchored by it, so the entries after it append where the
// snapshot ends instead of starting the log over at 0.
func TestReplica_DamagedCheckpointThenReceivedSnapshot(t *testing.T) {
	damaged, peer, log, _ := twinReplicas(t)
	data, err := peer.r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(peer.index), Term: new(uint64(1))}}
	body, err := peer.r.SnapshotBody(snap)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(damaged.dir, replicaCheckpointName), 5)
	damaged.open()
	if err := damaged.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	if err := damaged.r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	damaged.index = peer.index
	more := produceEntry(idemBatch(t, 7, 0, 42, "more"))
	log = append(log, more)
	res := damaged.produce(1, idemBatch(t, 7, 0, 42, "more"))
	peer.apply(1, more)
	if res.Err != nil || res.Base != 42 {
		t.Fatalf("the entry after the snapshot appended at %d (err %v), want 42", res.Base, res.Err)
	}
	if got, want := replicaImage(t, damaged.r), replicaImage(t, peer.r); !reflect.DeepEqual(got, want) {
		t.Fatalf("replica [%d, %d) hw %d; peer [%d, %d) hw %d", got.start, got.end, got.hw, want.start, want.end, want.hw)
	}
}

// TestReplica_FlippedLeaderEpochIsDamage flips a bit in the
// partitionLeaderEpoch of a batch the checkpoint covers, which no CRC
// covers: the open finds that the epoch disagrees with the checkpoint's
// epochs and treats the batch as damaged (a GapError, filled from a
// peer), instead of serving the wrong epoch.
func TestReplica_FlippedLeaderEpochIsDamage(t *testing.T) {
	damaged, peer, _, _ := twinReplicas(t)
	seg := segFile(damaged.dir, 0, logSuffix)
	flipByte(t, seg, batchPositions(t, seg)[15]+offLeaderEpoch+1)
	cfg := ReplicaConfig{Dir: damaged.dir, Log: DefaultConfig()}
	var gap *GapError
	if _, err := OpenReplica(cfg); !errors.As(err, &gap) || gap.End != 15 {
		t.Fatalf("open = %v, want a GapError at 15", err)
	}
	if _, err := FillReplica(cfg, fetchFrom(peer.r.Log())); err != nil {
		t.Fatal(err)
	}
	damaged.open()
	want, _ := peer.r.Log().Read(0, 1<<20, 40)
	got, _ := damaged.r.Log().Read(0, 1<<20, 40)
	if !bytes.Equal(got, want) {
		t.Fatal("the refilled log differs from the peer's")
	}
}

// TestReplica_DamagedCheckpointAndFlippedEpoch: with the checkpoint
// damaged the open cannot check epochs; the restore from raft's snapshot
// does, once it has the checkpoint back, and finds the hole there.
func TestReplica_DamagedCheckpointAndFlippedEpoch(t *testing.T) {
	damaged, _, _, snap := twinReplicas(t)
	flipByte(t, filepath.Join(damaged.dir, replicaCheckpointName), 5)
	seg := segFile(damaged.dir, 0, logSuffix)
	flipByte(t, seg, batchPositions(t, seg)[20]+offLeaderEpoch+2)
	damaged.open()
	var gap *GapError
	if err := damaged.r.Restore(snap); !errors.As(err, &gap) || gap.End != 20 {
		t.Fatalf("Restore = %v, want a GapError at 20", err)
	}
}

// TestReplica_DamagedStagedSnapshot: a snapshot staged before a crash
// whose log was damaged on disk since is refused at Restore with the
// hole (a GapError), not adopted with a checkpoint it does not match.
func TestReplica_DamagedStagedSnapshot(t *testing.T) {
	leader := newReplicaHarness(t)
	for i := range 5 {
		leader.produce(1, plainBatch(t, fmt.Sprint(i)))
	}
	data, _ := leader.r.Snapshot()
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(leader.index), Term: new(uint64(1))}}
	body, _ := leader.r.SnapshotBody(snap)
	f := newReplicaHarness(t)
	if err := f.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	_ = f.r.Close() // crash after raft saved the snapshot, before Restore
	seg := segFile(fmt.Sprintf("%s.snap-%d", f.dir, leader.index), 0, logSuffix)
	truncateFile(t, seg, batchPositions(t, seg)[2])
	f.open()
	var gap *GapError
	if err := f.r.Restore(snap); !errors.As(err, &gap) || gap.End != 2 || gap.Next != 5 {
		t.Fatalf("Restore of a damaged staged log = %v, want a GapError [2, 5)", err)
	}
}

// TestReplica_DamagedStagedCheckpoint: a snapshot staged before a crash
// whose checkpoint file was damaged on disk since is restored with raft's
// copy of that checkpoint, the snapshot's data, as a damaged live
// checkpoint is (restoreInPlace), not refused.
func TestReplica_DamagedStagedCheckpoint(t *testing.T) {
	leader := newReplicaHarness(t)
	for i := range 5 {
		leader.produce(1, plainBatch(t, fmt.Sprint(i)))
	}
	data, _ := leader.r.Snapshot()
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(leader.index), Term: new(uint64(1))}}
	body, _ := leader.r.SnapshotBody(snap)
	f := newReplicaHarness(t)
	if err := f.r.ReceiveSnapshot(snap, body); err != nil {
		t.Fatal(err)
	}
	_ = f.r.Close() // crash after raft saved the snapshot, before Restore
	cp := filepath.Join(fmt.Sprintf("%s.snap-%d", f.dir, leader.index), replicaCheckpointName)
	truncateFile(t, cp, 20)
	f.open()
	if err := f.r.Restore(snap); err != nil {
		t.Fatalf("Restore with a damaged staged checkpoint: %v", err)
	}
	if got := f.r.Log().HighWatermark(); got != 5 {
		t.Fatalf("restored high watermark %d, want 5", got)
	}
	if _, err := readReplicaCheckpoint(f.r.fs(), f.dir); err != nil {
		t.Fatalf("the checkpoint was not rewritten: %v", err)
	}
}
