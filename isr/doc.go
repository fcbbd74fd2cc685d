// Package isr is the node side of ISR replication mode
// (replication.mode=isr, issue 20): Kafka's replication, where followers
// fetch from the leader and group 0, acting as Kafka's KRaft controller,
// alone changes the in-sync replica set (ISR).
//
// This much of it is the leader's bookkeeping, as pure code: it does no
// I/O, starts no goroutine and reads no clock. The caller passes the time
// of every event and applies what it returns: the high watermark (HW) to
// the partition's log (partition.ISRLog.SetHighWatermark), proposals to
// group 0 through Config.Propose. It follows Kafka's Partition.scala and
// Replica.scala; ISR-NOTES §1.1–1.7 give the rules and their sources.
//
// # Ownership
//
// One goroutine, the partition's owner, calls every method of a leader;
// nothing here locks. Results of AlterPartition proposals come back on the
// channel alterDone returns, which the owner selects on and hands to
// handleAlterResult.
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
package isr
