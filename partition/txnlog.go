package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/internal/durable"
)

// OngoingTxn is a transaction in progress in this partition: its producer
// and the offset of its first batch here.
type OngoingTxn struct {
	ProducerID  int64 `json:"pid"`
	FirstOffset int64 `json:"first"`
}

// AbortedTxn is one entry of the aborted-transaction index (Kafka's
// AbortedTxn in .txnindex): a transaction of ProducerID that began at
// FirstOffset and whose ABORT marker is at LastOffset. LastStableOffset is
// the partition's LSO once the abort was written, ignoring the high
// watermark: the first offset of the earliest other ongoing transaction,
// or LastOffset+1.
type AbortedTxn struct {
	ProducerID       int64 `json:"pid"`
	FirstOffset      int64 `json:"first"`
	LastOffset       int64 `json:"last"`
	LastStableOffset int64 `json:"lso"`
}

// Isolation levels of Fetch and ListOffsets.
const (
	ReadUncommitted int8 = 0
	ReadCommitted   int8 = 1
)

// txnState is the log's transaction bookkeeping, owned by the mutators
// (writeMu): the ongoing transactions (producer id -> first offset) and
// the smallest first offset among them.
type txnState struct {
	ongoing map[int64]int64
	first   int64 // math.MaxInt64 when none
}

func newTxnState(from []OngoingTxn) txnState {
	t := txnState{ongoing: make(map[int64]int64, len(from)), first: math.MaxInt64}
	for _, o := range from {
		t.ongoing[o.ProducerID] = o.FirstOffset
		t.first = min(t.first, o.FirstOffset)
	}
	return t
}

// list returns the ongoing transactions sorted by first offset, then
// producer id; nil when there are none.
func (t *txnState) list() []OngoingTxn {
	if len(t.ongoing) == 0 {
		return nil
	}
	out := make([]OngoingTxn, 0, len(t.ongoing))
	for pid, first := range t.ongoing {
		out = append(out, OngoingTxn{ProducerID: pid, FirstOffset: first})
	}
	sortTxns(out)
	return out
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// isTxnBatch reports whether a batch takes part in transactions: the only
// batches the bookkeeping looks at, so that others cost one test.
func isTxnBatch(info BatchInfo) bool {
	return info.Attributes&(attrTransactional|attrControl) != 0 && info.ProducerID >= 0
}

// apply notes a stored batch at base: a transactional data batch opens its
// producer's transaction if none is open; a marker closes it, and an
// ABORT marker returns the index entry. A marker for a producer without an
// open transaction changes nothing and is not indexed, as in Kafka.
func (t *txnState) apply(info BatchInfo, base int64, m ControlMarker) (*AbortedTxn, bool) {
	pid := info.ProducerID
	first, open := t.ongoing[pid]
	if !info.Control() {
		if !open {
			t.ongoing[pid] = base
			t.first = min(t.first, base)
		}
		return nil, !open
	}
	if !open {
		return nil, false
	}
	delete(t.ongoing, pid)
	if first == t.first {
		t.first = math.MaxInt64
		for _, f := range t.ongoing {
			t.first = min(t.first, f)
		}
	}
	if m.Commit {
		return nil, true
	}
	return &AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: base, LastStableOffset: min(t.first, base+1)}, true
}

// checkTxnBatch decodes the marker of a control batch about to be
// appended, refusing one that is malformed; other batches pass.
func checkTxnBatch(b []byte, info BatchInfo) (ControlMarker, error) {
	if !info.Control() {
		return ControlMarker{}, nil
	}
	return controlMarker(b, info)
}

// noteTxn updates the bookkeeping for a batch just written to the active
// segment s at base (writeMu held) and returns the aborted-index entry to
// publish with it.
func (l *Log) noteTxn(s *segment, info BatchInfo, base int64, m ControlMarker) *AbortedTxn {
	ab, changed := l.txn.apply(info, base, m)
	if changed {
		s.txnSeen = true
	}
	return ab
}

