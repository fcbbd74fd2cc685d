// Package isr is the node side of ISR replication mode
// (replication.mode=isr, issue 20): Kafka's replication, where followers
// fetch from the leader and group 0, acting as Kafka's KRaft controller,
// alone changes the in-sync replica set (ISR).
//
// # Layers
//
//   - The leader's bookkeeping (leader.go, alter.go, replica.go) is pure
//     code after Kafka's Partition.scala and Replica.scala: it does no
//     I/O, starts no goroutine and reads no clock. The caller passes the
//     time of every event and applies what it returns: the high
//     watermark (HW) to the log, proposals to group 0 through
//     Config.Propose. ISR-NOTES §1.1–1.7 give the rules and their sources.
//   - A Partition (partition.go, append.go, serve.go, follower.go) is one
//     replica: a partition.ISRLog and the role group 0 gave it through
//     Update. As leader it takes appends and serves follower fetches; as
//     follower it applies the answers its Manager's fetcher brings.
//   - The Manager (manager.go, fetcher.go) holds a node's partitions, one
//     fetcher per leader node, and the timers (ISR expiration every half
//     lag time, flush.ms, the periodic checkpoint). Followers and leaders
//     speak Kafka's own follower Fetch (wire.go) over the peer transport's
//     fetch stream.
//   - In manual mode (ManagerConfig.Manual, manual.go) the Manager starts
//     no goroutine and reads only ManagerConfig.Clock: the caller drives
//     it from one goroutine with Step (AlterPartition answers, leader
//     flushes, the timers) and FetchRounds (each fetcher's next request,
//     sent by the caller to the leader's HandleFetch, which then answers
//     at once). It is the simulator's way in, as raftgroup's manual mode
//     is; every pass goes in group and leader order.
//
// # Ownership and locks
//
// Partition.mu (Kafka's leaderIsrUpdateLock) is held for every change of
// a replica: its holder is the owner the leader bookkeeping and the
// ISRLog's mutators require. Lock order: the broker's produce lock, then
// Partition.mu, then Manager.mu, then the log's own locks. Readers of the
// log take none of them. Answers to AlterPartition come back on the
// channel alterDone returns; a goroutine per proposal hands them to
// handleAlterResult under Partition.mu, unless a newer proposal replaced
// the one it waits for.
//
// # Invariants
//
//   - The HW never moves backwards, and it rises only while the committed
//     ISR has at least min(min.insync.replicas, replication factor) members
//     (KIP-966's strict min ISR), to at most the least LEO of the maximal
//     ISR (the committed ISR plus a pending addition) and of every
//     follower that is caught up and eligible to join.
//   - At most one AlterPartition is in flight. While it is, no other ISR
//     change is proposed; an addition counts at once (the HW waits for the
//     new member, which is stricter), a removal only once committed.
//   - The committed ISR is only ever what group 0 answered or published;
//     the leader never decides it alone (KIP-497).
//   - A follower's fetch state from a broker epoch older than the one it
//     last fetched with is refused (KIP-903), and a follower joins the ISR
//     only at a broker epoch the controller still holds.
//   - A diverged fetch (its LastFetchedEpoch ends below its offset in the
//     leader's log) is answered with the divergence and no records, and
//     does not move the follower's state; the follower truncates and asks
//     again. A follower appends only batches that start at its log end.
//   - An acks=all produce is acknowledged only once the HW passed its last
//     offset while this replica still led the epoch it was appended in.
//   - A follower's HW is at most its log end and the leader's HW; its log
//     start never passes its HW.
//   - A replica whose recovery lost records known durable
//     (partition.ISRLog.LostData) never leads until group 0 has taken its
//     resignation or a leader let it into the ISR (resign.go). No log
//     holds a batch of an epoch newer than its leader's current epoch:
//     each Update cuts such batches, which are damage.
package isr
