package partition

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/internal/vfs"
)

// Snapshot syncs the log and checkpoints the replica at its applied index;
// the checkpoint is also the snapshot's data. The group compacts its raft
// log behind it, so it must be durable first.
func (r *Replica) Snapshot() ([]byte, error) {
	data, persist, err := r.PrepareSnapshot()
	if err != nil {
		return nil, err
	}
	if err := persist(); err != nil {
		return nil, err
	}
	return data, nil
}

// PrepareSnapshot captures the replica's state as of the last applied entry
// and returns it with a function that makes it durable: an fsync of the log
// (SyncData, which does not stall appends) and then the checkpoint file.
// Apply may run while persist does; the checkpoint still describes the
// captured state, and a restart cuts the log back to its end.
func (r *Replica) PrepareSnapshot() (data []byte, persist func() error, err error) {
	l := r.Log()
	cp := &replicaCheckpoint{
		Applied: r.applied, Start: l.StartOffset(), Next: l.EndOffset(),
		Producers: r.producers, Epochs: r.Epochs(), Txns: l.OngoingTransactions(),
	}
	// Encoding now copies the producer table, which later applies change.
	data, err = json.Marshal(cp)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	file := sealCheckpoint(data)
	persist = func() error {
		if err := l.SyncData(); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if err := writeReplicaCheckpointFile(r.fs(), r.cfg.Dir, file); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		return nil
	}
	return data, persist, nil
}

func decodeSnapshotData(snap *raftpb.Snapshot) (replicaCheckpoint, error) {
	var cp replicaCheckpoint
	if err := json.Unmarshal(snap.GetData(), &cp); err != nil {
		return cp, fmt.Errorf("partition: snapshot %d data: %w", snap.GetMetadata().GetIndex(), err)
	}
	return cp, nil
}

// The snapshot body is a 16-byte header (the base offset of the first
// batch, then the log start offset, which may lie inside that batch), the
// transactions open just before the first batch (a uint32 count, then
// producer id and first offset, int64 each), and the log's batches as
// they are on disk, up to the snapshot's end offset. The open
// transactions let the receiver rebuild the aborted index and the LSO of
// a log whose older part it never gets.
const (
	snapHeaderSize = 16
	maxSnapTxns    = 1 << 20
)

// SnapshotBody streams the log up to the snapshot's end offset.
func (r *Replica) SnapshotBody(snap *raftpb.Snapshot) (io.ReadCloser, error) {
	cp, err := decodeSnapshotData(snap)
	if err != nil {
		return nil, err
	}
	l := r.Log()
	start := max(l.StartOffset(), cp.Start)
	sr := &snapshotReader{log: l, next: start, upTo: cp.Next}
	first, err := sr.firstBase(start)
	if err != nil {
		return nil, err
	}
	seed, err := l.transactionsAt(first)
	if err != nil {
		return nil, fmt.Errorf("snapshot body: %w", err)
	}
	sr.buf = binary.BigEndian.AppendUint64(sr.buf, uint64(first))
	sr.buf = binary.BigEndian.AppendUint64(sr.buf, uint64(start))
	sr.buf = binary.BigEndian.AppendUint32(sr.buf, uint32(len(seed)))
	for _, t := range seed {
		sr.buf = binary.BigEndian.AppendUint64(sr.buf, uint64(t.ProducerID))
		sr.buf = binary.BigEndian.AppendUint64(sr.buf, uint64(t.FirstOffset))
	}
	return sr, nil
}

// snapshotReader reads whole batches from a log chunk by chunk.
type snapshotReader struct {
	log        *Log
	next, upTo int64
	buf        []byte
}

const snapChunk = 1 << 20

