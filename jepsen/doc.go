// Package jepsen runs a Jepsen-style queue workload against a Kafka-compatible
// cluster through franz-go's kgo client, records every call in a history,
// checks the history for the anomalies Jepsen's Kafka test looks for
// (jepsen.tests.kafka) plus per-partition linearizability with porcupine, and
// writes a report.
//
// # History
//
// A History is a sequence of Ops, each an invocation (type invoke) or a
// completion (ok: it happened; fail: it definitely did not; info: unknown).
// Every op has an index, a monotonic time in nanoseconds since the run
// started, a process and an f: send, poll, assign, subscribe, crash,
// final-read, or, on NemesisProcess (-1), start and stop of a named fault
// (whose completion names the nodes the step acted on and what it did).
// A process runs one op at a time; its completion follows its invocation.
// A process that completes with info never invokes again (its worker goes
// on as a new process), so an info op stays open to the end of history.
// Histories are stored as JSON lines (history.jsonl); records of reads are
// encoded [offset, value]. ReadHistory rejects malformed lines with a
// *DecodeError wrapping ErrMalformed and is fuzzed (FuzzReadHistory).
//
// Sent values are unique in a run ("p<process>-<seq>"), and the topic must be
// fresh: a read of any value this run did not send is a phantom.
//
// # Workload
//
// Producers each own a kgo client and send one record at a time
// (ProduceSync, linger 0) to a random partition, keyed "k<partition>" and
// placed with the manual partitioner. An acknowledged send is ok with its
// offset. A send error is fail only for answers that reject the record before
// any append and that no earlier attempt could have got past (message too
// large, invalid topic, authorization, invalid acks or record, unsupported
// version); everything else, including timeouts, is info, and the process
// ends with a fresh client. A send with no answer after OpTimeout plus one
// second is info and its client is closed. With acks=none every send is info.
//
// Consumers each own a kgo client. In assign mode an assign op replaces the
// client with one made by kgo.ConsumePartitions for a random subset of
// partitions, each seeking to 0 or to where the consumer left off; in
// subscribe mode a subscribe op makes a group member (commits after each
// poll; rebalances are held during a poll and recorded with the next poll in
// Rebalanced). A poll op records the records per partition and the highest
// high watermark kgo reported. Optional client crashes (CrashP) end the
// process. One token bucket bounds the ops of all processes.
//
// With Txn (`raftq jepsen run --txn`) the producers run Kafka transactions
// instead, and every consumer and final read is read_committed. Worker i
// owns a kgo client with transactional id "jepsen-txn-<i>", the same for
// each of its successive processes, so a new process's InitProducerId
// fences its predecessor and aborts whatever transaction that left open;
// the transaction timeout is 2*OpTimeout+1s (room for the sends and the
// end). A txn op's invocation names its ID, its planned sends (1 to
// TxnSends, each to a random partition, values "p<process>-<seq>" as a
// producer's) and whether it is meant to abort (TxnAbortP). The op runs
// BeginTransaction; with chance TxnPollP first one poll (bounded by
// 4*FetchMaxWait, at least 500 ms, at most OpTimeout) of the process's own
// read_committed consumer, whose records and high watermarks go in the
// op's Reads; then all sends at once (Produce, then waiting for every
// acknowledgement, at most OpTimeout plus one second); then EndTransaction
// with EndStart noted on the history clock just before it. That consumer
// is made by assign ops of the same process, recorded as in assign mode
// (a subset of the partitions, each seeking to 0 or where it left off); a
// txn that would poll without one, or by chance one in ReassignEvery,
// assigns instead. The outcome:
//
//   - ok: every send acknowledged (each carries its offset) and the commit
//     acknowledged.
//   - fail: no commit was requested and an abort was acknowledged: the
//     txn was meant to abort, or a send failed (AbortBufferedRecords, then
//     EndTransaction(TryAbort)); or kgo refused the commit before sending
//     it (kerr.OperationNotAttempted) and the abort then succeeded; or
//     BeginTransaction failed (nothing was sent; the client is replaced).
//   - info: a commit that returned any other error (it may have landed,
//     whatever the abort after it says), an abort that returned an error,
//     or sends still unanswered after OpTimeout plus one second (the
//     client is closed, nothing ends the transaction but the fence or the
//     timeout). The process ends; its worker goes on with new clients.
//
// Sends keep the offset of their acknowledgement in every outcome;
// unacknowledged ones have NoOffset.
//
// After the workload and the final heal, FinalReads reads every partition
// with a new client from offset 0 until it has read below a high watermark
// that stayed put across two ListOffsets calls; that read is a final-read op,
// ok when complete, info (keeping what it read) when it ran out of time.
// Read_committed final reads keep control records (kgo.KeepControlRecords)
// to know their position and record only data: the last offsets below the
// high watermark may be commit or abort markers. Such a fetch serves
// nothing at or past the last stable offset, so a read served up to hw-1
// (a record or a marker there) has seen every transaction below hw decided
// and returned every committed record below it; aborted records kgo drops
// by the fetch's aborted-transaction list. An offset below hw a complete
// read did not return holds a marker or an aborted record. A transaction
// left open keeps the read waiting until the coordinator aborts it.
//
// # Checkers and their exact definitions
//
// Terms: an observation is a record (partition, offset, value) returned by
// any completed poll or final read, whatever its type. The evidence at an
// offset is the set of values that observations, or ok sends' acknowledged
// offsets, place there. A stream is the records one process received from one
// partition between resets of its position: an ok assign begins a stream at
// the seek offset; a subscribe, a crash, a failed assign, or a partition in
// a poll's Rebalanced begins one whose start is unknown; each final read is
// its own stream starting at 0. A stream covers offsets from its start (or,
// when unknown, its first record) to its highest record, or to hw-1 for a
// complete (ok) final read.
//
//   - lost-write: an ok send, acknowledged at offset o of partition p, whose
//     value no observation returned, while some stream of p covers o. A
//     send nobody was positioned to read (say, the final read failed) is not
//     lost; unseen reports it as unknown.
//   - unseen: an ok send whose value no observation returned. It is an
//     anomaly when p had a complete final read (the send was acknowledged
//     before it began), and undecided (verdict unknown) otherwise. The
//     result also gives, over time, the number of sends acknowledged but not
//     yet returned by a completed read.
//   - duplicate: a value placed at more than one (partition, offset) by
//     observations and its send's acknowledgement.
//   - inconsistent-offsets: an offset whose evidence holds more than one
//     value.
//   - nonmonotonic-send: two successive sends of one process to one
//     partition, both ok or info with a known offset (the acknowledged one,
//     else the lowest offset an observation returned the value at), where
//     the later one's offset is not greater.
//   - nonmonotonic-poll: within a stream, a record whose offset is not
//     greater than the previous record's. A seek backwards starts a new
//     stream, so it is not nonmonotonic.
//   - poll-skip: within a stream, a jump from one record to the next (or
//     from the stream's known start to its first record) over offsets whose
//     evidence holds a value.
//   - G1a (aborted read): an observation of a value whose send failed
//     definitely. Counted with it, as "phantom": an observation of a value
//     no send wrote, or on another partition than its send's.
//   - linearizable: per partition, porcupine checks the sends and reads
//     against an append-only log whose offsets are dense from 0. A send
//     appends its value; an ok send must land at its acknowledged offset;
//     fail sends are left out; info sends stay open (return time infinity)
//     and may take effect at any later point or never. A read claims each
//     record it returned sits at its offset and that the log is at least
//     its high watermark long; a complete final read also claims the log is
//     exactly its high watermark long. These claims only grow truer as the
//     log grows, so a poll kgo served from a fetch buffered before the poll
//     was invoked cannot make a correct history look illegal. Each partition
//     is searched with a timeout; a partition that runs out is unknown,
//     never ok. Porcupine's visualization of each illegal partition goes
//     into the report. Two reductions keep the search tractable without
//     changing the verdict: an info send whose value some read returned
//     is pinned to the offset it was read at (values are unique, so no
//     linearization puts it elsewhere), and an info send no read returned
//     is left out when its partition's complete final read returned every
//     offset below its high watermark (it cannot have landed below, and
//     after the final read it changes no read). Left open, each such send
//     is tried at every point of the history, and a few of them made
//     partitions of a few thousand ops run out of time.
//
// # Transactions
//
// A txn op (f txn) is one Kafka transaction: polls of its process's
// read_committed consumer, then sends, then EndTxn (commit, or abort when
// Txn.Abort). ok: the commit was acknowledged; fail: it definitely did
// not commit; info: unknown. Every read of a transactional run (txn polls
// and final reads) is read_committed, and a txn's sends are acknowledged
// before it calls EndTxn (at Txn.EndStart). Commit and abort markers take
// an offset each, and aborted records take offsets that no
// read_committed read returns.
//
// Expansion: analysis turns each txn into the model above, so that every
// checker of the previous section judges transactions unchanged. Each of
// a txn's sends becomes a send with the txn's outcome, op indexes and
// times: an ok txn's sends are ok at their acknowledged offsets; a fail
// txn's sends are fail and their offsets are dropped (the aborted records
// occupy offsets no reader may see); an info txn's sends are info and
// their offsets are dropped too (it may have aborted, so no reader may be
// required to return them; an observation still places them). A txn's
// Reads are observations and continue its process's streams exactly as
// a poll's do (the txn process's assign ops start them). Hence: lost-write
// and unseen judge committed sends; G1a is the aborted read, an
// observation of a value whose txn definitely did not commit;
// nonmonotonic-send requires a txn's successive sends to one partition,
// and those of the process's later sends and txns, to get increasing
// offsets; poll-skip demands only offsets where evidence places a value,
// which markers, aborted records and unknown txns' unread records never
// are, so their gaps are no skip.
//
// linearizable is left out of histories with txn ops: its model is a log
// dense from 0 whose appends are visible at once, while transactions
// leave gaps and become visible at commit. Such histories get, after the
// first eight checkers, the transaction checkers below (TxnCheckerNames);
// a history without txn ops gets exactly PlainCheckerNames, as before.
//
// Terms: a node is an ok txn, or an info txn some observation returned a
// write of. A node's known offsets in partition p are those of its sends
// to p with a known offset (the acknowledged one, else the lowest an
// observation returned it at); its span in p runs from the lowest to the
// highest. T1 precedes T2 in p when T1's highest known offset in p is
// below T2's lowest.
//
//   - uncommitted-read: an observation of a value a txn T wrote, by a read
//     r (a poll's, a txn's or a final read's records of one partition) in
//     one of three cases: precommitted, r completed before T.EndStart (a
//     txn's polls complete before its own EndStart, when it has one;
//     other reads by their completion); never-committed, T completed
//     fail or info with EndStart 0 (it never called EndTxn; a txn still
//     open when the history ends may have, and is not judged);
//     own-write, r is T's own poll (which runs before T's sends). Each
//     observation counts once. A fail T's observations are G1a too.
//   - G1b (intermediate read): a read r of partition p that returned a
//     write of a not-failed txn T to p, but not another of T's writes to
//     p whose known offset lies strictly between the lowest and highest
//     offsets r returned. (A write below r's lowest offset was read by
//     the poll before, or skipped by r's start, which poll-skip judges;
//     one above its highest is for the next poll.) One anomaly per read
//     and txn.
//   - G0 (write cycle) and G1c (circular information flow), Elle-style,
//     over the nodes. A ww edge T1 -> T2 in p when T1 precedes T2 in p and
//     T2 is an immediate successor: no node T3 has T1 preceding T3 and T3
//     preceding T2 in p (the rest of p's order follows by transitivity;
//     writers whose spans overlap get no edge for p). A wr edge T1 -> T2
//     when the highest offset T2's polls returned in some partition holds
//     a value T1 (another node) wrote; lower reads are implied by ww, as
//     in Jepsen. G0: a strongly connected component (Tarjan) of the ww
//     edges; G1c: one of all edges that contains a wr edge. Each component
//     is one anomaly; its example is a shortest cycle through one of its
//     ww (G0) or wr (G1c) edges, naming txn op indexes (completions),
//     edge kinds and partitions, cut to 32 txns. The graph is linear in
//     the txns unless spans overlap heavily; past 4Mi edges it is cut and
//     both checkers are unknown unless they found a cycle.
//
// Kafka's transactions are atomic but not isolated: two concurrent txns
// may write p and q in opposite orders (a G0 cycle), and cycles through
// wr edges form among concurrent txns the same way (T1 writes p; T2
// writes p after it and commits; T3 reads T2's write and writes q; T1,
// still open, writes q after T3 and commits: T1 -ww-> T2 -wr-> T3 -ww->
// T1), so G0 and G1c occur in a correct Kafka. Transactional runs list
// them as allowed (CheckConfig.Allowed); the checkers still report every
// component they find. Some cycles are impossible for
// a correct system, and one checker fails on them:
//
//   - G1c-realtime: a node X precedes an ok txn Y in some partition p
//     although Y called EndTxn (Y.EndStart > 0) no later than X's sends
//     began, as bounded below by X's invocation (key invoked-after) or
//     by the EndStart of a txn whose write X's polls returned (key
//     read-after; read_committed returns a txn's records only after its
//     EndTxn, and X's polls run before its sends). Y's sends were all
//     acknowledged before its EndTxn, so its records sit below any X
//     sends afterwards: the cycle X -ww-> Y -realtime/wr-> X cannot
//     happen. Since each txn's EndStart follows its polls, a chain of wr
//     edges Y -wr-> ... -wr-> X makes the bound reach Y.EndStart, so
//     every cycle of one ww edge (X precedes Y, the ok txn) and otherwise
//     wr edges is caught, the 2-cycle T1 -wr-> T2 -ww-> T1 among them;
//     a cycle of wr edges alone needs a read before its writer's EndTxn,
//     which uncommitted-read reports. One anomaly per Y and partition,
//     its witness the X whose bound is latest. An uncommitted read may
//     also show up here, its bound being too late.
//
// # Measures
//
// Check also computes Measures (results.json "measures"; their exact
// definitions are Measures' doc): acknowledged and attempted sends;
// lost, unseen, duplicated, reordered and inconsistent-offset counts and
// each per million acknowledged, with loss = unseen + inconsistent;
// availability (ok sends over sends attempted) overall, during fault
// windows and outside them, and per window; each fault's failover time
// (window start to the first ok send invoked after it, per partition and
// the slowest; a membership fault has one only when it killed a node);
// ok sends/s, and p50/p99 send latency outside faults.
// Run writes the run's Setup beside them (mode, RF, min.insync.replicas,
// flush, fsync, unclean, ELR, nodes, nemesis, seed, power-loss model).
//
// Check returns Results: every checker's verdict (ok, fail, unknown), counts
// and up to MaxExamples concrete anomalies citing history op indexes. Valid
// is false when a checker not listed in CheckConfig.Allowed failed; Verdict
// is fail, else unknown if any checker was undecided, else ok.
//
// # Report
//
// Run writes into a directory: history.jsonl (streamed while the run
// goes), then results.json, latency.png (latency by invocation time, split by f and
// ok/fail/info), throughput.png (completions per second), unseen.png, with
// nemesis intervals shaded, porcupine visualizations of illegal partitions,
// and index.html tying them together with the anomaly examples. Recheck
// (the `raftq jepsen check` command) checks a directory's history.jsonl
// again and rewrites everything else; the same history and CheckConfig
// give the same verdicts, unless porcupine's timeout decided a partition.
//
// # Nemesis
//
// Faults come from chaos: Config.Faults is a chaos.Env (a chaos.Cluster,
// or a fake in tests) and Config.Schedule a chaos.Schedule. Run plays the
// schedule with a chaos.Executor, the one fault executor, its offsets
// counted from the history's time 0, while the workload runs. Each start
// and stop is recorded on NemesisProcess, named by the fault's kind: the
// invoke just before it acts, the completion ok, or info when it failed
// (the fault may be half applied). When the workload ends Run stops the
// schedule and calls the executor's Heal, even when the context was
// canceled: every fault still active is stopped (recorded as above, most
// recent first), then partitions are healed and every node resumed and
// started (not recorded in the history, which has no fault to name).
// Config.OnFault sees every step, the final heal too. Then Run calls
// Config.Recover, and only then does the final reads.
//
// # Running against raftq
//
// RunRaftq (the `raftq jepsen run` command) runs the whole test against
// real `raftq server` processes:
//
//  1. Prerequisites: ip and iptables (netns.Available), and FUSE when the
//     data dirs go on lazyfs (lazyfs.Available, also forced on by the
//     lose-unfsynced nemesis); then chaos.CleanupStale removes namespaces
//     and mounts that dead runs left.
//  2. chaos.Plan draws the fault schedule from the seed (kinds, interval,
//     kill/pause targets, power-loss targets, partition shapes), or a
//     script (--schedule: a chaos.Script, a JSON file or one shipped in
//     schedules/, see its README) gives it; a script's roles come from
//     the nodes' /v1/status (the metadata leader, and a partition's
//     leader and replicas).
//  3. chaos.New makes a private network namespace and N nodes, each
//     `raftq server` with chaos.ServerArgs (cluster id "jepsen", the
//     --fsync policy, --unsafe-ack-before-commit when asked, any extra
//     --server-arg), the peer port guarded so a node that dials peers
//     from the wrong address fails loudly. The harness waits until every
//     node's /v1/status sees every broker alive.
//  4. Run: the workload's kgo clients reach the nodes through
//     Cluster.DialContext (kgo.Dialer) and refresh metadata at most every
//     250 ms after errors (kgo's default of 5 s would leave every client
//     stuck on a killed leader). The topic is created with the asked
//     partitions and replication factor. The executor acts on the
//     cluster, and every step it takes goes, with the nodes it hit, into
//     nemesis.json and the log. With membership faults the executor acts
//     through a membersEnv: the cluster plus a kgo client dialing into
//     the namespace, for Kafka's reassignment APIs and metadata.
//  5. The executor's final heal (heal partitions, resume every node,
//     start every node that is down) runs with or without faults; then
//     Recover waits until every node sees all brokers alive and every
//     partition of the topic has a leader. Then the final reads, the
//     checks and the report.
//  6. The cluster is closed (processes killed, lazyfs unmounted, the
//     namespace deleted) even on failure; nemesis.json records the
//     schedule, every fault step (the final heal last) and every node
//     exit the harness did not cause. The nodes' logs stay in <report>/cluster/node-N.log, their data
//     dirs are removed unless KeepData.
//
// Address plan: inside the namespace lo holds 127.0.0.0/8; node i binds
// 127.0.0.<i+1> on 9092 (Kafka), 9093 (peer) and 9644 (admin); the
// harness and its clients are 127.0.0.1, which partitions never cut, so
// clients reach every node as Jepsen's do. The broker dials peers from
// its own peer address, so rules matching node addresses cut node
// traffic exactly.
//
// What each nemesis does to raftq:
//
//   - kill: SIGKILL to one node, a minority, a majority, all, or the leader
//     of a partition of the test topic (each leader fault takes the next
//     partition in turn, asked over /v1/status); stop restarts them on
//     the same data dir. A killed raft node loses nothing it fsynced;
//     with a majority down its partitions are unavailable until restart.
//   - pause: SIGSTOP to the same kinds of targets, SIGCONT at stop. A
//     paused leader stops heartbeating; the others elect a new leader
//     after the election timeout, and the old one learns the new term
//     when it resumes.
//   - partition: iptables DROP rules between node addresses in one of the
//     shapes majority-minority, isolate-one, isolate-leader, bridge,
//     majorities-ring (5+ nodes); stop heals. A cut-off leader loses its
//     quorum (CheckQuorum) and steps down; clients still reach it and get
//     NOT_LEADER_OR_FOLLOWER.
//   - lose-unfsynced: a power loss: SIGKILL the target nodes (every node
//     by default; with --power-targets one node, a minority, a majority
//     or the leader of a partition of the test topic), then lazyfs drops
//     every write not fsynced on those nodes only; the others keep
//     running with their page cache. Stop restarts the nodes it hit.
//     The loss is the worst case (everything not fsynced) unless
//     --lazyfs-writeback gives an age: then files dirty for longer were
//     written back, as Linux's flusher does after 30 s. results.json
//     names the model (setup.lazyfs: worst-case or writeback-<age>). With --fsync always raft's WAL holds every acknowledged
//     write; with --fsync never the partition WALs lose what was written
//     since start (the metadata log is always fsynced, so the topic
//     survives and the loss can be measured).
//   - membership: one action of chaos's table per fault
//     (--membership-actions): move one or two partitions of the test
//     topic to random replicas (of its replication factor, or with
//     --membership-resize of another, never below min.insync.replicas
//     in isr mode), reorder a partition's replicas so that the
//     preferred leader changes and leader balance moves leadership
//     there, cancel a move a moment after it began, or kill the
//     partition's leader or a replica it adds in the middle of a move
//     (restarted at the stop). The requests are Kafka's
//     AlterPartitionReassignments, ListPartitionReassignments and
//     Metadata, sent to the controller (group 0's leader, whose view is
//     the freshest) through kgo; leaders come from /v1/status. A stop
//     waits for its moves (--membership-settle, never past the next
//     fault step) and cancels the rest; the final heal waits until no
//     partition moves. nemesis.json's "membership" counts moves
//     completed, cancelled and killed mid-move, reorders, refusals;
//     `raftq jepsen run` prints them on its membership: line. A raft
//     move changes the group's membership by learners, a leadership
//     transfer when the leader leaves, and one joint consensus change;
//     an ISR move adds the new replicas to the ISR before group 0 ends
//     it (coordinator/reassign.go).
//   - corrupt: SIGKILL one node (drawn at Plan), then damage one file of
//     its data dir, drawn from the fault's seed and the files there: a
//     class among partition segments (*.log), index files (.index,
//     .timeindex), checkpoints (partition.checkpoint, replica.checkpoint,
//     isr.checkpoint.*) and raft WAL segments, a file of it, and either
//     1 to 4 flipped bits below its last non-zero byte or a truncation
//     to a length below it; stop restarts the node. The history's start
//     completion names it all ("corrupt n2 flip log/jepsen-1/...log
//     (segment, 81234 B) bits 1023.4 5512.0"). raftq cuts a damaged
//     partition log at its first bad batch and refills it (from raft's
//     replay, from a peer when the damage lies below the replica
//     checkpoint, or as an ISR follower from its leader), rebuilds index
//     files, ignores a bad partition.checkpoint and stands a raft
//     snapshot in for a bad replica.checkpoint; a WAL damaged other than
//     at its torn tail makes the node refuse to start (it lost raft
//     state). A refused restart (exit status 1 before ready, or within
//     3 s after) is recorded in the stop's detail with the node's
//     error; the nemesis then puts the file back as it was, as
//     restoring it from a backup would, and starts the node, so that
//     the run goes on (the repair a
//     real operator makes, decommission, remove and rejoin empty, needs
//     a node to move the replicas to, which a 3-node run lacks). With
//     the servers' hidden --unsafe-skip-crc-checks, segments below the
//     recovery point are trusted unread, and the checkers see the damage.
//
// # The replication-mode matrix
//
// RunMatrix (the `raftq jepsen matrix` command) runs every mode ×
// nemesis × seed cell with RunRaftq on a fresh cluster, each into its own
// report directory <dir>/<mode>/<nemesis>/seed-<n>; a cell whose
// results.json exists is not run again, so an interrupted matrix
// resumes. Modes (MatrixModes) and nemeses (MatrixNemeses) are the rows
// and columns of ISR-NOTES §4.1 and §4.2; each cell's text gives the
// checkers' verdict, a measured class (L: loss; U: under half the sends
// during faults ok; ok), loss per million acknowledged, availability
// during faults, failover p50, and the outcome §4.3 expects
// (MatrixExpected); matrix.md and matrix.html list every cell whose
// loss contradicts the expectation, and matrix.html links each cell run
// to its report (its throughput plot is the cell's timeline, faults
// shaded) above two plots: loss against availability, and throughput
// against p99 latency outside faults, a point per cell run and a colour
// per mode. After the cells comes the cost phase (CostConfig): each
// mode on a fresh cluster of the same size (3 nodes), without faults or
// lazyfs, runs three raftq bench loads on fresh topics (CostLoads: 100 B
// and 1 KiB records at full speed, 100 B at a fixed rate for the
// latency); its row is kept in <dir>/cost/<mode>.json and not measured
// again once done, and the rows make the Cost table of matrix.md and
// matrix.html, cost.json, and a plot of records/s against p99 per
// mode. The jepsen package starts and stops the clusters; the loads run
// through CostConfig.Bench, which `raftq jepsen matrix` fills with raftq
// bench. Still to come (issue 21): a published full run. The ISR
// rows need the broker's isr mode and its --replica-lag-time-max and
// --eligible-leader-replicas flags; until they exist those cells fail to
// start and the table says so.
//
// # Goroutines
//
// Workload.Run starts one goroutine per producer and consumer worker; each
// owns its process id, its kgo client and its random source. They share the
// Recorder (one mutex; it stamps index and time under the lock so the
// history is in time order), the rate limiter and an atomic process counter.
// A producer's ProduceSync runs in a helper goroutine so a silent broker
// cannot stall the worker; that goroutine ends when the client is closed.
// kgo's group callbacks touch only the consumer's rebalance list, under its
// mutex. Run adds one goroutine that plays the fault schedule; the final
// heal runs on Run's goroutine after that one has ended, so the executor,
// its observer and OnFault are never called concurrently. Check runs porcupine on up to GOMAXPROCS
// partitions at once; everything else in Check is single-threaded.
//
// # Departures
//
//   - Polls through kgo's consumer may be served from fetches buffered
//     before the poll was invoked, so their high watermarks are used only as
//     lower bounds on the log length; exact length claims come from final
//     reads alone.
//   - lost-write uses read coverage by streams rather than Jepsen's "below
//     the highest offset any read returned", so that a send nobody could
//     have read (a reader seeked past it, the final read failed) is not
//     called lost.
//   - The report's plots are made with gonum/plot rather than gnuplot.
//   - RunRaftq knows raftq's command line (through chaos.ServerArgs) and
//     decodes the few /v1/status fields it needs itself, since jepsen may
//     not import broker.
package jepsen
