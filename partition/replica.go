package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/internal/logging"
	"github.com/raftq/raftq/raftgroup"
)

// ReplicaConfig configures one partition replica.
type ReplicaConfig struct {
	// Dir is the partition's directory: its segments, indexes and
	// checkpoints.
	Dir string
	// Log shapes the segments; its FS (nil: the operating system's) holds
	// every file of the replica, checkpoints and staged snapshots too.
	// Its MaxBatchBytes must not be smaller than
	// any limit the broker enforces at produce time, because apply must
	// never refuse a committed batch.
	Log Config
	// Logger receives recovery reports; nil discards them.
	Logger *slog.Logger
}

// Replica is a partition's replicated state machine: it applies committed
// raft entries to the partition's Log, assigning offsets at apply so every
// replica's log holds the same batches at the same offsets, and keeps the
// state that must survive failover with them (idempotent producers, leader
// epoch starts).
//
// Apply, Snapshot and Restore run on the raft group's goroutine. Readers
// (fetch, ListOffsets, OffsetForLeaderEpoch) may call Log and EndOffsetFor
// from any goroutine.
type Replica struct {
	cfg    ReplicaConfig
	logger *slog.Logger
	log    atomic.Pointer[Log] // replaced only by Restore

	// Owned by the group's goroutine, which reads them without a lock;
	// it writes producers (the map and the states in it) under
	// producersMu, which Producers takes to read from other goroutines.
	applied     uint64
	producersMu sync.Mutex // a leaf
	producers   map[int64]*ProducerState
	// unanchored: the checkpoint file was damaged, so the log is not cut
	// back yet; raft's snapshot stands in for it (restoreInPlace), or,
	// without one, the log starts over for the replay (anchorEmpty).
	unanchored bool

	mu     sync.Mutex // guards epochs and staged
	epochs epochCache
	staged map[uint64]string // snapshot index -> staged log directory
}

var _ raftgroup.StateMachine = (*Replica)(nil)

// ProduceResult is what applying a produce entry returns to its proposer.
type ProduceResult struct {
	Base, Last int64 // offsets of the batch's first and last records
	LogStart   int64
	// MaxTimestamp is the batch's, or for a duplicate the first one's.
	MaxTimestamp int64
	// Duplicate means an idempotent retry: Base and Last are the offsets the
	// batch got the first time, and nothing was appended.
	Duplicate bool
	// Err is a Kafka error (kerr) when the batch was refused.
	Err error
}

// OpenReplica opens (or creates) the replica in cfg.Dir, cutting the log
// back to the last checkpoint: raft re-delivers the entries after it.
func OpenReplica(cfg ReplicaConfig) (*Replica, error) {
	if cfg.Log.FS == nil {
		cfg.Log.FS = OSFS()
	}
	if err := cfg.Log.FS.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("open replica %s: %w", cfg.Dir, err)
	}
	cfg.Log.Logger = cfg.Logger
	r := &Replica{cfg: cfg, logger: logging.Discard(cfg.Logger), staged: map[uint64]string{}}
	if err := r.findStaged(); err != nil {
		return nil, fmt.Errorf("open replica %s: %w", cfg.Dir, err)
	}
	cp, err := r.openCheckpoint()
	if err != nil {
		return nil, err
	}
	l, err := r.openLog(cp)
	if err != nil {
		return nil, err
	}
	if r.unanchored {
		r.log.Store(l)
		r.adopt(cp)
		return r, nil
	}
	if err := r.rewind(l, cp); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("open replica %s: %w", cfg.Dir, err)
	}
	r.log.Store(l)
	r.adopt(cp)
	return r, nil
}

// openLog opens the replica's log; an anchored replica has the epochs of
// its checkpoint checked against the batches below its end
// (recover_epochs.go).
func (r *Replica) openLog(cp replicaCheckpoint) (*Log, error) {
	if r.unanchored {
		return Open(r.cfg.Dir, r.cfg.Log)
	}
	return openChecked(r.cfg.Dir, r.cfg.Log, cp.Epochs, cp.Next)
}

// rewind cuts l back to the checkpointed end, which the checkpoint's
// synced log covers. When the log start has moved past that end since
// (DeleteRecords or retention applied after the checkpoint), the log
// restarts empty at the end instead: raft replays what followed the
// checkpoint, the move included, and rebuilds the same records and start.
// Only the layout of segments below the start then differs from the
// other replicas'.
func (r *Replica) rewind(l *Log, cp replicaCheckpoint) error {
	if end := l.EndOffset(); end < cp.Next {
		return &GapError{Dir: r.cfg.Dir, End: end, Next: cp.Next}
	}
	if l.StartOffset() > cp.Next {
		r.logger.Info("log start moved past the checkpoint; restarting the log there for the replay",
			"dir", r.cfg.Dir, "start", l.StartOffset(), "checkpoint", cp.Next)
		if err := l.Reset(cp.Next); err != nil {
			return err
		}
		if err := l.SeedTransactions(cp.Txns); err != nil {
			return err
		}
	}
	if _, err := l.Truncate(cp.Next); err != nil {
		return err
	}
	if got := l.OngoingTransactions(); !slices.Equal(got, cp.Txns) {
		// Only a lost .txnindex of the first segment does this (recovery
		// had nothing to rebuild its open transactions from). Those still
		// open at the checkpoint come back; aborted-index entries of
		// those that ended since are lost.
		n, err := l.RestoreOpenTransactions(cp.Txns)
		if err != nil {
			return err
		}
		r.logger.Warn("open transactions differ from the checkpoint's; restored the missing ones still open",
			"dir", r.cfg.Dir, "log", got, "checkpoint", cp.Txns, "restored", n)
	}
	if l.StartOffset() < cp.Start {
		if err := l.AdvanceStart(cp.Start); err != nil {
			return err
		}
	}
	return l.SetHighWatermark(cp.Next)
}