func (s *snapshotReader) firstBase(start int64) (int64, error) {
	if start >= s.upTo {
		return start, nil
	}
	b, err := s.log.Read(start, 1, s.upTo)
	if err != nil || len(b) < batchHeaderSize {
		return 0, fmt.Errorf("snapshot body: first batch at %d: %w", start, err)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func (s *snapshotReader) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.next >= s.upTo {
			return 0, io.EOF
		}
		b, err := s.log.Read(s.next, snapChunk, s.upTo)
		if err != nil {
			return 0, fmt.Errorf("snapshot body at %d: %w", s.next, err)
		}
		next, err := nextOffsetAfter(b)
		if err != nil {
			return 0, err
		}
		s.buf, s.next = b, next
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

func (s *snapshotReader) Close() error { return nil }

// nextOffsetAfter returns the offset after the last batch in b.
func nextOffsetAfter(b []byte) (int64, error) {
	var next int64 = -1
	for len(b) > 0 {
		info, n, err := frameInfo(b)
		if err != nil {
			return 0, err
		}
		next = info.BaseOffset + int64(info.LastOffsetDelta) + 1
		b = b[n:]
	}
	return next, nil
}

// frameInfo parses the header of the batch at the front of b and returns
// it with the batch's length.
func frameInfo(b []byte) (BatchInfo, int, error) {
	if len(b) < 12 {
		return BatchInfo{}, 0, fmt.Errorf("%w: %d bytes left, less than a batch frame", ErrCorruptLog, len(b))
	}
	n := 12 + int(int32(binary.BigEndian.Uint32(b[8:12])))
	if n < batchHeaderSize || n > len(b) {
		return BatchInfo{}, 0, fmt.Errorf("%w: batch of %d bytes in %d", ErrCorruptLog, n, len(b))
	}
	info, err := ParseBatchHeader(b[:n])
	return info, n, err
}

// ReceiveSnapshot writes the incoming log into a staging directory beside
// the live one; Restore swaps it in.
func (r *Replica) ReceiveSnapshot(snap *raftpb.Snapshot, body io.Reader) error {
	idx := snap.GetMetadata().GetIndex()
	dir := fmt.Sprintf("%s.snap-%d", r.cfg.Dir, idx)
	if err := vfs.RemoveAll(r.fs(), dir); err != nil {
		return fmt.Errorf("stage snapshot %d: %w", idx, err)
	}
	cp, err := decodeSnapshotData(snap)
	if err != nil {
		return err
	}
	cp.Applied = idx
	if err := stageLog(dir, r.cfg.Log, body, &cp); err != nil {
		_ = vfs.RemoveAll(r.fs(), dir)
		return fmt.Errorf("stage snapshot %d: %w", idx, err)
	}
	r.mu.Lock()
	r.staged[idx] = dir
	r.mu.Unlock()
	return nil
}

// stageLog builds the snapshot's log in dir, with the replica checkpoint
// that describes it, so that a crash at any point of a restore leaves
// either the old directory or the new one whole.
func stageLog(dir string, cfg Config, body io.Reader, cp *replicaCheckpoint) error {
	if body == nil {
		return errors.New("no snapshot body")
	}
	var hdr [snapHeaderSize]byte
	if _, err := io.ReadFull(body, hdr[:]); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	first, start := int64(binary.BigEndian.Uint64(hdr[:8])), int64(binary.BigEndian.Uint64(hdr[8:]))
	seed, err := readSnapTxns(body)
	if err != nil {
		return err
	}
	l, err := Open(dir, cfg)
	if err != nil {
		return err
	}
	err = fillStagedLog(l, first, start, seed, body)
	if err == nil && l.EndOffset() != cp.Next {
		err = fmt.Errorf("%w: snapshot body ends at %d, snapshot at %d", ErrCorruptLog, l.EndOffset(), cp.Next)
	}
	if got := l.OngoingTransactions(); err == nil && !slices.Equal(got, cp.Txns) {
		err = fmt.Errorf("%w: snapshot body leaves transactions %v open, snapshot %v", ErrCorruptLog, got, cp.Txns)
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return writeReplicaCheckpoint(cfg.FS, dir, cp)
}

// readSnapTxns reads the open transactions that follow the body header.
func readSnapTxns(body io.Reader) ([]OngoingTxn, error) {
	var n [4]byte
	if _, err := io.ReadFull(body, n[:]); err != nil {
		return nil, fmt.Errorf("header: open transactions: %w", err)
	}
	count := binary.BigEndian.Uint32(n[:])
	if count > maxSnapTxns {
		return nil, fmt.Errorf("%w: snapshot header claims %d open transactions", ErrCorruptLog, count)
	}
	seed := make([]OngoingTxn, count)
	var b [16]byte
	for i := range seed {
		if _, err := io.ReadFull(body, b[:]); err != nil {
			return nil, fmt.Errorf("header: open transaction %d: %w", i, err)
		}
		seed[i] = OngoingTxn{ProducerID: int64(binary.BigEndian.Uint64(b[:8])), FirstOffset: int64(binary.BigEndian.Uint64(b[8:]))}
	}
	return seed, nil
}

func fillStagedLog(l *Log, first, start int64, seed []OngoingTxn, body io.Reader) error {
	if err := l.Reset(first); err != nil {
		return err
	}
	if err := l.SeedTransactions(seed); err != nil {
		return err
	}
	for {
		batch, err := readBatchFrame(body)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		info, err := ParseBatchHeader(batch)
		if err != nil {
			return err
		}
		base, _, err := l.AppendValidated(batch, info.LeaderEpoch)
		if err != nil {
			return err
		}
		if base != info.BaseOffset {
			return fmt.Errorf("%w: snapshot batch at %d appended at %d", ErrCorruptLog, info.BaseOffset, base)
		}
	}
	if err := l.AdvanceStart(start); err != nil {
		return err
	}
	return l.Sync()
}

// readBatchFrame reads one whole batch; io.EOF means a clean end.
func readBatchFrame(r io.Reader) ([]byte, error) {
	var pre [12]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: torn batch frame", ErrCorruptLog)
		}
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(pre[8:])))
	if n < batchHeaderSize-12 || n > maxSnapshotBatch {
		return nil, fmt.Errorf("%w: batch length %d", ErrCorruptLog, n)
	}
	b := make([]byte, 12+n)
	copy(b, pre[:])
	if _, err := io.ReadFull(r, b[12:]); err != nil {
		return nil, fmt.Errorf("%w: torn batch: %w", ErrCorruptLog, err)
	}
	return b, nil
}

