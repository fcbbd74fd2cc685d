package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/internal/logging"
)

// ErrEpochRegression: a replicated batch carries a leader epoch older than
// the newest one the log knows, so the follower's log has diverged from
// the leader's and must be truncated by epoch first.
var ErrEpochRegression = errors.New("partition: replicated batch has an older leader epoch than the log")

// ISRLogConfig configures one ISR-mode partition replica.
type ISRLogConfig struct {
	// Dir is the partition's directory: segments, indexes and checkpoints.
	Dir string
	// Log shapes the segments.
	Log Config
	// Logger receives recovery reports; nil discards them.
	Logger *slog.Logger
}

// ISRLog is a partition replica in ISR mode (Kafka's replication): a Log
// plus the state that must follow its contents, the idempotent producers
// and the leader epoch starts. A leader assigns offsets (AppendLeader); a
// follower copies the leader's batches with their offsets and epochs
// (AppendFollower) and cuts its log where it diverged (TruncateTo, guided
// by the leader's EndOffsetFor). See doc.go, "ISR mode", for the
// invariants.
//
// One goroutine (the partition's owner) calls the mutators: AppendLeader,
// AppendFollower, TruncateTo, ResetTo, BecomeLeader, SetHighWatermark,
// Checkpoint and Close, and Producer, which reads the state they change. Readers (fetch, ListOffsets, OffsetForLeaderEpoch) may call
// Log, EndOffsetFor, LatestEpoch and Epochs from any goroutine. The Log's
// own mutators other than AdvanceStart, Roll and SetLimits must not be
// called directly: they would bypass the producer and epoch state.
type ISRLog struct {
	cfg    ISRLogConfig
	logger *slog.Logger
	log    *Log

	// Owned by the owner goroutine, which reads producers without a
	// lock and writes it (the map and the states in it) under
	// producersMu, which Producers takes to read from other goroutines.
	producersMu sync.Mutex // a leaf
	producers   map[int64]*ProducerState
	cps         checkpointSlots

	mu     sync.Mutex // guards epochs
	epochs epochCache

	lostData bool // set by Open only: see LostData
}

// OpenISRLog opens (or creates) the ISR replica in cfg.Dir: it recovers the
// log, loads the newest checkpoint the recovered log covers and rebuilds
// the producers and epochs of the batches after it. The high watermark
// starts at the log start; the owner raises it.
func OpenISRLog(cfg ISRLogConfig) (*ISRLog, error) {
	cfg.Log.Logger = cfg.Logger
	if cfg.Log.FS == nil {
		cfg.Log.FS = OSFS()
	}
	r := &ISRLog{cfg: cfg, logger: logging.Discard(cfg.Logger)}
	if err := r.readSlots(cfg.Log.FS); err != nil {
		return nil, err
	}
	// The newest checkpoint's epochs are checked against the batches
	// below its offset (recover_epochs.go).
	var known epochCache
	var upTo int64
	if c := r.newestUpTo(math.MaxInt64); c != nil {
		known, upTo = c.Epochs, c.Offset
	}
	l, err := openChecked(cfg.Dir, cfg.Log, known, upTo)
	if err != nil {
		return nil, err
	}
	r.log = l
	if err := r.load(); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("open isr log %s: %w", cfg.Dir, err)
	}
	return r, nil
}

// LostData reports whether recovery at open cut records known to have
// been durable: the log's own evidence (Log.RecoveryLostData), a
// checkpoint that covered more than recovery kept, or a damaged one. Such a replica must
// not lead before it has caught up from another (a false alarm, after a
// crash inside TruncateTo, costs only that). Kafka cannot tell, and
// elects it anyway when it is the last ISR member.
func (r *ISRLog) LostData() bool { return r.lostData }

// Log returns the partition log for reads.
func (r *ISRLog) Log() *Log { return r.log }

// Close writes a last checkpoint (Checkpoint) and closes the log.
func (r *ISRLog) Close() error {
	if r.log.Err() != nil {
		return r.log.Close()
	}
	err := r.Checkpoint()
	if cerr := r.log.Close(); err == nil {
		err = cerr
	}
	return err
}

// EndOffset returns the log end offset (LEO).
func (r *ISRLog) EndOffset() int64 { return r.log.EndOffset() }

// HighWatermark returns the high watermark.
func (r *ISRLog) HighWatermark() int64 { return r.log.HighWatermark() }