func (r *Replica) adopt(cp replicaCheckpoint) {
	r.applied = cp.Applied
	r.producersMu.Lock()
	r.producers = cp.Producers
	if r.producers == nil {
		r.producers = map[int64]*ProducerState{}
	}
	r.producersMu.Unlock()
	r.mu.Lock()
	r.epochs = cp.Epochs
	r.mu.Unlock()
}

// Log returns the partition log for reads.
func (r *Replica) Log() *Log { return r.log.Load() }

// Producers summarises the producers the replica remembers, as of its
// last applied entry; any goroutine may call it.
func (r *Replica) Producers() []ProducerInfo {
	r.producersMu.Lock()
	defer r.producersMu.Unlock()
	return producerInfos(r.producers)
}

// Close closes the log.
func (r *Replica) Close() error { return r.Log().Close() }

// Applied returns the index of the last checkpointed entry.
func (r *Replica) Applied() uint64 { return r.applied }

// EndOffsetFor answers OffsetForLeaderEpoch from the epoch starts.
func (r *Replica) EndOffsetFor(epoch int32) (leaderEpoch int32, endOffset int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epochs.endOffset(epoch, r.Log().HighWatermark())
}

// Epochs returns a copy of the epoch starts.
func (r *Replica) Epochs() []EpochStart {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]EpochStart(nil), r.epochs...)
}

// Apply applies one committed entry.
// SkipEntry counts entry index, which the raft group applied itself (a
// configuration change), as applied (raftgroup.ConfIndexer).
func (r *Replica) SkipEntry(index uint64) { r.applied = max(r.applied, index) }

func (r *Replica) Apply(e raftgroup.Entry) (any, error) {
	if r.unanchored {
		if err := r.anchorEmpty(); err != nil {
			return nil, fmt.Errorf("partition %s: apply entry %d: %w", r.cfg.Dir, e.Index, err)
		}
	}
	res, err := r.apply(e)
	if err != nil {
		return nil, fmt.Errorf("partition %s: apply entry %d: %w", r.cfg.Dir, e.Index, err)
	}
	r.applied = e.Index
	return res, nil
}

func (r *Replica) apply(e raftgroup.Entry) (any, error) {
	l := r.Log()
	if len(e.Data) == 0 {
		r.noteEpoch(e.Term, l.EndOffset())
		return nil, nil
	}
	switch e.Data[0] {
	case kindProduce:
		return r.applyProduce(l, e.Data[1:], e.Term)
	case kindAdvanceStart:
		return r.applyAdvanceStart(l, e.Data)
	}
	return nil, fmt.Errorf("%w: unknown entry kind %d", ErrCorruptLog, e.Data[0])
}

func (r *Replica) noteEpoch(term uint64, offset int64) {
	r.mu.Lock()
	r.epochs = r.epochs.note(int32(term), offset)
	r.mu.Unlock()
}

func (r *Replica) applyProduce(l *Log, batch []byte, term uint64) (*ProduceResult, error) {
	info, err := ParseBatchHeader(batch)
	if err != nil {
		// The leader validated it; a replica that cannot parse committed
		// bytes refuses them the same way on every node.
		return &ProduceResult{Err: err}, nil
	}
	r.noteEpoch(term, l.EndOffset())
	var st *ProducerState
	if info.Idempotent() {
		st = r.producers[info.ProducerID]
		dup, err := checkProducer(st, info)
		if err != nil {
			return &ProduceResult{Err: err, LogStart: l.StartOffset()}, nil
		}
		if dup != nil {
			return &ProduceResult{Base: dup.BaseOffset, Last: dup.LastOffset, MaxTimestamp: dup.MaxTimestamp, Duplicate: true, LogStart: l.StartOffset()}, nil
		}
		if takenMarker(st, batchMarkerSeq(batch, info)) {
			return &ProduceResult{Base: -1, Last: -1, Duplicate: true, LogStart: l.StartOffset()}, nil
		}
		if err := l.checkTxnState(info); err != nil {
			return &ProduceResult{Err: err, LogStart: l.StartOffset()}, nil
		}
	}
	base, last, err := l.AppendValidated(batch, int32(term))
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) {
			return &ProduceResult{Err: err}, nil
		}
		return nil, err
	}
	if info.Idempotent() {
		r.producersMu.Lock()
		r.producers[info.ProducerID] = recordProducer(st, info, base, last, batchMarkerSeq(batch, info))
		r.producersMu.Unlock()
	}
	if err := l.SetHighWatermark(last + 1); err != nil {
		return nil, err
	}
	return &ProduceResult{Base: base, Last: last, MaxTimestamp: info.MaxTimestamp, LogStart: l.StartOffset()}, nil
}

// applyAdvanceStart moves the log start (DeleteRecords, retention). An
// offset beyond the end is refused on every replica alike.
func (r *Replica) applyAdvanceStart(l *Log, data []byte) (any, error) {
	off, err := decodeAdvanceStart(data)
	if err != nil {
		return nil, err
	}
	if off > l.EndOffset() || off < 0 {
		return kerr.OffsetOutOfRange, nil
	}
	if err := l.AdvanceStart(off); err != nil {
		return nil, err
	}
	return nil, nil
}
