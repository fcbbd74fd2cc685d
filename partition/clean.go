package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"
)

// Compaction (cleanup.policy=compact). Clean rewrites the sealed segments
// of the cleanable range, keeping the latest record of each key, as
// Kafka's LogCleaner does, one segment at a time:
//
//   - The cleanable range is the whole sealed segments below UpTo (the
//     high watermark: only committed records are cleaned), below the
//     active segment, and below the first segment holding a record newer
//     than MinCompactionLag. Its dirty part starts where the last
//     cleaning ended (the cleaner checkpoint).
//   - The offset map holds, for every key in the dirty part, the offset of
//     its latest record there. A record of the cleanable range survives if
//     no later record of its key is in the map, it has a key, and it is
//     not a tombstone (a null value) of the already clean part older than
//     DeleteRetention before that part's newest record. Kafka measures
//     the tombstones' age from when their segment was cleaned; raftq
//     measures it in record timestamps, so that the result depends on the
//     log alone and every replica that cleans the same range writes the
//     same bytes.
//   - A batch keeps its base offset, last offset delta, timestamps,
//     producer id, epoch and sequence, as Kafka's cleaner keeps them for
//     v2 batches; only its records, their count and its CRC change. A
//     batch left with no record stays as an empty batch if it is its
//     producer's last in the range (producer state is rebuilt from the
//     log); other emptied batches of one leader epoch in a row become one
//     empty filler batch spanning their offsets. The log thus stays
//     gap-free: every offset below the log end lies in a stored batch.
//   - Transactions, as Kafka's cleaner treats them: the cleanable range
//     also ends at the last stable offset, so every transactional batch
//     in it belongs to a decided transaction. The records of aborted
//     transactions (the aborted index says which) are dropped and never
//     enter the offset map; committed transactional records are compacted
//     like any. Markers are kept, always (Kafka drops a marker once
//     delete.retention.ms has passed and its transaction has no data
//     left; raftq does not, so the log's transaction state replays the
//     same from every copy). A transactional batch left with no record
//     stays as an empty batch, never folded into a filler: the batches'
//     producers and attributes, and so the open transactions and the
//     aborted index rebuilt from them, are the same before and after.
//   - A cleaned segment is written to <base>.cleaned, fsynced, and renamed
//     over <base>.log, and the directory is fsynced: a crash leaves the
//     old segment or the new one, never a mix, and recovery deletes a
//     leftover .cleaned. The index
//     files are removed before the rename (recovery rebuilds missing
//     ones) and written after it.

const cleanedSuffix = ".cleaned"

// CleanConfig is one cleaning's settings: a topic's compaction configs
// and the bound of what may be cleaned.
type CleanConfig struct {
	// UpTo bounds the cleanable range: only offsets below it (the high
	// watermark) are cleaned. Clean lowers it to the last stable offset.
	UpTo int64
	// Now is when lags are measured.
	Now time.Time
	// MinCleanableRatio is min.cleanable.dirty.ratio: clean only when the
	// dirty part is at least this share of the cleanable bytes.
	MinCleanableRatio float64
	// MinCompactionLag is min.compaction.lag.ms: a record stays uncleaned
	// until this much older than Now.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: clean whatever the ratio
	// once the oldest dirty record is this old (0: no bound).
	MaxCompactionLag time.Duration
	// DeleteRetention is delete.retention.ms: how long tombstones stay
	// after they were cleaned.
	DeleteRetention time.Duration
	// Throttle, if set, is told the bytes the cleaner is about to read or
	// write and may sleep (--log-cleaner-io-bytes-per-sec).
	Throttle func(bytes int)
}

// CleanStats reports one Clean call.
type CleanStats struct {
	// Cleaned is false when the log was left alone; Reason says why.
	Cleaned bool
	Reason  string
	// DirtyRatio is the dirty share of the cleanable bytes.
	DirtyRatio float64
	// Segments rewritten, bytes before and after, records dropped.
	Segments       int
	BytesBefore    int64
	BytesAfter     int64
	RecordsDropped int64
	// CleanedTo is the end of the cleaned range: the next cleaning's
	// dirty part starts there.
	CleanedTo int64
}

