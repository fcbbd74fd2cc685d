// Package groups is raftq's consumer-group coordinator: Kafka's classic
// group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and
// committed offsets (OffsetCommit, OffsetFetch, OffsetDelete), with
// ListGroups, DescribeGroups and DeleteGroups, on raft-replicated
// __consumer_offsets partitions.
//
// # Placement
//
// __consumer_offsets has N partitions (broker.Config.OffsetsPartitions,
// default 5), each its own raft group replicated on min(3, cluster size)
// nodes. Group G belongs to partition PartitionFor(G, N) =
// Utils.abs(G.hashCode()) % N, Kafka's formula with Java's String.hashCode,
// so that tools computing a group's partition agree. The leader of that
// partition's raft group is G's coordinator; FindCoordinator names it, and
// every other node answers NOT_COORDINATOR.
//
// # Hard and soft state
//
// Machine is the replicated state machine of one offsets partition. It
// holds, per group, what must survive a coordinator failover: generation,
// protocol type and name, leader, members (ids, static instance ids,
// client id and host, timeouts, protocol metadata, assignments), the
// replicated phase, and committed offsets with metadata, leader epoch and
// commit timestamp. Commands (command.go) are small JSON documents behind
// a 'G' byte; apply (apply.go) is a pure function of state and command:
// every time it needs (NowMs) travels in the command, set from the
// proposing leader's clock, so replicas agree whatever their clocks say.
// Entries that are no group command (a produce batch someone sent to the
// internal topic) are answered INVALID_REQUEST on every replica alike and
// change nothing; Apply never fails.
//
// Coordinator holds the soft state, which lives only on the current
// leader: heartbeat deadlines, members waiting in JoinGroup and SyncGroup,
// member ids handed out with MEMBER_ID_REQUIRED, and rebalance clocks. A
// transition is proposed first and the clients are answered only once the
// entry is applied, so whatever a client has seen is in the raft log:
//
//	NewGeneration  a join phase ends: next generation, protocol, leader,
//	               members with metadata (none: the group is Empty)
//	Assign         the leader's SyncGroup: assignments, group Stable
//	Remove         LeaveGroup or session/sync expiry: the rest must rejoin
//	               (phase PreparingRebalance is replicated), or Empty
//	ReplaceStatic  a static member rejoined: new member id, old one fenced,
//	               assignment kept (no rebalance when nothing changed)
//	Commit         offsets, checked at apply against generation and member
//	DeleteOffsets, DeleteGroups, Expire, and Barrier (below)
//	TxnCommit      a TxnOffsetCommit: offsets pending for (group,
//	               producer id), checked at apply as at the coordinator
//	TxnMarker      a transaction's marker for this partition: the
//	               producer's pending offsets, in every group here,
//	               become committed offsets or are dropped
//
// A rebalance started by a join is soft: after a failover the joiner
// simply joins again. When a node becomes leader of an offsets partition
// (term T) it proposes Barrier{T}; once applied, every earlier entry is,
// and Activate builds fresh soft state: every member of every group gets a
// full session timeout from then, an unfinished rebalance restarts its
// clock, and members keep their generation: heartbeats and commits of the
// current generation go on at the new coordinator without a rejoin. Until
// then the node answers COORDINATOR_LOAD_IN_PROGRESS.
//
// # Protocol behaviour (Kafka's, with franz-go's kfake as the oracle)
//
//   - JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and an id
//     (dynamic members); static members (group.instance.id) join at once.
//     A join phase ends when every current member has rejoined, or at the
//     largest rebalance timeout (the missing members are out). The first
//     rebalance of an empty group waits InitialRebalanceDelay for more
//     members (extended per join, up to the rebalance timeout).
//   - The protocol is chosen among those every member supports by votes
//     of each member's first supported preference; eager and
//     cooperative-sticky are the clients' business (the coordinator is
//     protocol-agnostic). A member that cannot share a protocol, or brings
//     another protocol type, gets INCONSISTENT_GROUP_PROTOCOL.
//   - Heartbeat answers REBALANCE_IN_PROGRESS during a join phase,
//     ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as Kafka.
//     Members waiting in JoinGroup or SyncGroup do not expire.
//   - SyncGroup from the leader stores the assignment; followers wait for
//     it, or get it at once when the group is Stable. Members that do not
//     sync within the rebalance timeout are removed.
//   - OffsetCommit (CheckCommit, the same check at the coordinator and at
//     apply): a stale generation gets ILLEGAL_GENERATION, an unknown member
//     UNKNOWN_MEMBER_ID, a commit during CompletingRebalance
//     REBALANCE_IN_PROGRESS; generation -1 simple commits are accepted for
//     groups without members (creating the group). A refused commit
//     changes nothing and proposes nothing.
//   - Oversized protocol metadata (JoinGroup) or assignment (SyncGroup)
//     beyond MaxMetadataBytes gets MESSAGE_TOO_LARGE and changes nothing.
//   - OffsetDelete refuses topics that consumer members subscribe to
//     (GROUP_SUBSCRIBED_TO_TOPIC); DeleteGroups refuses groups with
//     members or joiners (NON_EMPTY_GROUP).
//   - Offsets of an empty group expire OffsetsRetention after the later of
//     the group becoming empty and the commit (KIP-211); the leader checks
//     every ExpireInterval and proposes Expire with its clock.
//   - Transactional offsets (KIP-98, KIP-447; txn.go): TxnCommit keeps
//     them pending per group and producer id, invisible to OffsetFetch
//     (Machine.Offsets) until the producer's TxnMarker. CheckTxnCommit is
//     Kafka's validateOffsetCommit for transactions: generation -1 without
//     a member is accepted whatever the group's members, and a commit
//     during CompletingRebalance too; a stale epoch (below the latest the
//     partition has seen from that producer id, in a TxnCommit or a
//     marker: ProducerSeen, replicated) is INVALID_PRODUCER_EPOCH, after
//     the marker too, as Kafka's producer state on the partition. On commit each pending offset replaces the
//     committed one unless that was written after it (Offset.Index, the
//     raft index of the entry that wrote it: Kafka's olderThan by log
//     offset); on abort they are dropped. Machine.Unstable names the
//     partitions with pending offsets, for OffsetFetch's require_stable
//     (UNSTABLE_OFFSET_COMMIT). Pending offsets keep an empty group from
//     expiring; DeleteGroups deletes an empty group with them (Kafka's
//     handleDeleteGroups), and a later marker finds nothing.
//
// # Goroutines and locks
//
// Apply, Snapshot and Restore run on the offsets partition's raft
// goroutine. Coordinator methods are called from the broker's request
// goroutines (Join and Sync answer through a callback, maybe later and
// from another goroutine) and Tick from the broker's groups loop.
// Coordinator.mu guards the active term and the sessions, Machine.mu the
// replicated state, each session.mu one group's soft state; their order is
// in the repository's DESIGN.md ("Lock order").
//
// session.mu serialises one group's transitions, including the wait for
// their proposals; OffsetCommit does not hold it across its proposal, so
// commits of one group pipeline (apply re-checks them).
//
// # Performance
//
// A commit costs what a raft proposal of the offsets partition costs: the
// Kafka request, the check and the JSON command add nothing measurable
// next to the fsyncs. Concurrent commits of one group pipeline (session.mu
// is not held across them), so they share WAL writes and fsyncs. A
// rebalance of several members takes several generations, each learnt
// from a heartbeat: a few heartbeat intervals plus one raft commit per
// NewGeneration and Assign. Figures and commands: BENCHMARKS.md.
//
// # Departures from the shared design
//
//   - The offsets state lives in memory and is rebuilt on start from the
//     partition's raft snapshot plus the WAL after it (Applied is 0), as
//     the metadata group does, instead of badger: it is small (groups and
//     one offset per partition), and a snapshot every SnapshotEntries
//     bounds the replay.
//   - __consumer_offsets is created on the first group request (as Kafka
//     does), not at bootstrap: clusters that never use groups carry no
//     extra raft groups, and tools that count partitions see only theirs.
//     Its partitions' logs stay empty: they are not a readable Kafka log of
//     group records, as Kafka's are.
//   - OffsetCommit and OffsetFetch are served up to v9 (v10 names topics
//     by id only); DescribeGroups up to v5 (an unknown group is Dead).
//   - Only the classic protocol; no KIP-848 ConsumerGroupHeartbeat.
//   - A producer's epoch is forgotten OffsetsRetention after it was last
//     seen with nothing pending (an Expire drops it), where Kafka uses
//     producer.id.expiration.ms.
package groups