// publishLSO recomputes the last stable offset after the high watermark,
// the start or the ongoing transactions changed (writeMu held, or Open).
func (l *Log) publishLSO() {
	l.lso.set(l.stableOffset(l.hw.load()))
}

func (l *Log) stableOffset(hw int64) int64 {
	return min(hw, max(l.txn.first, l.start))
}

// setHW moves the high watermark and the LSO with it.
func (l *Log) setHW(hw int64) {
	l.hw.set(hw)
	l.publishLSO()
}

// LastStableOffset returns the last stable offset (LSO): the first offset
// of the earliest ongoing transaction, or the high watermark if that is
// lower or none is ongoing, but never below the log start. A
// read_committed consumer reads up to it.
func (l *Log) LastStableOffset() int64 { return l.lso.load() }

// WatchLastStableOffset is WatchHighWatermark for the LSO: a
// read_committed fetch long-poll selects on its channel.
func (l *Log) WatchLastStableOffset() (lso int64, changed <-chan struct{}) {
	lso, changed, _ = l.lso.watch()
	return lso, changed
}

// ReadLimit returns the offset a consumer of the isolation level may read
// up to: the LSO for ReadCommitted, else the high watermark. Read and
// ListOffset take it as their upTo.
func (l *Log) ReadLimit(isolation int8) int64 {
	if isolation == ReadCommitted {
		return l.LastStableOffset()
	}
	return l.HighWatermark()
}

// checkTxnState refuses a non-transactional batch of a producer whose
// transaction is open here, as Kafka's appendDataBatch does
// (INVALID_TXN_STATE). The owners call it after the producer check.
func (l *Log) checkTxnState(info BatchInfo) error {
	if info.Attributes&(attrTransactional|attrControl) != 0 || !info.Idempotent() {
		return nil
	}
	l.writeMu.Lock()
	_, open := l.txn.ongoing[info.ProducerID]
	l.writeMu.Unlock()
	if open {
		return kerr.InvalidTxnState
	}
	return nil
}

// OngoingTransactions returns the transactions open at the log end,
// sorted by first offset.
func (l *Log) OngoingTransactions() []OngoingTxn {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	return l.txn.list()
}

// AbortedTransactions returns the aborted transactions that overlap
// [from, to), oldest marker first: those that began before to and whose
// marker lies at or after from. This is what a read_committed Fetch
// returns with the batches it read from from up to to, as Kafka's
// collectAbortedTxns does; like it, the walk stops at the first entry
// whose LastStableOffset reaches to, since no transaction begun before to
// is still open past it.
func (l *Log) AbortedTransactions(from, to int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	i := max(l.segmentFor(from), 0)
	for _, s := range l.segs[i:] {
		k := sort.Search(len(s.aborted), func(j int) bool { return s.aborted[j].LastOffset >= from })
		for _, a := range s.aborted[k:] {
			if a.FirstOffset < to {
				out = append(out, a)
			}
			if a.LastStableOffset >= to {
				return out
			}
		}
	}
	return out
}

// SeedTransactions sets the transactions open at the start of an empty log
// (right after Reset): those a snapshot install or a replica's rewind
// carries across, whose first batches lie below the new start. It is
// durable when it returns (the first segment's .txnindex holds them).
func (l *Log) SeedTransactions(txns []OngoingTxn) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	s := l.active()
	if len(l.segs) != 1 || s.size != 0 {
		return fmt.Errorf("partition: seed transactions: log %s is not empty", l.dir)
	}
	for _, t := range txns {
		if t.FirstOffset >= s.base || t.ProducerID < 0 {
			return fmt.Errorf("partition: seed transactions: producer %d from %d at log start %d", t.ProducerID, t.FirstOffset, s.base)
		}
	}
	l.txn = newTxnState(txns)
	l.mu.Lock() // transactionsAt reads txnBase
	s.txnBase = l.txn.list()
	l.mu.Unlock()
	s.txnSeen = len(s.txnBase) > 0
	if err := s.writeTxnIndex(l.fs); err != nil {
		return l.fail(fmt.Errorf("seed transactions: %w", err))
	}
	l.publishLSO()
	return nil
}