// Clean compacts the log (see above). It runs beside appends and reads,
// holding the write lock only to swap each rewritten segment in; it must
// not run concurrently with another Clean. A corrupt batch stops it with
// an error wrapping ErrCorruptLog and changes nothing more; segments
// swapped before stay swapped (each swap is whole).
func (l *Log) Clean(cfg CleanConfig) (CleanStats, error) {
	cfg.UpTo = min(cfg.UpTo, l.LastStableOffset())
	views, firstDirty, err := l.cleanable(cfg)
	defer releaseViews(views)
	if err != nil || len(views) == 0 {
		return CleanStats{Reason: "nothing cleanable"}, err
	}
	st := CleanStats{CleanedTo: views[len(views)-1].next}
	st.DirtyRatio = dirtyRatio(views, firstDirty)
	if !l.cleaningDue(cfg, views, firstDirty, st.DirtyRatio) {
		st.Reason = fmt.Sprintf("dirty ratio %.2f below %.2f", st.DirtyRatio, cfg.MinCleanableRatio)
		return st, nil
	}
	aborted := l.AbortedTransactions(views[0].seg.base, views[len(views)-1].next)
	plan, err := planClean(views, firstDirty, cfg, newAbortedRanges(aborted))
	if err != nil {
		return st, err
	}
	for _, v := range views {
		n, err := l.cleanSegment(v, plan, cfg)
		if err != nil {
			return st, err
		}
		st.Segments += n.segments
		st.BytesBefore += v.size
		st.BytesAfter += n.size
		st.RecordsDropped += n.dropped
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return st, fmt.Errorf("clean: sync dir: %w", err)
	}
	if err := l.writeCleanerCheckpoint(st.CleanedTo); err != nil {
		return st, err
	}
	st.Cleaned = true
	return st, nil
}

// cleanable returns views (with references) of the sealed segments Clean
// may rewrite, and where their dirty part starts.
func (l *Log) cleanable(cfg CleanConfig) ([]segView, int64, error) {
	firstDirty, err := l.readCleanerCheckpoint()
	if err != nil {
		return nil, 0, err
	}
	lagCut := cfg.Now.Add(-cfg.MinCompactionLag).UnixMilli()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, 0, ErrClosed
	}
	var views []segView
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.next > cfg.UpTo || cfg.MinCompactionLag > 0 && s.maxTS > lagCut {
			break
		}
		if s.next <= l.start {
			continue
		}
		s.acquire()
		views = append(views, s.view())
	}
	return views, max(firstDirty, l.start), nil
}

func releaseViews(views []segView) {
	for _, v := range views {
		v.seg.release()
	}
}

// dirtyRatio is the share of the bytes in segments that reach past
// firstDirty.
func dirtyRatio(views []segView, firstDirty int64) float64 {
	var total, dirty int64
	for _, v := range views {
		total += v.size
		if v.next > firstDirty {
			dirty += v.size
		}
	}
	if total == 0 {
		return 0
	}
	return float64(dirty) / float64(total)
}

// cleaningDue applies min.cleanable.dirty.ratio and max.compaction.lag.ms.
func (l *Log) cleaningDue(cfg CleanConfig, views []segView, firstDirty int64, ratio float64) bool {
	if ratio == 0 {
		return false
	}
	if ratio >= cfg.MinCleanableRatio {
		return true
	}
	if cfg.MaxCompactionLag <= 0 {
		return false
	}
	cut := cfg.Now.Add(-cfg.MaxCompactionLag).UnixMilli()
	for _, v := range views {
		if v.next > firstDirty && len(v.times) > 0 && v.times[0].ts <= cut {
			return true
		}
	}
	return false
}

// cleanPlan is what a cleaning keeps: the offset map and the tombstone
// horizon, from one pass over the cleanable range.
type cleanPlan struct {
	latest     offsetMap // key -> offset of its latest record in the dirty part
	firstDirty int64
	horizon    int64           // tombstones of the clean part below this timestamp go
	lastOf     map[int64]int64 // producer id -> base of its last batch in the range
	aborted    abortedRanges
}

// abortedRanges holds, per producer, the offset ranges of its aborted
// transactions, oldest first (one producer's transactions never overlap).
type abortedRanges map[int64][]AbortedTxn

func newAbortedRanges(txns []AbortedTxn) abortedRanges {
	a := abortedRanges{}
	for _, t := range txns {
		a[t.ProducerID] = append(a[t.ProducerID], t)
	}
	return a
}

// holds reports whether a transactional data batch of pid at off belongs
// to an aborted transaction.
func (a abortedRanges) holds(pid, off int64) bool {
	for _, t := range a[pid] {
		if t.FirstOffset <= off && off <= t.LastOffset {
			return true
		}
	}
	return false
}

