package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func runGroup(ctx context.Context, e *env, args []string) error {
	return runSubcommand(ctx, e, args, []subcommand{
		{"list", groupList}, {"describe", groupDescribe}, {"reset-offsets", groupResetOffsets},
	})
}

func groupList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "group list", "")
	cf := bindClientFlags(e, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tSTATE\tPROTOCOL TYPE\tCOORDINATOR")
	for _, g := range groups.Sorted() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", g.Group, g.State, g.ProtocolType, g.Coordinator)
	}
	return w.Flush()
}

// partitionRow is one line of a group's offsets table.
type partitionRow struct {
	topic     string
	partition int32
	committed int64 // -1: none
	end       int64 // -1: unknown
	member    string
}

func groupDescribe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "group describe", "GROUP")
	cf := bindClientFlags(e, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one group")}
	}
	group := fs.Arg(0)
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	dg, err := describeOne(ctx, adm, group)
	if err != nil {
		return err
	}
	if dg.State == "Dead" {
		// As Kafka: a group with neither members nor offsets is Dead.
		return fmt.Errorf("group %s does not exist", group)
	}
	protocol := dg.ProtocolType
	if dg.Protocol != "" {
		protocol += "/" + dg.Protocol
	}
	fmt.Fprintf(e.stdout, "group %s: state %s, protocol %s, coordinator %d, %s\n\n",
		group, dg.State, protocol, dg.Coordinator.NodeID, count(len(dg.Members), "member"))
	owners := printMembers(e.stdout, dg)
	rows, err := offsetRows(ctx, adm, group, owners)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	return printOffsets(e.stdout, rows)
}

func describeOne(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedGroup, error) {
	dgs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describe %s: %w", group, err)
	}
	dg := dgs[group]
	if dg.Err != nil {
		return dg, fmt.Errorf("describe %s: %w", group, errMsg(dg.Err, dg.ErrMessage))
	}
	return dg, nil
}

// printMembers prints each member and its assignment, decoded as the
// consumer protocol's kmsg.ConsumerMemberAssignment, and returns which
// member owns each partition.
func printMembers(out io.Writer, dg kadm.DescribedGroup) map[string]map[int32]string {
	owners := map[string]map[int32]string{}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNMENT")
	for _, m := range dg.Members {
		inst := "-"
		if m.InstanceID != nil {
			inst = *m.InstanceID
		}
		assigned := "-"
		if a, ok := m.Assigned.AsConsumer(); ok && len(a.Topics) > 0 {
			assigned = ""
			for _, t := range a.Topics {
				if owners[t.Topic] == nil {
					owners[t.Topic] = map[int32]string{}
				}
				for _, p := range t.Partitions {
					owners[t.Topic][p] = m.MemberID
				}
				assigned += fmt.Sprintf("%s%v ", t.Topic, t.Partitions)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost, assigned)
	}
	_ = w.Flush()
	return owners
}

// offsetRows joins committed offsets, end offsets and owners per
// partition, for every partition committed to or assigned.
func offsetRows(ctx context.Context, adm *kadm.Client, group string, owners map[string]map[int32]string) ([]partitionRow, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	rows := map[string]map[int32]*partitionRow{}
	row := func(topic string, p int32) *partitionRow {
		if rows[topic] == nil {
			rows[topic] = map[int32]*partitionRow{}
		}
		if rows[topic][p] == nil {
			rows[topic][p] = &partitionRow{topic: topic, partition: p, committed: -1, end: -1}
		}
		return rows[topic][p]
	}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil {
			row(o.Topic, o.Partition).committed = o.At
		}
	})
	for topic, ps := range owners {
		for p, m := range ps {
			row(topic, p).member = m
		}
	}
	var topics []string
	for t := range rows {
		topics = append(topics, t)
	}
	if len(topics) > 0 {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("list end offsets: %w", err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if r := rows[o.Topic][o.Partition]; r != nil && o.Err == nil {
				r.end = o.Offset
			}
		})
	}
	var out []partitionRow
	for _, ps := range rows {
		for _, r := range ps {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].topic < out[j].topic || out[i].topic == out[j].topic && out[i].partition < out[j].partition
	})
	return out, nil
}