// txnIndexFile is the content of <base>.txnindex: the transactions open
// at the segment's base and the segment's aborted transactions, in
// marker order.
type txnIndexFile struct {
	Ongoing []OngoingTxn `json:"ongoing,omitempty"`
	Aborted []AbortedTxn `json:"aborted,omitempty"`
}

func encodeTxnIndex(s *segment) []byte {
	b, err := json.Marshal(txnIndexFile{Ongoing: s.txnBase, Aborted: s.aborted})
	if err != nil {
		panic(err) // plain structs of integers always encode
	}
	return sealCheckpoint(b)
}

func decodeTxnIndex(b []byte) (txnIndexFile, error) {
	var f txnIndexFile
	body, err := unsealCheckpoint(b, "txn index")
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(body, &f); err != nil {
		return f, fmt.Errorf("%w: txn index: %w", ErrCorruptLog, err)
	}
	return f, nil
}

// writeTxnIndex writes the segment's .txnindex when it has transaction
// state, and removes a file it no longer needs. A segment that never saw a
// transaction has no file, so non-transactional topics pay nothing. The
// file is replaced durably (internal/durable: temp file, fsync, rename,
// directory fsync), because the first segment's is the only record of the
// transactions open at its base: a torn rewrite must not lose them.
func (s *segment) writeTxnIndex(fsys FS) error {
	if !s.txnSeen {
		if !s.txnFile {
			return nil
		}
		s.txnFile = false
		return removeIfExists(fsys, s.path+txnIndexSuffix)
	}
	w := durable.Writer{FS: durableFS{fsys}}
	if err := w.WriteFile(s.path+txnIndexSuffix, encodeTxnIndex(s), 0o644); err != nil {
		return fmt.Errorf("write txn index %d: %w", s.base, err)
	}
	s.txnFile = true
	return nil
}

// readTxnBase returns the transactions open at the base of segment s from
// its .txnindex (none when there is no file), for the first segment of a
// log being recovered: nothing below it is left to rebuild them from.
func (l *Log) readTxnBase(s *segment) []OngoingTxn {
	b, err := readFile(l.fs, s.path+txnIndexSuffix)
	if err != nil {
		return nil
	}
	f, err := decodeTxnIndex(b)
	if err != nil {
		l.logger.Warn("ignoring damaged txn index of the first segment; transactions open at its base are lost", "segment", s.base, "err", err)
		return nil
	}
	return f.Ongoing
}

// txnIndexMatches reports whether the segment's .txnindex holds what
// recovery rebuilt (or is absent when it should be).
// It also notes whether the file exists, so that a rewrite removes one
// the segment no longer needs.
func (l *Log) txnIndexMatches(s *segment) bool {
	b, err := readFile(l.fs, s.path+txnIndexSuffix)
	s.txnFile = err == nil
	if !s.txnSeen {
		return !s.txnFile
	}
	return s.txnFile && bytes.Equal(b, encodeTxnIndex(s))
}

// startSegmentTxns records the ongoing transactions at the base of a new
// segment (roll, recovery).
func (l *Log) startSegmentTxns(s *segment) {
	s.txnBase = l.txn.list()
	s.txnSeen = len(s.txnBase) > 0
}

// replayTxns rebuilds the bookkeeping of segment s cut before the batch at
// byte position limit: from its base's open transactions, replaying its
// transactional batches. It returns the state and the aborted entries
// that remain.
func (l *Log) replayTxns(s *segment, limit int64) (txnState, []AbortedTxn, error) {
	if !s.txnSeen {
		return newTxnState(s.txnBase), nil, nil
	}
	return replaySegmentTxns(s, s.txnBase, limit)
}

// transactionsAt returns the transactions open just before the batch
// holding off (the log end: those open now). Any goroutine may call it.
func (l *Log) transactionsAt(off int64) ([]OngoingTxn, error) {
	l.mu.RLock()
	i := l.segmentFor(off)
	if i < 0 || off < l.start || off > l.active().next {
		l.mu.RUnlock()
		return nil, &OffsetOutOfRangeError{Offset: off, Start: l.start, End: l.active().next}
	}
	s := l.segs[i]
	s.acquire()
	v, base := s.view(), s.txnBase
	l.mu.RUnlock()
	defer s.release()
	h, ok, err := v.find(off)
	if err != nil {
		return nil, err
	}
	if !ok {
		h.pos = v.size
	}
	t, _, err := replaySegmentTxns(s, base, h.pos)
	return t.list(), err
}