// abortedData reports whether a stored batch holds records of an aborted
// transaction.
func (p *cleanPlan) abortedData(info BatchInfo, base int64) bool {
	return info.Transactional() && !info.Control() && p.aborted.holds(info.ProducerID, base)
}

// planClean reads the cleanable range once: the offset map over its dirty
// part, each producer's last batch, and the clean part's newest
// timestamp.
func planClean(views []segView, firstDirty int64, cfg CleanConfig, aborted abortedRanges) (*cleanPlan, error) {
	p := &cleanPlan{latest: offsetMap{index: map[string]int{}}, firstDirty: firstDirty, lastOf: map[int64]int64{}, horizon: -1 << 62, aborted: aborted}
	cleanMaxTS := int64(-1 << 62)
	for _, v := range views {
		if cfg.Throttle != nil {
			cfg.Throttle(int(v.size))
		}
		err := eachBatch(v, func(h batchHeader, b []byte) error {
			info, err := ValidateStoredBatch(b)
			if err != nil {
				return err
			}
			if info.ProducerID >= 0 {
				p.lastOf[info.ProducerID] = h.base
			}
			if h.last < firstDirty {
				cleanMaxTS = max(cleanMaxTS, info.MaxTimestamp)
				return nil
			}
			if info.Control() || p.abortedData(info, h.base) {
				return nil // neither shadows a key
			}
			return eachRecord(b, info, func(r record) error {
				if r.offset >= firstDirty && r.key != nil {
					p.latest.put(r.key, r.offset)
				}
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("clean: segment %d: %w: %w", v.seg.base, ErrCorruptLog, err)
		}
	}
	if cleanMaxTS > -1<<62 {
		p.horizon = cleanMaxTS - cfg.DeleteRetention.Milliseconds()
	}
	return p, nil
}

// offsetMap maps keys to offsets, allocating only for a key it has not
// seen (a map assignment with a []byte key converts it to a new string).
type offsetMap struct {
	index   map[string]int
	offsets []int64
}

func (m *offsetMap) put(key []byte, off int64) {
	if i, ok := m.index[string(key)]; ok {
		m.offsets[i] = off
		return
	}
	m.index[string(key)] = len(m.offsets)
	m.offsets = append(m.offsets, off)
}

func (m *offsetMap) get(key []byte) (int64, bool) {
	i, ok := m.index[string(key)]
	if !ok {
		return 0, false
	}
	return m.offsets[i], true
}

// keep reports whether record r of a batch with maxTS survives.
func (p *cleanPlan) keep(r record, batchMaxTS int64) bool {
	if r.key == nil {
		return false // a compacted topic refuses keyless records; older ones go
	}
	if at, ok := p.latest.get(r.key); ok && at > r.offset {
		return false
	}
	if r.tombstone && r.offset < p.firstDirty && batchMaxTS < p.horizon {
		return false
	}
	return true
}

// eachBatch calls fn with every batch of the segment view.
func eachBatch(v segView, fn func(batchHeader, []byte) error) error {
	w := newWalker(v.seg.f, 0, v.size, scanBufSize)
	defer w.close()
	for {
		h, b, err := w.nextBatch()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, b); err != nil {
			return err
		}
	}
}

// cleanResult is what cleaning one segment did.
type cleanResult struct {
	segments int
	size     int64
	dropped  int64
}

// cleanSegment rewrites one segment by plan and swaps it in; a segment
// that loses nothing is left as it is.
func (l *Log) cleanSegment(v segView, plan *cleanPlan, cfg CleanConfig) (cleanResult, error) {
	out, dropped, err := cleanSegmentBytes(v, plan)
	if err != nil {
		return cleanResult{}, fmt.Errorf("clean: segment %d: %w: %w", v.seg.base, ErrCorruptLog, err)
	}
	if dropped == 0 && int64(len(out)) == v.size {
		return cleanResult{size: v.size}, nil
	}
	if cfg.Throttle != nil {
		cfg.Throttle(len(out))
	}
	if err := l.swapSegment(v, out); err != nil {
		return cleanResult{}, err
	}
	return cleanResult{segments: 1, size: int64(len(out)), dropped: dropped}, nil
}

// cleanSegmentBytes returns the cleaned bytes of a segment and how many
// records it dropped.
func cleanSegmentBytes(v segView, plan *cleanPlan) ([]byte, int64, error) {
	var out []byte
	var dropped int64
	var run filler
	err := eachBatch(v, func(h batchHeader, b []byte) error {
		info, err := ValidateStoredBatch(b)
		if err != nil {
			return err
		}
		if info.Control() {
			out = run.flush(out)
			out = append(out, b...)
			return nil
		}
		keep := func(r record) bool { return plan.keep(r, info.MaxTimestamp) }
		if plan.abortedData(info, h.base) {
			keep = func(record) bool { return false }
		}
		kept, n, err := filterBatch(b, info, keep)
		if err != nil {
			return err
		}
		dropped += int64(int(info.NumRecords) - n)
		switch {
		case n > 0:
			out = run.flush(out)
			out = append(out, kept...)
		case info.Transactional(), info.ProducerID >= 0 && plan.lastOf[info.ProducerID] == h.base:
			out = run.flush(out)
			out = append(out, kept...) // empty, but its producer's last
		default:
			out = run.add(out, info, h)
		}
		return nil
	})
	return run.flush(out), dropped, err
}

// record is one record of a batch, as the cleaner reads it.
type record struct {
	raw       []byte // the whole record, length prefix included
	offset    int64
	key       []byte // nil: no key
	tombstone bool
}

// eachRecord calls fn with every record of the stored batch b.
func eachRecord(b []byte, info BatchInfo, fn func(record) error) error {
	recs, err := batchRecords(b, info)
	if err != nil {
		return err
	}
	for i := int32(0); i < info.NumRecords; i++ {
		r, rest, err := nextRecord(recs, info.BaseOffset)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err := fn(r); err != nil {
			return err
		}
		recs = rest
	}
	return nil
}

// batchRecords returns b's records, decompressed.
func batchRecords(b []byte, info BatchInfo) ([]byte, error) {
	if info.Compression() == CodecNone {
		return b[batchHeaderSize:], nil
	}
	release := acquireDecompression()
	defer release()
	return decompressRecords(b[batchHeaderSize:], info.Compression(), MaxDecompressedBytes)
}

// nextRecord parses the record at the head of recs.
func nextRecord(recs []byte, base int64) (record, []byte, error) {
	length, k := binary.Varint(recs)
	if k <= 0 || length < minRecordBytes || length > int64(len(recs)-k) {
		return record{}, nil, errors.New("bad length prefix")
	}
	body := recs[k : k+int(length)]
	r := bodyReader{b: body[1:]}
	r.varint() // timestamp delta
	delta := r.varint()
	keyLen := r.varint()
	var key []byte
	if r.err == nil && keyLen >= 0 {
		if keyLen > int64(len(r.b)) {
			return record{}, nil, errors.New("key runs past the record")
		}
		key, r.b = r.b[:keyLen], r.b[keyLen:]
	}
	valLen := r.varint()
	if r.err != nil {
		return record{}, nil, r.err
	}
	return record{raw: recs[:k+int(length)], offset: base + delta, key: key, tombstone: valLen < 0}, recs[k+int(length):], nil
}

// filterBatch returns b with only the records keep accepts, and how many
// it kept: b itself when all, an empty batch (the header, no records)
// when none. The header keeps every field but the count, length and CRC.
func filterBatch(b []byte, info BatchInfo, keep func(record) bool) ([]byte, int, error) {
	var recs []byte
	n := 0
	err := eachRecord(b, info, func(r record) error {
		if keep(r) {
			recs = append(recs, r.raw...)
			n++
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if n == int(info.NumRecords) {
		return b, n, nil
	}
	payload := recs
	if info.Compression() != CodecNone && n > 0 {
		if payload, err = compressRecords(recs, info.Compression()); err != nil {
			return nil, 0, err
		}
	}
	out := make([]byte, batchHeaderSize, batchHeaderSize+len(payload))
	copy(out, b[:batchHeaderSize])
	if n == 0 {
		out[offAttributes+1] &^= attrCodecMask // no payload to decode
	}
	out = append(out, payload...)
	binary.BigEndian.PutUint32(out[offNumRecords:], uint32(n))
	return sealBatch(out), n, nil
}

// sealBatch sets a built batch's length and CRC.
func sealBatch(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-framePrefix))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// filler gathers a run of emptied batches of one leader epoch into one
// empty batch spanning their offsets.
type filler struct {
	open         bool
	base, last   int64
	epoch        int32
	firstTS, max int64
}

func (f *filler) add(out []byte, info BatchInfo, h batchHeader) []byte {
	if f.open && f.epoch != info.LeaderEpoch {
		out = f.flush(out)
	}
	if !f.open {
		*f = filler{open: true, base: h.base, epoch: info.LeaderEpoch, firstTS: info.FirstTimestamp, max: info.MaxTimestamp}
	}
	f.last, f.max = h.last, max(f.max, info.MaxTimestamp)
	return out
}

func (f *filler) flush(out []byte) []byte {
	if !f.open {
		return out
	}
	f.open = false
	b := make([]byte, batchHeaderSize)
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(f.base))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(f.epoch))
	b[offMagic] = 2
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(f.last-f.base))
	binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(f.firstTS))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(f.max))
	binary.BigEndian.PutUint64(b[offProducerID:], ^uint64(0))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], ^uint16(0))
	binary.BigEndian.PutUint32(b[offBaseSequence:], ^uint32(0))
	return append(out, sealBatch(b)...)
}

