package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftq/raftq/broker"
)

// runCluster prints, from every node's /v1/status, the nodes, what each
// leads and whether it is in maintenance, and per partition the leader,
// its term, the high watermark and each replica's lag behind it; or,
// as cluster maintenance, turns a node's maintenance mode on or off
// (cluster_maintenance.go).
func runCluster(ctx context.Context, e *env, args []string) error {
	return runSubcommand(ctx, e, args, []subcommand{
		{"status", clusterStatus}, {"decommission", clusterDecommission}, {"recommission", clusterRecommission}, {"remove", clusterRemove},
		{"maintenance", clusterMaintenance},
	})
}

func clusterStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "cluster status", "")
	af := bindAdminFlags(e, fs, "admin HTTP address of any node, which lists the others")
	asJSON := fs.Bool("json", false, "print every node's status document")
	if err := parse(fs, args); err != nil {
		return err
	}
	a, err := af.client() // client_admin.go
	if err != nil {
		return err
	}
	seed, err := a.status(ctx, af.addr)
	if err != nil {
		return fmt.Errorf("node status from %s: %w", af.addr, err)
	}
	statuses := collectStatuses(ctx, a, seed)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(statuses)
	}
	printNodes(e, seed, statuses)
	printMaintenance(e, seed, statuses)
	printPartitions(e, statuses)
	printOffline(e, statuses)
	return nil
}

// printOffline lists the replicas nodes failed to open, if any.
func printOffline(e *env, statuses map[uint64]*broker.Status) {
	ids := make([]uint64, 0, len(statuses))
	for id, s := range statuses {
		if len(s.Offline) > 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	fmt.Fprintln(e.stdout, "\nOFFLINE REPLICAS (the node cannot open them; it retries every few seconds)")
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tTOPIC\tPARTITION\tSINCE\tERROR")
	for _, id := range ids {
		for _, o := range statuses[id].Offline {
			fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", id, o.Topic, o.Partition, o.Since.Format(time.RFC3339), o.Error)
		}
	}
	w.Flush()
}

func collectStatuses(ctx context.Context, a *adminClient, seed broker.Status) map[uint64]*broker.Status {
	out := map[uint64]*broker.Status{}
	for _, b := range seed.Brokers {
		if s, err := a.status(ctx, b.AdminAddr); err == nil {
			out[b.ID] = &s
		}
	}
	return out
}

func printNodes(e *env, seed broker.Status, statuses map[uint64]*broker.Status) {
	fmt.Fprintf(e.stdout, "cluster %s  metadata leader %d (term %d)\n", seed.ClusterID, seed.Metadata.Leader, seed.Metadata.Term)
	fmt.Fprintf(e.stdout, "%s\n\n", metadataMembers(seed)) // cluster_voters.go
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tKAFKA\tADMIN\tALIVE\tREACHABLE\tFSYNC\tWAL\tREPLICAS")
	for _, b := range seed.Brokers {
		fmt.Fprintln(w, nodeLine(b, statuses[b.ID]))
	}
	w.Flush()
	fmt.Fprintln(e.stdout)
}

// nodeLine is one node's row; s is its own status, nil when its admin
// endpoint did not answer. The metadata marks a killed node dead only
// after its heartbeats time out, so alive and unreachable is "unknown",
// not a claim that it is up; alive in controlled shutdown is "draining".
func nodeLine(b broker.BrokerStatus, s *broker.Status) string {
	alive := fmt.Sprint(b.Alive)
	fsync, wal, n := "-", "-", "-"
	if s != nil {
		fsync, wal, n = s.Fsync, s.WAL, fmt.Sprint(len(s.Partitions))
	} else if b.Alive {
		alive = "unknown"
	}
	if b.Alive && b.ShuttingDown {
		alive = "draining"
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%v\t%s\t%s\t%s", b.ID, b.KafkaAddr, b.AdminAddr, alive, s != nil, fsync, wal, n)
}

type partKey struct {
	topic string
	index int32
}

// printPartitions prints the raft partitions, then the ISR partitions
// in a table of their own (leader epoch, ISR, ELR, follower lag).
func printPartitions(e *env, statuses map[uint64]*broker.Status) {
	byPart := map[partKey]map[uint64]broker.PartitionStatus{}
	isr := map[partKey]bool{}
	for id, s := range statuses {
		for _, p := range s.Partitions {
			k := partKey{p.Topic, p.Partition}
			if byPart[k] == nil {
				byPart[k] = map[uint64]broker.PartitionStatus{}
			}
			byPart[k][id] = p
			isr[k] = isr[k] || p.Mode == modeISR
		}
	}
	var raftKeys, isrKeys []partKey
	for k := range byPart {
		if isr[k] {
			isrKeys = append(isrKeys, k)
		} else {
			raftKeys = append(raftKeys, k)
		}
	}
	if len(raftKeys) > 0 || len(isrKeys) == 0 {
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tTERM\tHIGH WATERMARK\tLOG START\tREPLICA LAG")
		for _, k := range sortKeys(raftKeys) {
			fmt.Fprintln(w, partitionLine(k, byPart[k]))
		}
		w.Flush()
	}
	if len(isrKeys) > 0 {
		fmt.Fprintln(e.stdout, "\nISR PARTITIONS (replication.mode=isr; lag: offsets behind the leader's log end / time since caught up)")
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tEPOCH\tHIGH WATERMARK\tLOG START\tISR\tELR\tFOLLOWER LAG")
		for _, k := range sortKeys(isrKeys) {
			fmt.Fprintln(w, isrPartitionLine(k, byPart[k]))
		}
		w.Flush()
	}
}

// modeISR is an ISR partition's status mode (coordinator.ModeISR).
const modeISR = "isr"

func sortKeys(keys []partKey) []partKey {
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].topic < keys[j].topic || keys[i].topic == keys[j].topic && keys[i].index < keys[j].index
	})
	return keys
}

