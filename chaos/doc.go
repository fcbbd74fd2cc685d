// Package chaos runs clusters of real node processes and injects faults
// into them: kill -9, SIGSTOP/SIGCONT, iptables partitions inside a
// private network namespace (package netns), and loss of un-fsynced
// writes through a FUSE filesystem (package lazyfs). A seeded schedule
// staggers faults over a run as Jepsen does, ending with a final heal.
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
// unavailable.
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
//   - Membership changes are not implemented (Plan and scripts reject
//     them) until the broker can reassign partitions; disk corruption
//     (KindDiskCorruption) is reserved the same way for a later issue.
//
// Crashes lists node exits the cluster did not cause.
//
// # Schedules
//
// Plan draws a Schedule from a seed: per nemesis kind, alternating gaps
// and faults, each drawn uniformly from [0, 2*Interval) (a fault lasts at
// least Interval/10), all within Duration; kill and pause targets (one,
// minority, majority, all, leader), power-loss targets and partition
// shapes are drawn too.
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
// Membership and disk-corruption are reserved kinds: ErrUnsupported.
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
// recent first, then heal partitions, resume all and start all; it runs
// even when the context was canceled and returns what it could not undo.
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
//   - Membership changes wait for broker reassignment.
//
// # Goroutines
//
// Cluster methods are safe for concurrent use. mu guards the process
// table and the crash list and is never held while waiting. One reaper
// goroutine per running process waits for it and closes its log. The
// spawner goroutine owns the locked thread that forks every node. An
// Executor has no goroutine and no lock: Play and Heal run steps, and
// call its Observer, on the caller's goroutine, one call at a time.
package chaos