// swapSegment replaces the segment of view v with the cleaned bytes, if
// the log still holds it as v saw it (else it leaves it for the next
// cleaning).
func (l *Log) swapSegment(v segView, data []byte) error {
	tmp := v.seg.path + cleanedSuffix
	if err := writeFile(l.fs, tmp, data, true); err != nil {
		_ = removeIfExists(l.fs, tmp)
		return fmt.Errorf("clean: write segment %d: %w", v.seg.base, err)
	}
	l.crashPoint("clean-written")
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	i, ok := l.stillHolds(v)
	if !ok || l.writable() != nil {
		return removeIfExists(l.fs, tmp)
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(l.fs, v.seg.path+suffix); err != nil {
			return l.fail(fmt.Errorf("clean: segment %d: %w", v.seg.base, err))
		}
	}
	l.crashPoint("clean-indexes-removed")
	if err := l.fs.Rename(tmp, v.seg.path+logSuffix); err != nil {
		return l.fail(fmt.Errorf("clean: swap segment %d: %w", v.seg.base, err))
	}
	// The rename is durable before anything relies on it: a directory
	// entry that a power cut could lose would take the segment with it.
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("clean: swap segment %d: sync dir: %w", v.seg.base, err))
	}
	l.crashPoint("clean-swapped")
	s, err := l.loadCleaned(v.seg, data)
	if err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	old := l.segs[i]
	l.segs[i] = s
	l.mu.Unlock()
	old.release()
	return nil
}