// replaySegmentTxns replays the transactional batches of s before byte
// position limit onto base, the transactions open at its start.
func replaySegmentTxns(s *segment, base []OngoingTxn, limit int64) (txnState, []AbortedTxn, error) {
	t := newTxnState(base)
	var aborted []AbortedTxn
	w := newWalker(s.f, 0, limit, walkBufSize)
	defer w.close()
	for {
		h, hdr, err := w.nextHeader()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return t, aborted, nil
			}
			return t, nil, fmt.Errorf("replay transactions of segment %d: %w: %w", s.base, ErrCorruptLog, err)
		}
		info := storedInfo(h, hdr)
		if !isTxnBatch(info) {
			continue
		}
		var m ControlMarker
		if info.Control() {
			b := make([]byte, h.size)
			if _, err := s.f.ReadAt(b, h.pos); err != nil {
				return t, nil, fmt.Errorf("replay transactions of segment %d: %w", s.base, err)
			}
			if m, err = controlMarker(b, info); err != nil {
				continue // never appended (append refuses it); recovery skips it too
			}
		}
		if ab, _ := t.apply(info, h.base, m); ab != nil {
			aborted = append(aborted, *ab)
		}
	}
}

// recoverTxn replays a batch recovery read back into the bookkeeping. A
// control batch whose marker does not decode (append refuses those) is
// passed over.
func (l *Log) recoverTxn(s *segment, info BatchInfo, base int64, b []byte) {
	if !isTxnBatch(info) {
		return
	}
	m, err := checkTxnBatch(b, info)
	if err != nil {
		l.logger.Warn("ignoring a control batch without a transaction marker", "segment", s.base, "offset", base, "err", err)
		return
	}
	if ab := l.noteTxn(s, info, base, m); ab != nil {
		s.aborted = append(s.aborted, *ab)
	}
}

func fileExists(fsys FS, name string) bool {
	_, err := readFile(fsys, name)
	return err == nil
}

// RestoreOpenTransactions adds transactions that its owner knows to be
// open at the log end but the log lost (a damaged .txnindex of the first
// segment, whose open transactions recovery cannot rebuild): being open
// at the end, they were open throughout, so each is added to every
// segment's base and to the open set, and the first segment's file is
// rewritten durably. It returns how many it added; a transaction the log
// already holds, or that begins at or after the first segment's base
// (the log would have seen that), is left alone.
func (l *Log) RestoreOpenTransactions(txns []OngoingTxn) (int, error) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	var missing []OngoingTxn
	for _, t := range txns {
		if _, ok := l.txn.ongoing[t.ProducerID]; !ok && t.FirstOffset < l.segs[0].base && t.ProducerID >= 0 {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	for _, t := range missing {
		l.txn.ongoing[t.ProducerID] = t.FirstOffset
		l.txn.first = min(l.txn.first, t.FirstOffset)
	}
	l.mu.Lock()
	for _, s := range l.segs {
		s.txnBase = append(slices.Clone(s.txnBase), missing...)
		sortTxns(s.txnBase)
		s.txnSeen = true
	}
	l.mu.Unlock()
	if err := l.segs[0].writeTxnIndex(l.fs); err != nil {
		return 0, l.fail(fmt.Errorf("restore open transactions: %w", err))
	}
	l.publishLSO()
	return len(missing), nil
}

func sortTxns(ts []OngoingTxn) {
	slices.SortFunc(ts, func(a, b OngoingTxn) int {
		if a.FirstOffset != b.FirstOffset {
			return compareInt64(a.FirstOffset, b.FirstOffset)
		}
		return compareInt64(a.ProducerID, b.ProducerID)
	})
}
