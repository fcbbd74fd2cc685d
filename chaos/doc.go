// Package chaos runs clusters of real node processes and injects faults
// into them: kill -9, SIGSTOP/SIGCONT, iptables partitions inside a
// private network namespace (package netns), loss of un-fsynced writes
// through a FUSE filesystem (package lazyfs), partition moves through
// the cluster's admin API (the membership nemesis), and damage to a
// stopped node's files (the corrupt nemesis). A seeded
// schedule staggers faults over a run as Jepsen does, ending with a
// final heal.
//
// # Cluster
//
// New prepares N nodes from Config: node id i (1-based) gets address
// 127.0.0.<i+1>, directory <Dir>/node-<i>, data dir <Dir>/node-<i>/data
// (a lazyfs mount backed by <Dir>/node-<i>/durable when LazyFS) and a log
// <Dir>/node-<i>.log that every run appends its stdout and stderr to,
// after a "=== chaos: starting" line. The command line comes from
// Config.Args (ServerArgs gives raftq's); the process runs in that
// directory, in its own process group.
//
// With Namespace the nodes run in a private namespace through `ip netns
// exec`, all on DefaultPorts (9092 Kafka, 9093 peer, 9644 admin) of their
// own address; the harness reaches them with Cluster.DialContext (give it
// to kgo.Dialer) and HTTPClient. Without it they run on the host's
// loopback, each on three free ports picked at New, and partitions are
// unavailable. With Config.AdminTLS, HTTPClient speaks HTTPS to the
// admin listeners under that client config and AdminURL's scheme is
// https (admin_tls.go); HTTPReady follows it.
//
// # Faults, exactly
//
//   - Kill: SIGKILL to the node's process group, then wait until it is
//     reaped. Works on paused nodes. Start/EnsureRunning start it again
//     on the same data dir and wait for Config.Ready.
//   - Stop: SIGTERM (and SIGCONT, so a paused node can act on it), then
//     SIGKILL after StopTimeout. Restart is Stop then Start.
//   - Pause: SIGSTOP to the process group; Resume sends SIGCONT.
//   - KillLeader: Kill of the node Config.Leader names at that moment.
//   - Partition: a Grudge (node -> nodes it drops packets from) becomes
//     iptables DROP rules matching source and destination address; shapes:
//     Complete, Isolate, MajorityMinority, Bridge, MajoritiesRing, or any
//     hand-made grudge. Heal removes every rule. Client traffic from
//     127.0.0.1 is never cut. Nodes must dial peers from their own
//     address (see netns); GuardPeerPort makes one that does not fail.
//   - LoseUnsyncedNodes: a power loss of the nodes given: kill them,
//     then drop every write not fsynced on their lazyfs (see lazyfs for
//     the exact semantics). The other nodes run on and keep their
//     unsynced writes; the nodes hit stay down until started.
//     LoseUnsynced is the power loss of every node. The lose-unfsynced
//     nemesis hits one node, a minority, a majority, all (the default)
//     or the leader, drawn from ScheduleConfig.PowerTargets.
//   - Membership: one action of a small table (membership.go), drawn
//     by Plan, on the partitions an Env that implements MembershipEnv
//     lists (jepsen's: the test topic, through kadm). What the action
//     does is chosen when the fault starts, from the cluster as it is
//     then and the fault's seed: the same schedule on the same cluster
//     state makes the same requests, and a target is never empty,
//     never lists a node twice or a node outside NodeIDs, never has
//     fewer than MembershipConfig.MinReplicas, never is the partition's
//     replica set (a move) and never names a partition that is moving.
//     move: reassign one or two partitions to a random replica set of
//     the replication factor (one move in five, with ResizeP, of
//     another size from MinReplicas to the cluster's). reorder: the
//     same replicas with another first (not the leader, when it can),
//     so that the preferred leader changes and leader balance transfers
//     leadership there; the stop waits for that. cancel: a move,
//     cancelled 0 to 0.6 s later. kill-mid-move: a move and, 0 to 0.7 s
//     later if it is still under way, SIGKILL of the partition's leader
//     or of a replica it adds (drawn; the other when that has no live
//     node); the stop restarts it. A stop waits for the fault's moves
//     to end, polling every 250 ms, for MembershipConfig.Settle but
//     never past the schedule's next step (so that it delays no other
//     fault; each admin call gets the time until then, at least 1 s,
//     at most 5 s), and cancels the moves still under way; moves it leaves
//     behind (still moving back, or when the workload has ended) are
//     settled by the final heal. Each step's detail says what was
//     asked and how it ended ("move jepsen/3 [1,2,3]->[4,5,2]",
//     "kill 4 (adding) mid-move of ...", "jepsen/3 on [4,5,2] after
//     2.1s"), and a start's nodes are only the node it killed.
//     Decommission and ElectLeaders are to be rows of the same table.
//   - Corrupt (KindCorrupt, corrupt.go): on an Env that implements
//     CorruptEnv, SIGKILL one node (Plan draws it), then list its data
//     dir's files the nemesis may damage (DataFiles: partition segments
//     *.log, .index and .timeindex files, partition.checkpoint,
//     replica.checkpoint and isr.checkpoint.*, raft WAL segments *.wal;
//     not node.json, raft snapshots, staged snapshot logs, temporary or
//     retired files, nor files without a non-zero byte), and draw from
//     the fault's seed and that list (ChooseCorruption): a class among
//     those present, evenly, a file of it, then either a flip of 1 to 4
//     distinct bits below the file's last non-zero byte (etcd
//     preallocates WAL segments with zeros) or a truncation to a length
//     below it, with even odds. ApplyCorruption does it and fsyncs. The
//     same files and seed give the same damage. The start's detail is
//     Corruption.String(): node, file, class, size, and the bits
//     (byte.bit) or the new length. The stop restarts the node; a start
//     that exits with status 1 before it is ready (raftq refusing a data
//     dir whose raft state was lost), or within 3 s of being ready (raft
//     halting a node that lost entries its leader knows it had), is a
//     refusal, not a crash: the nemesis drops that exit from Crashes,
//     says so in the detail with the node's own error line, puts the
//     file back whole as it was before the damage (removing the
//     <name>.broken copy etcd's WAL repair leaves) and starts the node
//     again. Any other exit (a panic exits 2) stays a crash. Until its stop, the node is
//     the fault's: the stop of a kill or power loss that also hit it
//     leaves it down ("restart [1 3] ([2] left to its corrupt fault)").
//
// Crashes lists node exits the cluster did not cause.
//
// # Schedules
//
// Plan draws a Schedule from a seed: per nemesis kind, alternating gaps
// and faults, each drawn uniformly from [0, 2*Interval) (a fault lasts at
// least Interval/10), all within Duration; kill and pause targets (one,
// minority, majority, all, leader), power-loss targets, partition
// shapes and membership actions (with a seed for each) are drawn too.
// The same config gives the same schedule; each kind draws from its own
// stream. Faults of one kind never overlap; faults of different kinds
// may; Schedule.Validate checks the same of a hand-made schedule.
//
// A Script (ReadScript, a JSON file) is a hand-written schedule: faults
// with explicit start and stop offsets, targets and grudges made of cuts
// ("these nodes cannot reach those"), for scenarios a random schedule
// almost never produces (jepsen/schedules has the last replica standing
// and an unclean election). Targets and cuts name node ids or roles of
// one partition (leader, followers, replicas, others, metadata-leader),
// which the Executor asks the Env for once, when the first fault that
// names a role starts, and keeps for the rest of the script.
// Membership and corrupt (random schedules only) are refused with
// ErrUnsupported.
//
// An Executor is the one way a schedule is performed (chaos tests and
// jepsen's nemesis both use it). Play performs every start and stop at
// its offset from a given start instant, until the last or until its
// context is done, announcing each step to an Observer before it acts
// and reporting it (kind, phase, nodes, detail, monotonic begin/end,
// error) when done. A leader target or an isolate-leader grudge is
// resolved when its fault starts. A failed step does not stop the
// schedule: it is reported, and a failed start counts as active. Heal,
// after Play, is the final heal: stop every fault still active, most
// recent first, then heal partitions, resume all and start all; with
// membership faults it then waits (60 s at most) until no partition
// moves, cancelling every move still under way after 30 s, and reports
// that as a membership event of its own (phase final-heal) carrying the
// run's MemberStats; it runs even when the context was canceled and
// returns what it could not undo.
//
// # Cleanup guarantees
//
//   - Close kills every node (and waits for it), unmounts every lazyfs,
//     deletes the namespace (killing anything left in it) and ends the
//     spawner thread. Use t.Cleanup(func() { c.Close() }) in tests.
//   - Nodes are started from one locked OS thread with a parent-death
//     signal (SIGKILL), so if the harness dies, even by SIGKILL, the
//     kernel kills every node (TestCluster_NoOrphansWhenHarnessDies).
//   - What a crashed harness leaves (namespace raftq-<pid>-*, mounts
//     raftq-lazyfs-<pid>) is removed by CleanupStale once that pid is
//     dead. Call it before a run.
//
// # Prerequisites
//
// Root, ip and iptables (partitions), /dev/fuse (lazyfs).
// netns.Available and lazyfs.Available say what is missing and how to
// install it (apt-get install iproute2 iptables fuse3). The tests fail
// when one is missing; outside CI, RAFTQ_SKIP_PRIVILEGED=1 turns that
// into a skip (chaos/internal/testenv).
//
// # Departures from the shared design
//
//   - The layout allows chaos only the standard library and internal/;
//     it also imports github.com/hanwen/go-fuse/v2 (lazyfs needs FUSE)
//     and golang.org/x/sys/unix (setns, statx, fallocate constants).
//   - The membership nemesis needs an admin API chaos cannot speak
//     (Kafka's, through franz-go): MembershipEnv is the seam, and
//     jepsen implements it.
//
// # Goroutines
//
// Cluster methods are safe for concurrent use. mu guards the process
// table and the crash list and is never held while waiting. One reaper
// goroutine per running process waits for it and closes its log. The
// spawner goroutine owns the locked thread that forks every node. An
// Executor has no goroutine and no lock: Play and Heal run steps (a
// membership fault's waits too), and call its Observer, on the caller's
// goroutine, one call at a time.
package chaos