// stillHolds finds v's segment in the log, unchanged since v was taken.
func (l *Log) stillHolds(v segView) (int, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i, s := range l.segs[:len(l.segs)-1] {
		if s == v.seg {
			return i, s.size == v.size && s.next == v.next
		}
	}
	return 0, false
}

// loadCleaned opens the swapped-in segment file of old and indexes data,
// its contents, writing the index files. The transaction state carries
// over: cleaning keeps every batch's offsets, attributes and producer, and
// every marker.
func (l *Log) loadCleaned(old *segment, data []byte) (*segment, error) {
	base, path := old.base, old.path
	f, err := l.fs.OpenFile(path+logSuffix, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("clean: open segment %d: %w", base, err)
	}
	s := newSegment(base, path, f)
	s.txnBase, s.txnSeen, s.txnFile, s.aborted = old.txnBase, old.txnSeen, old.txnFile, old.aborted
	for pos := int64(0); pos < int64(len(data)); {
		h, err := parseHeader(data[pos:], pos)
		if err != nil {
			s.release()
			return nil, fmt.Errorf("clean: segment %d: %w", base, err)
		}
		s.addBatch(h, l.limits().IndexIntervalBytes)
		pos = h.end()
	}
	s.seal()
	if err := s.writeIndexes(l.fs); err == nil {
		err = s.sync(l.fs)
	} else {
		s.release()
		return nil, fmt.Errorf("clean: segment %d indexes: %w", base, err)
	}
	return s, nil
}

// CheckKeys refuses a produced batch holding a record without a key, as
// Kafka refuses one for a compacted topic: the cleaner could never keep
// it. The batch must have passed ValidateBatch.
func CheckKeys(b []byte) error {
	info, err := ParseBatchHeader(b)
	if err != nil {
		return err
	}
	return eachRecord(b, info, func(r record) error {
		if r.key == nil {
			return invalid("compacted topic cannot accept a record without a key (offset delta %d)", r.offset-info.BaseOffset)
		}
		return nil
	})
}