// recordProducer notes a batch of an idempotent producer, under the lock:
// recordProducer changes the state in place.
func (r *ISRLog) recordProducer(info BatchInfo, base, last int64, seq int32) {
	r.producersMu.Lock()
	r.producers[info.ProducerID] = recordProducer(r.producers[info.ProducerID], info, base, last, seq)
	r.producersMu.Unlock()
}

// setProducers replaces the producer state.
func (r *ISRLog) setProducers(m map[int64]*ProducerState) {
	if m == nil {
		m = map[int64]*ProducerState{}
	}
	r.producersMu.Lock()
	r.producers = m
	r.producersMu.Unlock()
}

// Producers summarises the producers the replica remembers; any
// goroutine may call it.
func (r *ISRLog) Producers() []ProducerInfo {
	r.producersMu.Lock()
	defer r.producersMu.Unlock()
	return producerInfos(r.producers)
}

// Producer returns a copy of the state kept for producer id pid, or nil.
// Only the owner goroutine may call it.
func (r *ISRLog) Producer(pid int64) *ProducerState {
	st := r.producers[pid]
	if st == nil {
		return nil
	}
	return &ProducerState{Epoch: st.Epoch, Batches: append([]ProducerBatch(nil), st.Batches...), MarkerSeq: st.MarkerSeq}
}

// AppendLeader appends a produced batch as the leader of epoch, following
// Kafka's leader append: an idempotent batch is checked against its
// producer's last five batches first. A retry of one of them is a
// duplicate: the result carries the offsets it got the first time
// (Duplicate set) and nothing is appended. The caller must still wait
// until the high watermark passes the duplicate's Last before acking
// acks=all, as Kafka's purgatory does through requiredOffset: the first
// copy may not be replicated yet. A refused batch (a sequence or producer
// epoch error, a malformed header, an epoch older than the log's newest,
// which means this replica was deposed) gets its Kafka error in
// ProduceResult.Err; error reports a failed log. batch must have passed
// ValidateBatch; info is what that returned.
func (r *ISRLog) AppendLeader(batch []byte, info BatchInfo, epoch int32) (ProduceResult, error) {
	start := r.log.StartOffset()
	if epoch < r.LatestEpoch() {
		return ProduceResult{Err: kerr.FencedLeaderEpoch, LogStart: start}, nil
	}
	var st *ProducerState
	if info.Idempotent() {
		st = r.producers[info.ProducerID]
		dup, err := checkProducer(st, info)
		if err != nil {
			return ProduceResult{Err: err, LogStart: start}, nil
		}
		if dup != nil {
			return ProduceResult{Base: dup.BaseOffset, Last: dup.LastOffset, MaxTimestamp: dup.MaxTimestamp, Duplicate: true, LogStart: start}, nil
		}
		if takenMarker(st, batchMarkerSeq(batch, info)) {
			// The first copy is somewhere below the log end, maybe not
			// yet replicated: the caller waits for the HW to pass all of
			// it, or a marker lost in a failover would count as written.
			end := r.log.EndOffset() - 1
			return ProduceResult{Base: end, Last: end, Duplicate: true, LogStart: start}, nil
		}
		if err := r.log.checkTxnState(info); err != nil {
			return ProduceResult{Err: err, LogStart: start}, nil
		}
	}
	r.assignEpoch(epoch, r.log.EndOffset())
	base, last, err := r.log.AppendValidated(batch, epoch)
	if err != nil {
		return batchRefusal(err, start)
	}
	if info.Idempotent() {
		r.recordProducer(info, base, last, batchMarkerSeq(batch, info)) // st is r.producers[info.ProducerID]
	}
	return ProduceResult{Base: base, Last: last, MaxTimestamp: info.MaxTimestamp, LogStart: start}, nil
}

// batchRefusal turns an append error into a refusal of the batch when the
// batch was at fault, and returns it otherwise (the log failed).
func batchRefusal(err error, start int64) (ProduceResult, error) {
	var be *BatchError
	if errors.As(err, &be) {
		return ProduceResult{Err: err, LogStart: start}, nil
	}
	return ProduceResult{}, err
}

