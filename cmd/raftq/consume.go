package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runConsume(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "consume", "TOPIC")
	cf := bindClientFlags(e, fs)
	from := fs.String("from", "beginning", "where to start: beginning, end, or an offset")
	part := fs.Int32("partition", -1, "only this partition")
	follow := fs.BoolP("follow", "f", false, "keep waiting for new records")
	maxRecs := fs.Int64("max", 0, "stop after this many records")
	format := fs.String("format", "value", "value, or full (partition, offset, timestamp and headers as Kafka's console consumer prints them, key, value)")
	group := fs.StringP("group", "g", "", "consume as a member of this consumer group, committing what it prints: partitions are shared with the group's other members, and a restart resumes after the last commit (--from then says where a partition without one starts)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *format != "value" && *format != "full" {
		return usageError{fmt.Errorf("--format %q: want value or full", *format)}
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one topic")}
	}
	topic := fs.Arg(0)
	start, err := parseFrom(*from)
	if err != nil {
		return err
	}
	if *group != "" {
		if start >= 0 || *part >= 0 {
			return usageError{errors.New("--group reads the partitions the group assigns from its committed offsets: --partition and --from OFFSET do not apply")}
		}
		return runConsumeGroup(ctx, e, cf, groupConsume{topic: topic, group: *group, from: start, follow: *follow, full: *format == "full", max: *maxRecs})
	}
	cl, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	plan, err := planConsume(ctx, e, kadm.NewClient(cl), topic, *part, start)
	if err != nil {
		return err
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: plan.assign})
	if err := consumeLoop(ctx, e, cl, plan.remaining, *follow, *maxRecs, *format == "full"); err != nil {
		return err
	}
	return plan.skipped
}

// consumePlan is where each partition is read from, and where a read
// that does not follow stops.
type consumePlan struct {
	assign    map[int32]kgo.Offset
	remaining map[int32]int64 // partitions with records to read before the end at start
	skipped   error           // partitions left out: their offsets could not be listed
}

// planConsume lists the partitions' offsets and places the start in each:
// an offset below the log start begins at the start, one past the end at
// the end (both with a note), as kcat and Kafka's console consumer reset
// them. A partition whose offsets cannot be listed (no leader) is left out
// with a warning, and the command then fails, after reading the others.
func planConsume(ctx context.Context, e *env, adm *kadm.Client, topic string, part int32, from int64) (consumePlan, error) {
	parts, err := topicPartitions(ctx, adm, topic)
	if err != nil {
		return consumePlan{}, err
	}
	if part >= 0 {
		if !slices.Contains(parts, part) {
			return consumePlan{}, fmt.Errorf("topic %s has no partition %d (it has %d)", topic, part, len(parts))
		}
		parts = []int32{part}
	}
	offs, err := listOffsets(ctx, adm, topic, parts, listOffsetsWait)
	if err != nil {
		return consumePlan{}, fmt.Errorf("topic %s: %w", topic, err)
	}
	plan := consumePlan{assign: map[int32]kgo.Offset{}, remaining: map[int32]int64{}}
	var skipped []error
	for _, p := range parts {
		o := offs[p]
		if o.err != nil {
			skipped = append(skipped, fmt.Errorf("partition %d: %w", p, o.err))
			fmt.Fprintf(e.stderr, "raftq consume: skipping partition %d of %s: %v\n", p, topic, o.err)
			continue
		}
		at := placeStart(e, p, from, o)
		plan.assign[p] = kgo.NewOffset().At(at)
		if at < o.end {
			plan.remaining[p] = o.end
		}
	}
	if len(skipped) > 0 {
		plan.skipped = fmt.Errorf("topic %s: %d partitions not read: %w", topic, len(skipped), errors.Join(skipped...))
	}
	if len(plan.assign) == 0 {
		return plan, plan.skipped
	}
	return plan, nil
}

// listOffsetsWait bounds how long the client commands retry listing
// offsets of a partition whose leader is moving or not yet elected.
const listOffsetsWait = 10 * time.Second

// The --from values other than an offset, as ListOffsets spells them.
const (
	fromEnd       int64 = -1
	fromBeginning int64 = -2
)

func placeStart(e *env, p int32, from int64, o offsetRange) int64 {
	switch {
	case from == fromBeginning:
		return o.start
	case from == fromEnd:
		return o.end
	case from < o.start:
		fmt.Fprintf(e.stderr, "raftq consume: partition %d starts at %d; reading from there, not %d\n", p, o.start, from)
		return o.start
	case from > o.end:
		fmt.Fprintf(e.stderr, "raftq consume: partition %d ends at %d; reading from the end, not %d\n", p, o.end, from)
		return o.end
	}
	return from
}

// parseFrom reads --from: beginning, end, or an offset.
func parseFrom(s string) (int64, error) {
	switch s {
	case "beginning", "earliest":
		return fromBeginning, nil
	case "end", "latest":
		return fromEnd, nil
	}
	off, err := strconv.ParseInt(s, 10, 64)
	if err != nil || off < 0 {
		return 0, usageError{fmt.Errorf("--from %q: want beginning, end or an offset", s)}
	}
	return off, nil
}

func consumeLoop(ctx context.Context, e *env, cl *kgo.Client, remaining map[int32]int64, follow bool, maxRecs int64, full bool) error {
	var n int64
	caughtUp := func() bool {
		for p, end := range remaining {
			if end > 0 {
				return false
			}
			delete(remaining, p)
		}
		return true
	}
	for follow || !caughtUp() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := fetches.Err0(); err != nil {
			return err
		}
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			printRecord(e, r, full)
			if r.Offset+1 >= remaining[r.Partition] {
				remaining[r.Partition] = 0
			}
			if n++; maxRecs > 0 && n >= maxRecs {
				return nil
			}
		}
	}
	return nil
}

func printRecord(e *env, r *kgo.Record, full bool) {
	if full {
		typ := "CreateTime"
		if r.Attrs.TimestampType() == 1 {
			typ = "LogAppendTime"
		}
		fmt.Fprintf(e.stdout, "%d\t%d\t%s:%d\t%s\t%s\t%s\n", r.Partition, r.Offset, typ, r.Timestamp.UnixMilli(), formatHeaders(r.Headers), r.Key, r.Value)
		return
	}
	fmt.Fprintf(e.stdout, "%s\n", r.Value)
}

// formatHeaders writes headers as Kafka's console consumer does with
// print.headers: k1:v1,k2:v2, or NO_HEADERS for none.
func formatHeaders(hs []kgo.RecordHeader) string {
	if len(hs) == 0 {
		return "NO_HEADERS"
	}
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%s", h.Key, h.Value)
	}
	return b.String()
}