const maxSnapshotBatch = 1 << 30

// Restore swaps in the log staged for snap and adopts its state. A
// snapshot staged before a crash is found again by OpenReplica.
func (r *Replica) Restore(snap *raftpb.Snapshot) error {
	idx := snap.GetMetadata().GetIndex()
	r.mu.Lock()
	staged, ok := r.staged[idx]
	delete(r.staged, idx)
	r.mu.Unlock()
	if !ok && r.unanchored {
		return r.restoreInPlace(snap)
	}
	if !ok {
		return fmt.Errorf("partition: restore snapshot %d: no staged log", idx)
	}
	if err := r.swapIn(staged); err != nil {
		return fmt.Errorf("partition: restore snapshot %d: %w", idx, err)
	}
	cp, err := readReplicaCheckpoint(r.fs(), r.cfg.Dir)
	if errors.Is(err, ErrCorruptLog) {
		// The staged copy's checkpoint was damaged on disk after it was
		// made durable: raft's copy of it, the snapshot's data, stands
		// in, as for a damaged checkpoint at open.
		r.logger.Warn("staged replica checkpoint damaged; rebuilding it from the raft snapshot", "dir", r.cfg.Dir, "snapshot", idx, "err", err)
		r.discardStaged(idx)
		return r.restoreInPlace(snap)
	}
	if err != nil {
		return err
	}
	if cp.Applied != idx {
		return fmt.Errorf("partition: restore snapshot %d: staged checkpoint is at %d", idx, cp.Applied)
	}
	if end := r.Log().EndOffset(); end < cp.Next {
		// The staged copy was damaged on disk after it was made durable:
		// the next open finds the same hole, for FillReplica.
		return &GapError{Dir: r.cfg.Dir, End: end, Next: cp.Next}
	}
	r.unanchored = false // the staged checkpoint anchors it
	r.adopt(cp)
	r.discardStaged(idx)
	return r.Log().SetHighWatermark(cp.Next)
}

// discardStaged removes staged snapshots older than idx.
func (r *Replica) discardStaged(idx uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, dir := range r.staged {
		if i <= idx {
			_ = vfs.RemoveAll(r.fs(), dir)
			delete(r.staged, i)
		}
	}
}

// findStaged registers snapshot directories staged before a restart, and
// removes a directory a swap left behind.
func (r *Replica) findStaged() error {
	_ = vfs.RemoveAll(r.fs(), r.cfg.Dir+".old")
	dirs, err := vfs.Glob(r.fs(), filepath.Dir(r.cfg.Dir), filepath.Base(r.cfg.Dir)+".snap-")
	if err != nil {
		return err
	}
	for _, d := range dirs {
		var idx uint64
		if _, err := fmt.Sscanf(d[len(r.cfg.Dir):], ".snap-%d", &idx); err == nil {
			r.staged[idx] = d
		}
	}
	return nil
}

// swapIn closes the live log, replaces its directory by staged and opens it.
func (r *Replica) swapIn(staged string) error {
	old := r.cfg.Dir + ".old"
	if err := r.Log().Close(); err != nil {
		r.logger.Warn("close log before snapshot restore", "err", err)
	}
	fsys := r.fs()
	if err := vfs.RemoveAll(fsys, old); err != nil {
		return err
	}
	if err := fsys.Rename(r.cfg.Dir, old); err != nil {
		return err
	}
	if err := fsys.Rename(staged, r.cfg.Dir); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(r.cfg.Dir)); err != nil {
		return err
	}
	cfg := r.cfg.Log
	cfg.Limits = r.Log().Limits() // as SetLimits last left them
	l, err := Open(r.cfg.Dir, cfg)
	if err != nil {
		return err
	}
	r.log.Store(l)
	return vfs.RemoveAll(fsys, old)
}

// fs is the file system the replica lives on (OpenReplica filled it in).
func (r *Replica) fs() FS { return r.cfg.Log.FS }