// isrPartitionLine summarises one ISR partition from the replica that
// leads it in the highest leader epoch: group 0's ISR and ELR as that
// leader took them, and its view of each follower. A partition whose
// leader did not answer shows the newest epoch any replica knows.
func isrPartitionLine(k partKey, reps map[uint64]broker.PartitionStatus) string {
	var leader, newest broker.PartitionStatus
	found := false
	for _, p := range reps {
		if p.LeaderEpoch >= newest.LeaderEpoch {
			newest = p
		}
		if p.Role == "leader" && (!found || p.LeaderEpoch > leader.LeaderEpoch) {
			leader, found = p, true
		}
	}
	if !found {
		return fmt.Sprintf("%s\t%d\tnone\t%d\t-\t-\t%v\t%v\t-", k.topic, k.index, newest.LeaderEpoch, ids(newest.ISR), ids(newest.ELR))
	}
	lag := ""
	for _, f := range leader.Followers {
		lag += fmt.Sprintf("%d:%s ", f.ID, followerLag(f))
	}
	if lag == "" {
		lag = "-"
	}
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t%s", k.topic, k.index, leader.Leader, leader.LeaderEpoch,
		leader.HighWatermark, leader.LogStart, ids(leader.ISR), ids(leader.ELR), strings.TrimSpace(lag))
}

// followerLag shows a follower's lag as offsets/time since it was last
// caught up, "unknown" before its first fetch.
func followerLag(f broker.FollowerLag) string {
	if f.Lag < 0 {
		return "unknown"
	}
	since := "never"
	if f.SinceCaughtUpMs >= 0 {
		since = (time.Duration(f.SinceCaughtUpMs) * time.Millisecond).Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("%d/%s", f.Lag, since)
}

// ids prints a replica set as Kafka's tools do, [] when empty.
func ids(s []uint64) string {
	if len(s) == 0 {
		return "[]"
	}
	return fmt.Sprint(s)
}

// partitionLine summarises one partition: the leader's view and, for
// every replica, how far its high watermark trails the leader's. The
// statuses are read from each node at slightly different times, and
// right after a kill a new leader's high watermark can trail its
// followers' until it commits in its term: a lag is a number only when
// the replica is known and in the leader's term with a high watermark no
// later than the leader's, else "unknown".
func partitionLine(k partKey, reps map[uint64]broker.PartitionStatus) string {
	var leader broker.PartitionStatus
	found := false
	for _, p := range reps {
		if p.Role == "leader" && (!found || p.Term > leader.Term) {
			leader, found = p, true
		}
	}
	if !found {
		return fmt.Sprintf("%s\t%d\tnone\t-\t-\t-\t-", k.topic, k.index)
	}
	lag := ""
	for _, id := range leader.Replicas {
		p, ok := reps[id]
		if ok && p.Term == leader.Term && p.HighWatermark <= leader.HighWatermark {
			lag += fmt.Sprintf("%d:%d ", id, leader.HighWatermark-p.HighWatermark)
		} else {
			lag += fmt.Sprintf("%d:unknown ", id)
		}
	}
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%d\t%s", k.topic, k.index, leader.Leader, leader.Term, leader.HighWatermark, leader.LogStart, lag)
}
