// Package txns is raftq's transaction coordinator state: Kafka's
// TransactionCoordinator and TransactionMetadata (KIP-98, with KIP-360's
// epoch recovery and KIP-890's verification) as the replicated state
// machine of each __transaction_state partition, as package groups is
// for __consumer_offsets. The broker hosts a Machine on each partition's
// raft group exactly as it hosts a groups.Machine, with a Coordinator
// that proposes the clients' requests, writes markers through the
// broker, and runs the timers.
//
// # Placement
//
// __transaction_state has N partitions, each its own raft group.
// Transactional id T belongs to partition PartitionFor(T, N) =
// Utils.abs(T.hashCode()) % N, Kafka's formula (groups.PartitionFor's
// code, shared). The leader of that partition's raft group is T's
// coordinator (FindCoordinator with key type transaction names it).
//
// # State
//
// Per transactional id (Txn): producer id and epoch, KIP-360's last
// producer id and epoch, transaction.timeout.ms, state, the partitions
// (topic → partitions) and groups in the transaction, its start time and
// the last update time. Partition-wide: the producer ids it may hand out
// and the coordinator epoch (the term of the last Barrier).
//
// Commands (command.go) are small JSON documents behind a 'T' byte;
// apply (apply.go) is a pure function of state and command. Every time it
// needs (NowMs) and every limit it checks (MaxTimeoutMs, ExpirationMs)
// travels in the command from the proposing leader, so replicas agree
// whatever their clocks or configs say. An entry that is no transaction
// command changes nothing and answers INVALID_REQUEST on every replica
// alike: Apply never fails.
//
// # Transitions (Kafka's, in Kafka's order of checks)
//
//	InitProducerID  new id: Empty at epoch 0. Empty/Complete*: epoch+1, or
//	                a new producer id at epoch 0 when the epoch is
//	                exhausted (>= 32766). Ongoing: the zombie is fenced:
//	                epoch+1 and PrepareAbort, answered
//	                CONCURRENT_TRANSACTIONS (the client retries until the
//	                abort completes). Prepare*: CONCURRENT_TRANSACTIONS.
//	                KIP-360: a presented producer id/epoch that is neither
//	                current nor the last (a retry) is PRODUCER_FENCED.
//	                timeout <= 0 or > max: INVALID_TRANSACTION_TIMEOUT.
//	AddPartitions   Empty/Complete*/Ongoing → Ongoing with the partitions
//	                (start time set when it was not Ongoing); a v4+ batch
//	                of transactions, each possibly verify-only: answered
//	                per partition (NONE in the transaction,
//	                TRANSACTION_ABORTABLE not), nothing changed.
//	AddOffsets      the same with a group.
//	EndTxn          Ongoing → PrepareCommit/PrepareAbort. A retry after
//	                completion with the same result is NONE; while the
//	                markers are written it is CONCURRENT_TRANSACTIONS;
//	                the other result, or Empty, is INVALID_TXN_STATE.
//	MarkersWritten  the host wrote markers to some partitions (and told
//	                some group coordinators); when none are left,
//	                Prepare* → Complete*, partitions and groups cleared.
//	Tick            Ongoing past StartMs+TimeoutMs → epoch+1, PrepareAbort
//	                (the producer is fenced, as Kafka's timeout abort
//	                does); Empty/Complete* idle for ExpirationMs (default
//	                7 days) → forgotten (Kafka's Dead, then a tombstone).
//	Barrier         a new leader's first entry; its term is the
//	                coordinator epoch.
//	GrantProducerIDs a block of producer ids for the partition to hand out.
//
// The producer checks are: an unknown id or another producer id
// INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED (ClientCode
// maps it to INVALID_PRODUCER_EPOCH for request versions before KIP-588),
// Prepare* CONCURRENT_TRANSACTIONS. A refused command changes nothing.
//
// # Invariants
//
//   - A stored Txn is never Dead, and its partitions and groups are
//     sorted and unique (equal states encode to equal bytes).
//   - Empty has no partitions, no groups and StartMs -1; Complete* has no
//     partitions and no groups. Only Ongoing and Prepare* hold them.
//   - The producer epoch of an id never goes down while its producer id
//     stays; a new producer id starts at 0. A client is never handed
//     epoch 32767: at 32766 the epoch is exhausted and the next
//     InitProducerID rotates the producer id, so the coordinator can
//     always bump once more to fence.
//   - While Prepare*, nothing but MarkersWritten changes the id: producer
//     id and epoch stay, so a new leader resumes the markers from Pending
//     (WriteTxnMarkers retried until done, surviving failover).
//   - A producer id is handed out at most once per partition, and from
//     blocks the metadata group reserved, so at most once in the cluster:
//     a grant below the end of an earlier one is refused (a retried
//     proposal), and ids are taken in order.
//
// # Producer ids
//
// The machine hands out ids from blocks it is granted. The leader
// reserves a block in the metadata group (coordinator.AllocateProducerIDs,
// the allocator idempotent producers use, so the two never collide) and
// proposes GrantProducerIDs before FreeProducerIDs runs out. An
// InitProducerID that needs an id when none is left changes nothing and
// answers COORDINATOR_LOAD_IN_PROGRESS (which clients retry) with
// Result.NeedProducerIDs, telling the leader to grant and retry. Unused
// ids survive failover in the replicated state; ids of a block reserved
// and never granted (a leader that died in between) are only skipped.
//
// # The coordinator
//
// Coordinator serves the partition while this node leads its raft group,
// as groups.Coordinator does: Activate proposes a Barrier (until it is
// applied the host answers COORDINATOR_LOAD_IN_PROGRESS), and every
// request is a proposal answered once applied, so whatever a client was
// told is in the raft log. Its only soft state is which transactions'
// markers it is writing now. EndTxn is answered once PrepareCommit or
// PrepareAbort is replicated (as Kafka answers); a writer per pending
// transaction then calls Config.WriteMarkers and proposes
// MarkersWritten for what was done. Whatever is not done is retried at
// the next Tick, and after a failover the next leader's Activate starts
// writers for every transaction in Machine.Pending, at its own
// coordinator epoch: WriteTxnMarkers is retried until done and survives
// coordinator failover. Tick also grants producer ids before they run
// out (Config.AllocateProducerIDs) and proposes a Tick command when
// Machine.TickDue says a timeout or an expiry is due.
//
// # Goroutines and locks
//
// Apply, Snapshot and Restore run on the partition's raft goroutine; the
// accessors (Txn, Txns, Describe, List, Pending, Verify,
// FreeProducerIDs, CoordinatorEpoch, TickDue) on any goroutine.
// Coordinator methods are called from the broker's request goroutines,
// Tick, Activate and Deactivate from its coordinator loop; marker writers
// are the coordinator's goroutines, cancelled and waited for by
// Deactivate. Machine.mu guards the replicated state and
// Coordinator.mu the activation and the writers; both are leaves.
// Coordinator.grantMu is held across a grant's two proposals (the
// metadata group's AllocateProducerIDs, then GrantProducerIDs), and may
// take Coordinator.mu and Machine.mu; it is taken under no other lock.
// DESIGN.md's lock order lists them.
//
// # Not here
//
// KIP-890 part 2 (transaction version 2: an epoch bump at every EndTxn,
// which EndTxn v5+ answers, and implicit AddPartitions at produce) is not
// modelled: the broker must serve EndTxn up to v4 and advertise no
// transaction.version feature, so clients keep version 1's behaviour. DescribeProducers, control batches, the LSO and
// the aborted index are partition-side. TxnOffsetCommit's pending offsets
// are the group coordinator's.
package txns
