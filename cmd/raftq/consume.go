package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runConsume(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "consume")
	cf := bindClientFlags(fs)
	from := fs.String("from", "beginning", "where to start: beginning, end, or an offset")
	part := fs.Int32("partition", -1, "only this partition")
	follow := fs.BoolP("follow", "f", false, "keep waiting for new records")
	maxRecs := fs.Int64("max", 0, "stop after this many records")
	format := fs.String("format", "value", "value, or full (partition, offset, key, value)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one topic")}
	}
	topic := fs.Arg(0)
	start, err := startOffset(*from)
	if err != nil {
		return err
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("topic %s: %w", topic, err)
	}
	assign := map[int32]kgo.Offset{}
	remaining := map[int32]int64{} // partitions still short of their end at start
	ends.Each(func(o kadm.ListedOffset) {
		if *part >= 0 && o.Partition != *part {
			return
		}
		assign[o.Partition] = start
		if *from != "end" && *from != "latest" {
			remaining[o.Partition] = o.Offset
		}
	})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign})
	return consumeLoop(ctx, e, cl, remaining, *follow, *maxRecs, *format == "full")
}

func startOffset(s string) (kgo.Offset, error) {
	switch s {
	case "beginning", "earliest":
		return kgo.NewOffset().AtStart(), nil
	case "end", "latest":
		return kgo.NewOffset().AtEnd(), nil
	}
	off, err := strconv.ParseInt(s, 10, 64)
	if err != nil || off < 0 {
		return kgo.Offset{}, usageError{fmt.Errorf("--from %q: want beginning, end or an offset", s)}
	}
	return kgo.NewOffset().At(off), nil
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
		fmt.Fprintf(e.stdout, "%d\t%d\t%s\t%s\n", r.Partition, r.Offset, r.Key, r.Value)
		return
	}
	fmt.Fprintf(e.stdout, "%s\n", r.Value)
}
