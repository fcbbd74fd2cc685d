package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// runPartitionElect is `raftq partition elect`: Kafka's ElectLeaders
// (kadm.Client.ElectLeaders) for the partitions named, or with --all for
// every partition. It prints one line per partition answered and fails
// if any election failed; one that was not needed is no failure.
func runPartitionElect(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "partition elect", "[--all | TOPIC[/PARTITION] ...]")
	cf := bindClientFlags(e, fs)
	typ := fs.String("type", "preferred", "preferred: hand each partition to its first replica; unclean: elect a live replica of a leaderless ISR partition whose ISR has nobody to lead (it may lack acknowledged records; raft topics refuse it)")
	all := fs.Bool("all", false, "every partition of every topic (only those that needed an election are printed)")
	if err := parse(fs, args); err != nil {
		return err
	}
	how, err := electionType(*typ)
	if err != nil {
		return err
	}
	if *all == (fs.NArg() > 0) {
		return usageError{errors.New("want --all or TOPIC[/PARTITION] arguments, not both")}
	}
	named, err := parseElectTargets(fs.Args())
	if err != nil {
		return err
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	var set kadm.TopicsSet
	if !*all {
		if set, err = electSet(ctx, adm, named); err != nil {
			return err
		}
	}
	res, err := adm.ElectLeaders(ctx, how, set)
	if err != nil {
		return fmt.Errorf("elect leaders: %w", err)
	}
	return printElections(e, res, *all)
}

func electionType(s string) (kadm.ElectLeadersHow, error) {
	switch s {
	case "preferred":
		return kadm.ElectPreferredReplica, nil
	case "unclean":
		return kadm.ElectLiveReplica, nil
	}
	return 0, usageError{fmt.Errorf("--type %q: want preferred or unclean", s)}
}

// parseElectTargets reads TOPIC and TOPIC/PARTITION arguments (a
// topic name cannot hold '/'): topic -> partitions, nil for all of the
// topic's.
func parseElectTargets(args []string) (map[string][]int32, error) {
	out := map[string][]int32{}
	for _, a := range args {
		topic, p, hasP := strings.Cut(a, "/")
		if topic == "" {
			return nil, usageError{fmt.Errorf("%q: want TOPIC or TOPIC/PARTITION", a)}
		}
		if !hasP {
			if _, ok := out[topic]; !ok {
				out[topic] = nil
			}
			continue
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return nil, usageError{fmt.Errorf("%q: partition %q is not a number of 0 or more", a, p)}
		}
		if ps, ok := out[topic]; !ok || ps != nil {
			out[topic] = append(ps, int32(n))
		}
	}
	return out, nil
}

// electSet is the request's set: a topic named without a partition
// stands for all of its partitions, which the cluster's metadata lists.
// A topic it does not know is still asked for, as partition 0 if none
// was named, so that the answer says it is unknown.
func electSet(ctx context.Context, adm *kadm.Client, named map[string][]int32) (kadm.TopicsSet, error) {
	var whole []string
	set := kadm.TopicsSet{}
	for topic, ps := range named {
		if ps == nil {
			whole = append(whole, topic)
			continue
		}
		set.Add(topic, ps...)
	}
	if len(whole) == 0 {
		return set, nil
	}
	tds, err := adm.ListTopics(ctx, whole...)
	if err != nil {
		return nil, fmt.Errorf("list the partitions of %s: %w", strings.Join(whole, ", "), err)
	}
	for _, topic := range whole {
		td, ok := tds[topic]
		if !ok || td.Err != nil || len(td.Partitions) == 0 {
			set.Add(topic, 0)
			continue
		}
		set.Add(topic, td.Partitions.Numbers()...)
	}
	return set, nil
}

// printElections prints one line per partition in topic and partition
// order, and fails when any election failed (ELECTION_NOT_NEEDED is
// none). With all, an empty answer says no partition needed one.
func printElections(e *env, res kadm.ElectLeadersResults, all bool) error {
	var rows []kadm.ElectLeadersResult
	for _, ps := range res {
		for _, r := range ps {
			rows = append(rows, r)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Topic < rows[j].Topic || rows[i].Topic == rows[j].Topic && rows[i].Partition < rows[j].Partition
	})
	if len(rows) == 0 && all {
		fmt.Fprintln(e.stdout, "no partition needed an election")
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tRESULT")
	failed := 0
	for _, r := range rows {
		result := "elected"
		if r.Err != nil {
			result = electError(r)
			if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				failed++
			}
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", r.Topic, r.Partition, result)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%s of %d failed", count(failed, "election"), len(rows))
	}
	return nil
}

// electError is a partition's error as the result column shows it: the
// code's name and the broker's message.
func electError(r kadm.ElectLeadersResult) string {
	name := r.Err.Error()
	var ke *kerr.Error
	if errors.As(r.Err, &ke) {
		name = ke.Message
	}
	if r.ErrMessage == "" {
		return name
	}
	return name + ": " + r.ErrMessage
}
