package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// raftq partition moves partitions between brokers through Kafka's
// AlterPartitionReassignments and ListPartitionReassignments, as
// kafka-reassign-partitions.sh does.

func runPartition(ctx context.Context, e *env, args []string) error {
	return runSubcommand(ctx, e, args, []subcommand{
		{"move", partitionMove}, {"status", partitionStatus}, {"cancel", partitionCancel}, {"elect", runPartitionElect},
	})
}

// topicPartition is a TOPIC/P argument.
type topicPartition struct {
	topic string
	part  int32
}

func (tp topicPartition) String() string { return fmt.Sprintf("%s/%d", tp.topic, tp.part) }

func parseTopicPartitions(args []string) ([]topicPartition, error) {
	if len(args) == 0 {
		return nil, usageError{errors.New("want at least one TOPIC/PARTITION")}
	}
	out := make([]topicPartition, 0, len(args))
	for _, a := range args {
		i := strings.LastIndexByte(a, '/')
		p, err := strconv.ParseInt(a[i+1:], 10, 32)
		if i <= 0 || err != nil || p < 0 {
			return nil, usageError{fmt.Errorf("%q: want TOPIC/PARTITION, such as orders/0", a)}
		}
		out = append(out, topicPartition{a[:i], int32(p)})
	}
	return out, nil
}

// parseBrokerList parses --replicas 2,4,5.
func parseBrokerList(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || id <= 0 {
			return nil, usageError{fmt.Errorf("--replicas %q: want broker ids such as 2,4,5", s)}
		}
		out = append(out, int32(id))
	}
	return out, nil
}

func partitionMove(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "partition move", "TOPIC/PARTITION...")
	cf := bindClientFlags(e, fs)
	replicas := fs.String("replicas", "", "the new replicas, preferred leader first, such as 2,4,5 (required)")
	wait := fs.Bool("wait", false, "wait until every move is complete, printing progress")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *replicas == "" {
		return usageError{errors.New("--replicas is required")}
	}
	ids, err := parseBrokerList(*replicas)
	if err != nil {
		return err
	}
	tps, err := parseTopicPartitions(fs.Args())
	if err != nil {
		return err
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, tp := range tps {
		req.Assign(tp.topic, tp.part, ids)
	}
	return alterAssignments(ctx, e, cf, req, tps, "moving", *wait)
}

func partitionCancel(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "partition cancel", "TOPIC/PARTITION...")
	cf := bindClientFlags(e, fs)
	wait := fs.Bool("wait", false, "wait until every partition is back on its original replicas")
	if err := parse(fs, args); err != nil {
		return err
	}
	tps, err := parseTopicPartitions(fs.Args())
	if err != nil {
		return err
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, tp := range tps {
		req.CancelAssign(tp.topic, tp.part)
	}
	return alterAssignments(ctx, e, cf, req, tps, "cancelling the move of", *wait)
}

// alterAssignments sends req and reports each partition's answer; with
// wait it then follows the moves until none of tps is moving.
func alterAssignments(ctx context.Context, e *env, cf *clientFlags, req kadm.AlterPartitionAssignmentsReq, tps []topicPartition, verb string, wait bool) error {
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	var failed int
	for _, tp := range tps {
		r, ok := res[tp.topic][tp.part]
		switch {
		case !ok:
			failed++
			fmt.Fprintf(e.stdout, "%s: no answer\n", tp)
		case r.Err != nil:
			failed++
			fmt.Fprintf(e.stdout, "%s: %v\n", tp, errMsg(r.Err, r.ErrMessage))
		default:
			fmt.Fprintf(e.stdout, "%s: %s\n", tp, verb)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s refused", count(failed, "partition"))
	}
	if !wait {
		return nil
	}
	return awaitMoves(ctx, e, adm, tps)
}

// awaitMoves polls ListPartitionReassignments until none of tps moves.
func awaitMoves(ctx context.Context, e *env, adm *kadm.Client, tps []topicPartition) error {
	set := kadm.TopicsSet{}
	for _, tp := range tps {
		set.Add(tp.topic, tp.part)
	}
	start := time.Now()
	last := ""
	for {
		moves, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			return err
		}
		if len(moves) == 0 {
			fmt.Fprintf(e.stdout, "done in %s\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if line := fmt.Sprintf("%s still moving", count(len(moves), "partition")); line != last {
			fmt.Fprintln(e.stdout, line)
			last = line
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func partitionStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "partition status", "[TOPIC...]")
	cf := bindClientFlags(e, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cl, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	moves, err := listMoves(ctx, cl, fs.Args())
	if err != nil {
		return err
	}
	if len(moves) == 0 {
		fmt.Fprintln(e.stdout, "no partition is moving")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tREPLICAS\tADDING\tREMOVING")
	for _, m := range moves {
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\n", m.Topic, m.Partition, brokerIDs(m.Replicas), brokerIDs(m.AddingReplicas), brokerIDs(m.RemovingReplicas))
	}
	return tw.Flush()
}

// listMoves lists the moves of topics (none: of every topic), sorted.
func listMoves(ctx context.Context, cl *kgo.Client, topics []string) ([]kadm.ListPartitionReassignmentsResponse, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	if len(topics) > 0 {
		st, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
		if err != nil {
			return nil, err
		}
		for _, name := range topics {
			t, ok := st[name]
			switch {
			case !ok:
				return nil, fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
			case t.Err != nil:
				return nil, fmt.Errorf("topic %s: %w", name, t.Err)
			}
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic, rt.Partitions = name, t.Partitions.Numbers()
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return nil, errMsg(err, msg)
	}
	var out []kadm.ListPartitionReassignmentsResponse
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, kadm.ListPartitionReassignmentsResponse{Topic: t.Topic, Partition: p.Partition,
				Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas})
		}
	}
	slices.SortFunc(out, func(a, b kadm.ListPartitionReassignmentsResponse) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out, nil
}

// brokerIDs prints Kafka broker ids as the cluster commands print
// replica sets.
func brokerIDs(v []int32) string {
	out := make([]uint64, len(v))
	for i, id := range v {
		out[i] = uint64(id)
	}
	return ids(out)
}
