// Package partition holds a partition replica's log: Kafka v2 record
// batches in segment files with sparse offset and time indexes, crash
// recovery, truncation, retention and high-watermark waiters. The
// partition's replicated state machine (applying raft entries, producer
// dedup, leader epochs) is built on Log in this package.
//
// # On disk
//
// A log is a directory (log/<topic>-<partition>/ in a node's data dir):
//
//	00000000000000000000.log        batches, exactly as produced, header stamped
//	00000000000000000000.index      sparse offset index
//	00000000000000000000.timeindex  time index
//	00000000000000000000.txnindex   transactions (only if the segment has any)
//	00000000000000004711.log ...    the next segment, named by its base offset
//	partition.checkpoint            log start offset and recovery point
//
// A .log file is a sequence of Kafka v2 RecordBatches (magic 2), byte for
// byte what the producer sent except baseOffset and partitionLeaderEpoch,
// which Append stamps (both lie outside the CRC-32C, so the CRC stays
// valid). Offsets are contiguous within and across segments.
//
// The .index file holds 8-byte entries (relative offset uint32, position
// uint32, big-endian, Kafka's layout), one for the first batch after every
// Config.IndexIntervalBytes bytes (default 4 KiB). Kafka indexes a batch's
// last offset; we index its base offset. The .timeindex file holds 12-byte
// entries (timestamp int64, relative offset uint32) added next to offset
// entries whenever the largest timestamp so far grew, plus one when the
// segment is sealed: "every batch up to the one at this offset has a max
// timestamp <= ts". Both indexes also live in memory (under 1% of the log
// size at the default interval). The files are hints: recovery rebuilds
// both from the batches it reads and rewrites a file that differs (a
// damaged index); with Config.UnsafeSkipCRCChecks it adopts them unread
// for segments below the recovery point if they rise, stay inside the
// file and agree with the batch at their last entry. The active segment's index files are written
// when it is sealed (rolled) and at Close, not on every append.
//
// partition.checkpoint is a small text file with a CRC, replaced atomically
// (temp file, fsync, rename, directory fsync). It records the log start
// offset (DeleteRecords and retention move it, possibly into the middle of
// a segment) and the recovery point: an offset below which every segment
// byte and index file is known durable.
//
// # Appending
//
// ValidateBatch is the full check the broker runs at produce time, before
// proposing a batch to raft: frame length, exactly one batch, magic 2,
// CRC-32C (hardware-accelerated), record count against lastOffsetDelta,
// size, and, for uncompressed batches, every record's fields (lengths,
// offset delta, key, value, headers; nothing is copied). CheckRecords does
// the same for a compressed batch after decompressing it, so that a
// payload no consumer can decode is refused at produce, as Kafka refuses
// it. It returns BatchInfo: the
// header facts producer dedup needs. Rejections are *BatchError values
// wrapping ErrCorruptBatch, ErrInvalidRecord or ErrBatchTooLarge; ErrorCode
// maps them (and the other errors here) to Kafka codes.
//
// Recompress (recompress.go) rewrites a validated batch into another
// codec, for topics whose compression.type names one: the leader calls it
// before proposing, so every replica stores the same bytes. It checks the
// decompressed records' framing. Decompression at produce stops at
// MaxDecompressedBytes (64 MiB), so a small payload that claims gigabytes
// is refused instead of allocated, and at most GOMAXPROCS batches (2 at
// least) are decompressed at once, so many producers cannot multiply it.
//
// Append validates again and appends; AppendValidated, for the raft apply
// path, checks only the header (constant cost). Both take the leader epoch
// to stamp, assign the next offsets, and return the batch's first and last
// offset. Neither fsyncs: Sync does, explicitly. The caller's bytes are
// never modified.
//
// # Reading
//
// Read(offset, maxBytes, upTo) returns whole batches from one segment,
// starting with the batch that contains offset: at least one even if it is
// larger than maxBytes, more while they fit, none that reaches upTo (the
// high watermark). The segment is found by binary search over base
// offsets, the batch by the sparse index and a short header walk (a read
// touches about one index interval of headers, whatever its size). Offsets
// below the start or above the end give *OffsetOutOfRangeError. Read
// copies the bytes after releasing Log.mu, holding a reference on the
// segment (a span) meanwhile, so a retention that deletes the segment
// concurrently does not close the file under it. A zero-copy read
// (sendfile from the segment file) was built and removed: it was no
// faster on loopback from cache (BENCHMARKS.md).
//
// A read_committed consumer reads up to the last stable offset instead
// (ReadLimit, "Transactions" below).
//
// HighWatermark, SetHighWatermark, WatchHighWatermark (value plus a channel
// closed at the next change, for fetch long-polls over many partitions),
// WaitHighWatermark (blocks with a context) and WatchEnd let readers wait
// without polling. The high watermark is kept in memory only: Open starts
// it at the log start offset and the owner sets it.
//
// # Durability and recovery
//
//   - Append and Roll write without fsync. Sync fdatasyncs the segments
//     written since the last Sync (and their index files once sealed), the
//     directory when files came or went, and then the checkpoint if sealed
//     segments became durable or the start moved.
//   - Truncate and Reset are durable when they return (the checkpoint's
//     recovery point is lowered first, then files are cut and synced), so
//     discarded batches never come back after a crash.
//   - AdvanceStart (DeleteRecords, retention) deletes whole segments at
//     once; the new start is durable at the next Sync.
//   - Close syncs everything, writes the active segment's indexes and a
//     checkpoint whose recovery point is the log end, so the next Open reads
//     only a few KiB per segment.
//   - Open recovers: segments wholly below the checkpointed start are
//     removed; every other segment is read in full, each batch validated
//     (CRC-32C, record framing) and its offset checked, its indexes
//     rebuilt. The first bad byte ends the log: the file is cut there and
//     later segments are removed, whether the damage is a torn tail above
//     the recovery point or bit rot (or a truncation) in a sealed segment
//     far below it. A segment below the recovery point that reads whole
//     and whose index files match is left untouched (nothing rewritten or
//     synced). If recovery changed anything it syncs the result before
//     returning, so discarded bytes cannot resurface after a second
//     crash. The cost is one read of the log per open (the CRC is
//     hardware-accelerated, so it runs at disk speed); Kafka reads only
//     above its recovery point after an unclean shutdown, and serves bit
//     rot below it. Config.UnsafeSkipCRCChecks (the server's hidden
//     --unsafe-skip-crc-checks, to show what the check catches) trusts
//     segments ending at or below the recovery point after a cheap check
//     (indexes rise, the batch at the last index entry is where it says,
//     headers chain exactly to the end of the file), as before.
//   - A damaged partition.checkpoint (its CRC) is ignored: every segment
//     is read from the first, the start falls back to the first segment's
//     base (a raft replica's checkpoint moves it back), and a new one is
//     written.
//   - A failed write or fsync (ENOSPC, EIO) makes the log refuse every
//     further change with an error wrapping ErrFailed and the cause (so
//     errors.Is(err, syscall.ENOSPC) works); reads keep working. After a
//     failed fsync the page cache cannot be trusted, so the owner must
//     reopen the log (the node restarts the partition), and recovery cuts
//     whatever partial bytes the failure left.
//
// # Invariants
//
//   - Segments are contiguous: each starts at the offset where the previous
//     one ends; the last one is active and takes all appends.
//   - start <= end, and start lies in the first segment; high watermark <= end.
//   - Published segment state (size, next offset, index slices) only grows
//     between truncations, and a truncation replaces index slices rather
//     than reusing them, so a reader's snapshot stays valid.
//   - Bytes at or past the published size of a segment are never read.
//   - Nothing below the recovery point is modified without first lowering
//     the recovery point durably, except by Clean, which replaces a sealed
//     segment whole: the new file is durable before a rename puts it in
//     place, the rename before its indexes are written, and the indexes
//     before Clean moves on, so a crash finds either segment, valid.
//   - Every offset below the end lies in a stored batch. A cleaned batch
//     may hold fewer records than offsets (Kafka keeps a v2 batch's base
//     and last offset when its cleaner drops records), or none.
//
// # Goroutines and locks
//
// One goroutine (the raft apply loop) owns the mutators: Append,
// AppendValidated, AppendReplica, Roll, Sync, Truncate, Reset, AdvanceStart,
// ApplyRetention, SetHighWatermark and Close. They are serialised by
// writeMu regardless. Any number of goroutines read: Read,
// ScanBatches, ListOffset, OffsetForTimestamp, RetentionOffset, the offset getters and
// the waiters.
//
//   - writeMu: held by a mutator for its whole call, I/O included.
//   - mu (RWMutex): guards the published state (segment list and their
//     sizes, next offsets and indexes, start, failure, closed). Mutators take
//     it for writing only to publish, never across I/O; readers take it for
//     reading to snapshot a segment and take a reference, then release it
//     before any I/O.
//   - watched.mu (one each for the high watermark, the end and the last
//     stable offset): guards the waiters' channel.
//   - segment.refs: atomic count (the log's own plus one per reader); the
//     last release closes the file, so retention never pulls a file from
//     under a reader.
//   - Replica.mu: guards the epoch starts and the staged snapshots.
//   - ISRLog.mu: guards an ISR replica's epoch starts; a leaf, never held
//     across I/O or while a Log lock is taken.
//   - Replica.producersMu, ISRLog.producersMu: leaves; the owner writes
//     the idempotent producers' state under them (it reads without), and
//     Producers copies a summary under them for any goroutine
//     (DescribeProducers).
//
// The lock order is in the repository's DESIGN.md ("Lock order"), the one
// list for every package.
//
// # Transactions
//
// A transactional data batch (attribute 0x10, a producer id) opens its
// producer's transaction in the partition unless one is open, at the
// batch's base offset; a control batch (0x20: one record, Kafka's
// EndTransactionMarker, key version+type 0 ABORT/1 COMMIT, value
// version+coordinator epoch; ControlBatch builds one, ParseControlBatch
// and ParseControlRecord decode it) closes it. A marker for a producer
// with nothing open is stored and changes no state, nor is it indexed
// (as Kafka's appendEndTxnMarker, which completes only non-empty
// transactions). Append refuses a
// control batch that is not exactly one well-formed marker, and a
// transactional batch without a producer id (INVALID_RECORD), so every
// stored control batch decodes.
//
// The bookkeeping lives in Log (txnlog.go), so the raft Replica and the
// ISRLog share it: both append through Log, and whatever truncates,
// resets, recovers, cleans or moves the start of a Log keeps it right.
// Fencing is the owners', with the producer state: checkProducer refuses
// a transactional batch or marker whose producer epoch is older than the
// producer's (INVALID_PRODUCER_EPOCH, Kafka's answer since 2.7; ErrorCode
// passes a *kerr.Error's code through); a marker with a newer epoch moves
// the producer to it, as the coordinator's fencing abort does. A
// non-transactional batch of a producer whose transaction is open here is
// refused with INVALID_TXN_STATE, as Kafka's appendDataBatch refuses it
// (checkTxnState, after the producer check). A marker whose coordinator
// epoch carries its transaction's number (MarkerSeq, from
// coordinator/txns.MarkerEpoch) is taken once per producer and number:
// a copy at or below ProducerState.MarkerSeq is answered as a duplicate
// and not appended, since the coordinator retries a marker whose answer
// it lost, and the first request may land after the producer's next
// transaction began (it would end that one). Markers without a number
// (earlier binaries, whose entries must replay as they were applied)
// are never deduplicated. An ISR replica's rebuild (at open, and after
// a truncation) reads each marker's record back for its number, so a
// late copy stays a duplicate across a restart too. A retried transactional batch is deduplicated like
// any idempotent batch, and changes nothing.
//
//   - Open transactions: what replaying every batch of the log from the
//     first segment's base gives, starting from the transactions open at
//     that base. OngoingTransactions lists them.
//   - Last stable offset: LSO = min(high watermark, max(first offset of
//     the earliest open transaction, log start)): a transaction whose
//     first batch retention or DeleteRecords removed holds the LSO at the
//     start, as Kafka's firstUnstableOffset does, until its marker.
//     LastStableOffset, WatchLastStableOffset (value and a channel closed
//     at its next change, for read_committed long-polls),
//     WaitLastStableOffset and ReadLimit
//     (the LSO for ReadCommitted, the high watermark otherwise: the upTo
//     that Read and ListOffset take, so ListOffsets READ_COMMITTED answers
//     the LSO for latest and looks up timestamps below it).
//   - Aborted index: per segment, in memory, for every ABORT marker that
//     closed an open transaction: {ProducerID, FirstOffset, LastOffset =
//     the marker's offset, LastStableOffset = the LSO the abort left,
//     ignoring the high watermark}. AbortedTransactions(from, to) returns
//     those overlapping [from, to), stopping, as Kafka's
//     collectAbortedTxns, at the first entry whose LastStableOffset
//     reaches to. Entries go with their segment (retention, truncation).
//   - On disk: <base>.txnindex (JSON with a CRC line, like the
//     checkpoints) holds the transactions open at the segment's base and
//     its aborted entries. Only segments that saw a transaction have one.
//     It is written when the segment starts with transactions open (roll,
//     SeedTransactions), when it is sealed, at Close and when recovery
//     finds it stale, always durably (temp file, fsync, rename, directory
//     fsync): the first segment's is the only record of the transactions
//     open at its base once older segments are gone.
//   - Recovery rebuilds all of it from the batches it reads anyway (a
//     marker's record is read only for control batches): the open
//     transactions at the first segment's base come from its .txnindex,
//     every later base from the replay. A missing or damaged first-segment
//     file loses the transactions open there (logged). A raft Replica
//     compares with its checkpoint's Txns after its rewind and gives the
//     log back those still open at the checkpoint
//     (RestoreOpenTransactions: open at the end, they were open
//     throughout); index entries of the lost ones that ended since stay
//     lost. With UnsafeSkipCRCChecks a
//     segment with a .txnindex, or after open transactions, is read in
//     full anyway.
//   - Truncation replays the cut segment's headers from its base (reading
//     only markers) to roll back the open transactions and drop the
//     aborted entries at or past the cut; segments without transactions
//     cost nothing. Reset empties it all; SeedTransactions (on an empty
//     log only) then sets the transactions open at its start.
//   - Raft snapshots: the checkpoint (the snapshot data) carries Txns, the
//     transactions open at Next, first batches below the start included;
//     a replica whose log restarts empty at Next (rewind) is seeded with
//     them. The snapshot body's header carries the transactions open just
//     before its first batch, which the receiver seeds its staged log with
//     before appending the body; the receiver refuses a body that does not
//     end with the checkpoint's Txns open. (This extends the body format:
//     both ends of a snapshot transfer must run this version.)
//   - ISR: ResetTo (a follower behind the leader's start) restarts with no
//     open transactions, as Kafka's truncateFullyAndStartAt does; the
//     leader's state is the one consumers see.
//   - Compaction (clean.go): never past the LSO; records of aborted
//     transactions are dropped, markers are kept.
//   - Cost: a batch without the transactional or control bit costs one
//     test of its attributes at append (and, if idempotent, one map
//     lookup under writeMu for checkTxnState); SetHighWatermark publishes
//     the LSO beside the high watermark (a mutex and a store); a segment
//     that never saw a transaction has no .txnindex to write, sync or
//     read. The aborted index is in memory, one 32-byte entry per
//     aborted transaction in the retained log. BenchmarkAppendTxnMem
//     measures the bookkeeping without the disk.
//
// # ISR mode (ISRLog)
//
// ISRLog (isrlog*.go) is the storage of a partition replicated the Kafka
// way (replication.mode=isr): the same Log, plus the idempotent producers
// and leader epoch starts, kept next to it instead of in raft snapshots.
// A leader assigns offsets (AppendLeader: dedup with checkProducer, stamp
// its epoch); a follower copies the leader's batches byte for byte,
// offsets and epoch stamps included (AppendFollower over
// Log.AppendReplica), and cuts its log where it diverged (TruncateTo,
// guided by the leader's EndOffsetFor, KIP-101 and KIP-279), or empties
// it and restarts at the leader's log start (ResetTo) when it has fallen
// behind it.
//
//   - Offsets: a follower's batch starts exactly at its LEO, or it is
//     refused (ErrOffsetMismatch) and nothing changes.
//   - Epochs: the starts rise in both epoch and offset and lie at or below
//     the LEO; every batch carries the epoch in force at its base. A
//     follower batch never has an older epoch than the newest start
//     (ErrEpochRegression). New starts follow Kafka's assign (conflicting
//     newer entries go); a truncation drops the starts at or above the new
//     end. The raft Replica keeps its append-only note.
//   - Producers: always what replaying every batch of [start, LEO) through
//     recordProducer gives (the last five batches of each producer's
//     current epoch), after appends, truncations and reopens alike. A
//     duplicate returns its first offsets and appends nothing; its ack
//     must still wait for HW > its last offset.
//   - High watermark: at most the LEO; it rises through SetHighWatermark
//     (clamped to the LEO) and falls only through TruncateTo. In memory
//     only: it restarts at the log start.
//   - Durability: nothing is fsynced per batch (Kafka's default). The
//     checkpoint isr.checkpoint.{0,1} {Offset X, Producers, Epochs} is
//     written only right after a Log.Sync made [start, X) durable
//     (Checkpoint, BecomeLeader, Close, and TruncateTo when a checkpoint
//     described more than the new end), alternating between the two files.
//     A new leader's epoch start is durable when BecomeLeader returns,
//     before its first ack. Open recovers the log, takes the newest
//     checkpoint with X at or below the recovered end (the other one, or a
//     scan from the start, otherwise), rescans the batch headers from X
//     (Log.ScanBatches; a marker's record too, for its MarkerSeq), and
//     rewrites any checkpoint beyond the end, so a
//     stale one can never match a regrown log later.
//   - Ownership: one goroutine calls the mutators and Producer; Log,
//     EndOffsetFor, LatestEpoch and Epochs are safe from any.
//
// # Notes and departures from the shared design
//
//   - Segment boundaries are local: rolling by size is deterministic, but
//     rolling by age uses the local clock (as Kafka's segment.ms does), so
//     replicas hold byte-identical batches at identical offsets in
//     possibly different files. Roll is exported so the state machine can
//     roll deterministically from a replicated entry if that ever matters.
//     The age of the active segment restarts at Open.
//   - Retention is computed by RetentionOffset (the leader proposes it) and
//     applied by AdvanceStart on every replica, per the shared design. It
//     never deletes the active segment or a segment reaching past the high
//     watermark. A segment without timestamps ages by its file's mtime, as
//     in Kafka.
//   - ListOffset by timestamp returns the first record (not batch) at or
//     after the timestamp, decompressing the one batch it lands in.
//     LogAppendTime batches (StampLogAppendTime, for topics whose
//     message.timestamp.type is LogAppendTime) are found by their max
//     timestamp.
//   - Recovery cuts the log at the first invalid batch even in an old
//     segment (bit rot); the owner compares the recovered end with its
//     own checkpoint and refills the rest (below).
//   - Damage at a raft Replica's open (replica_repair.go): at or above
//     the replica checkpoint's end it costs nothing, since the log is cut
//     back to the checkpoint anyway and raft replays the rest. Below it,
//     raft cannot help (its log is compacted behind the snapshot the
//     checkpoint belongs to), so OpenReplica refuses with a *GapError
//     (an ErrCorruptLog) naming [End, Next): the replica never opens with
//     a hole. FillReplica copies that range from another replica's log
//     (raft replicas hold the same batches at the same offsets), checking
//     every batch in full before appending it, so damage is never copied;
//     the broker does it over the peer transport before the replica joins
//     its raft group (broker/repair.go). A damaged replica.checkpoint
//     leaves the replica unanchored: it opens with applied 0 serving
//     nothing, raft restores its local snapshot, whose data is the same
//     checkpoint, and restoreInPlace rewrites the file from it and cuts
//     the log back as an open would (a GapError then too, with the file
//     already good for the next open); a snapshot streamed from the
//     leader anchors it as well, and a staged one whose own checkpoint
//     file was damaged is restored in place from the snapshot's data. Without a snapshot raft replays from its
//     first entry and the log starts over empty. An ISR log (ISRLog)
//     recovers the same way and its follower fetches the rest from its
//     leader; LostData says when the cut took records known durable, and
//     such a replica must not lead before it has caught up (DESIGN.md,
//     "Damaged files"; isr/resign.go).
//   - A batch's partitionLeaderEpoch lies outside its CRC. An owner's
//     open checks it (recover_epochs.go): below the owner checkpoint's
//     end every batch must carry the epoch the checkpoint's epoch starts
//     give it, and no batch an epoch below the one before it; the first
//     that disagrees is cut as a damaged batch. A replica opened with a
//     damaged checkpoint is checked the same way once raft's snapshot
//     gives the checkpoint back (cutAtWrongEpoch).
//   - The topic-level settings (Limits: segment and batch sizes, index
//     spacing, retention) can change while the log is open (SetLimits), as
//     an altered topic config takes effect in Kafka; written segments keep
//     their shape. A log a snapshot install opens keeps the current ones.
//   - A Replica reopens at its checkpoint (the last raft snapshot) and
//     raft replays the entries after it. When the log start has moved past
//     the checkpoint's end since (DeleteRecords or retention applied after
//     the snapshot), the log restarts empty at that end and the replay
//     rebuilds records and start alike; only the segment files below the
//     start then differ from the other replicas'. FuzzReplicaApply
//     covers it: a replica restarted there must end with the other's
//     records, start and high watermark.
//   - There is no lock file: one process must open a directory at a time.
//
// # Performance
//
// Per append without sync the log costs one pwrite (two for batches over
// 64 KiB, to avoid copying them), a mutex publish and, with Append, the
// validation; with sync the fdatasync dominates and the log matches a
// plain write+fdatasync of the same bytes. Sync writes the checkpoint only
// after a roll or a start move. The log starts the kernel's writeback
// every Config.WritebackBytes (1 MiB) appended, so the page cache holds
// little unwritten segment data: unsynced appends run at the disk's pace,
// and a snapshot's fsync stays short instead of stalling every WAL on the
// disk (DESIGN.md, "Writeback"). Figures and commands: BENCHMARKS.md.
package partition