func printOffsets(out io.Writer, rows []partitionRow) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
	for _, r := range rows {
		committed, end, lag, member := "-", "-", "-", "-"
		if r.committed >= 0 {
			committed = strconv.FormatInt(r.committed, 10)
		}
		if r.end >= 0 {
			end = strconv.FormatInt(r.end, 10)
		}
		if r.committed >= 0 && r.end >= 0 {
			lag = strconv.FormatInt(max(r.end-r.committed, 0), 10)
		}
		if r.member != "" {
			member = r.member
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", r.topic, r.partition, committed, end, lag, member)
	}
	return w.Flush()
}

// resetTarget is where reset-offsets moves a group's offsets.
type resetTarget struct {
	earliest, latest bool
	datetime         string
	offset           int64 // -1: not set
}

func groupResetOffsets(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "group reset-offsets", "GROUP")
	cf := bindClientFlags(e, fs)
	topic := fs.String("topic", "", "topic whose offsets to reset (required)")
	var tgt resetTarget
	fs.BoolVar(&tgt.earliest, "to-earliest", false, "reset to each partition's log start")
	fs.BoolVar(&tgt.latest, "to-latest", false, "reset to each partition's end")
	fs.StringVar(&tgt.datetime, "to-datetime", "", "reset to the first offset at or after this RFC 3339 time")
	fs.Int64Var(&tgt.offset, "to-offset", -1, "reset to this offset (clamped to each partition's range)")
	execute := fs.Bool("execute", false, "commit the new offsets (without it, only print the plan)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *topic == "" {
		return usageError{errors.New("want one group and --topic")}
	}
	if err := tgt.validate(); err != nil {
		return usageError{err}
	}
	group := fs.Arg(0)
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	dg, err := describeOne(ctx, adm, group)
	if err != nil {
		return err
	}
	if dg.State != "Empty" && dg.State != "Dead" {
		return fmt.Errorf("group %s is %s with %d members: stop its consumers first (offsets can only be reset while it is Empty)",
			group, dg.State, len(dg.Members))
	}
	plan, err := tgt.offsets(ctx, adm, *topic)
	if err != nil {
		return err
	}
	return applyReset(ctx, e, adm, group, plan, *execute)
}

func (t *resetTarget) validate() error {
	n := 0
	for _, set := range []bool{t.earliest, t.latest, t.datetime != "", t.offset >= 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("want exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset")
	}
	if t.datetime != "" {
		if _, err := time.Parse(time.RFC3339, t.datetime); err != nil {
			return fmt.Errorf("--to-datetime: %w", err)
		}
	}
	return nil
}

// offsets computes the target offset of every partition of topic.
func (t *resetTarget) offsets(ctx context.Context, adm *kadm.Client, topic string) (kadm.Offsets, error) {
	parts, err := topicPartitions(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	ranges, err := listOffsets(ctx, adm, topic, parts, listOffsetsWait)
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	var at kadm.ListedOffsets
	if t.datetime != "" {
		ts, _ := time.Parse(time.RFC3339, t.datetime)
		if at, err = adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), topic); err != nil {
			return nil, fmt.Errorf("list offsets after %s: %w", t.datetime, err)
		}
	}
	out := kadm.Offsets{}
	for _, p := range parts {
		r := ranges[p]
		if r.err != nil {
			return nil, fmt.Errorf("topic %s partition %d: %w", topic, p, r.err)
		}
		var o int64
		switch {
		case t.earliest:
			o = r.start
		case t.latest:
			o = r.end
		case t.datetime != "":
			o = r.end
			if a, ok := at.Lookup(topic, p); ok && a.Err == nil && a.Offset >= 0 {
				o = a.Offset
			}
		default:
			o = min(max(t.offset, r.start), r.end)
		}
		out.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	return out, nil
}

func applyReset(ctx context.Context, e *env, adm *kadm.Client, group string, plan kadm.Offsets, execute bool) error {
	current, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tCURRENT\tNEW")
	for _, o := range plan.Sorted() {
		cur := "-"
		if c, ok := current.Lookup(o.Topic, o.Partition); ok && c.Err == nil {
			cur = strconv.FormatInt(c.At, 10)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\n", o.Topic, o.Partition, cur, o.At)
	}
	_ = w.Flush()
	if !execute {
		fmt.Fprintln(e.stdout, "\ndry run: pass --execute to commit these offsets")
		return nil
	}
	if err := adm.CommitAllOffsets(ctx, group, plan); err != nil {
		return fmt.Errorf("commit offsets of %s: %w", group, err)
	}
	fmt.Fprintf(e.stdout, "\nreset %s\n", group)
	return nil
}