// AppendFollower appends a batch fetched from the leader, byte for byte:
// its base offset must be the log end (Kafka's offset-mismatch check;
// otherwise an error wrapping ErrOffsetMismatch), its CRC must hold (the
// bytes crossed the network), and its leader epoch must not be older than
// the newest the log knows (ErrEpochRegression). Its producer is recorded
// without a sequence check (the leader made it), and a newer epoch starts
// at its base. Any refusal leaves the replica unchanged.
func (r *ISRLog) AppendFollower(batch []byte) error {
	info, err := ParseBatchHeader(batch)
	if err != nil {
		return fmt.Errorf("append follower batch: %w", err)
	}
	if err := checkCRC(batch); err != nil {
		return fmt.Errorf("append follower batch at %d: %w", info.BaseOffset, err)
	}
	if latest := r.LatestEpoch(); info.LeaderEpoch < latest {
		return fmt.Errorf("%w: batch at %d has epoch %d, log has %d", ErrEpochRegression, info.BaseOffset, info.LeaderEpoch, latest)
	}
	base, last, err := r.log.AppendReplica(batch)
	if err != nil {
		return fmt.Errorf("append follower batch: %w", err)
	}
	r.noteBatch(info, base, last, batchMarkerSeq(batch, info))
	return nil
}

// noteBatch updates producers and epochs for a batch now in the log, as a
// follower append and the rebuild scans do (which pass no marker number:
// they read headers only, so a marker after the last checkpoint is not
// deduplicated after a restart).
func (r *ISRLog) noteBatch(info BatchInfo, base, last int64, seq int32) {
	if info.Idempotent() {
		r.recordProducer(info, base, last, seq)
	}
	if info.LeaderEpoch > r.LatestEpoch() {
		r.assignEpoch(info.LeaderEpoch, base)
	}
}

func checkCRC(b []byte) error {
	if got, want := crc32.Checksum(b[offAttributes:], castagnoli), binary.BigEndian.Uint32(b[offCRC:]); got != want {
		return corrupt("crc32c %08x, header says %08x", got, want)
	}
	return nil
}

// BecomeLeader starts epoch at the log end and makes that durable before
// it returns (a Checkpoint), as Kafka writes leader-epoch-checkpoint in
// makeLeader: a restarted leader must still answer OffsetForLeaderEpoch
// for the epoch it led, even before any batch of it is durable. The owner
// calls it before the first append (and ack) of the new epoch. An epoch
// older than the newest known is refused (kerr.FencedLeaderEpoch).
func (r *ISRLog) BecomeLeader(epoch int32) error {
	if latest := r.LatestEpoch(); epoch < latest {
		return fmt.Errorf("become leader of epoch %d, log has %d: %w", epoch, latest, kerr.FencedLeaderEpoch)
	}
	r.assignEpoch(epoch, r.log.EndOffset())
	return r.Checkpoint()
}

// SetHighWatermark raises the high watermark to hw, clamped to the LEO (a
// follower's is min(leader HW, own LEO), Kafka's rule), and returns the
// value now in force. A lower hw changes nothing: the high watermark
// moves down only through TruncateTo.
func (r *ISRLog) SetHighWatermark(hw int64) (int64, error) {
	hw = min(hw, r.log.EndOffset())
	if cur := r.log.HighWatermark(); hw <= cur {
		return cur, nil
	}
	if err := r.log.SetHighWatermark(hw); err != nil {
		return r.log.HighWatermark(), fmt.Errorf("set high watermark: %w", err)
	}
	return hw, nil
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka does: for the current
// epoch, the LEO; for an older one, the start of the next epoch above it
// with the largest known epoch at or below it (KIP-279); for an unknown
// newer epoch, (-1, -1). For consumers (forConsumer) the offset is clamped
// to the high watermark, as KIP-392 requires, so a consumer is never told
// of records it cannot read.
func (r *ISRLog) EndOffsetFor(epoch int32, forConsumer bool) (leaderEpoch int32, endOffset int64) {
	r.mu.Lock()
	e, off := r.epochs.endOffset(epoch, r.log.EndOffset())
	r.mu.Unlock()
	if forConsumer && off >= 0 {
		off = min(off, r.log.HighWatermark())
	}
	return e, off
}

// LatestEpoch returns the newest leader epoch the log knows, or -1.
func (r *ISRLog) LatestEpoch() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epochs.latest()
}

// Epochs returns a copy of the epoch starts.
func (r *ISRLog) Epochs() []EpochStart {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]EpochStart(nil), r.epochs...)
}

func (r *ISRLog) assignEpoch(epoch int32, offset int64) {
	r.mu.Lock()
	r.epochs = r.epochs.assign(epoch, offset)
	r.mu.Unlock()
}

func (r *ISRLog) setEpochs(c epochCache) {
	r.mu.Lock()
	r.epochs = c
	r.mu.Unlock()
}
