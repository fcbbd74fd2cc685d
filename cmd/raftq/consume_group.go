package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupConsume is `raftq consume --group`: a member of a consumer group
// that prints the records of the partitions the group gives it and
// commits each batch it printed before taking the next, so that a member
// started later in the group resumes after the last record printed.
type groupConsume struct {
	topic, group string
	from         int64 // fromBeginning or fromEnd: where a partition without a commit starts
	follow, full bool
	max          int64
}

// idlePoll is how long a group member that does not follow waits for
// records before it checks whether its partitions are read to their end.
const idlePoll = 500 * time.Millisecond

// commitWait bounds a commit, which runs past Ctrl-C so that what was
// printed is committed.
const commitWait = 10 * time.Second

func runConsumeGroup(ctx context.Context, e *env, cf *clientFlags, g groupConsume) error {
	var asg assignment
	reset := kgo.NewOffset().AtStart()
	if g.from == fromEnd {
		reset = kgo.NewOffset().AtEnd()
	}
	// Rebalances wait while a polled batch is printed and committed, so a
	// commit never names a generation the group has left behind.
	cl, err := cf.connect(ctx, kgo.ConsumerGroup(g.group), kgo.ConsumeTopics(g.topic), kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(asg.assigned), kgo.OnPartitionsRevoked(asg.revoked), kgo.OnPartitionsLost(asg.revoked))
	if err != nil {
		return err
	}
	defer cl.Close()
	defer cl.AllowRebalance() // Close waits for a blocked rebalance
	adm := kadm.NewClient(cl)
	if _, err := topicPartitions(ctx, adm, g.topic); err != nil {
		return err
	}
	var n int64
	for {
		recs, err := pollGroup(ctx, cl, g, n)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("consume %s in group %s: %w", g.topic, g.group, err)
		}
		for _, r := range recs {
			printRecord(e, r, g.full)
		}
		if len(recs) > 0 {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitWait)
			err := cl.CommitRecords(cctx, recs...)
			cancel()
			if err != nil {
				return fmt.Errorf("commit offsets of group %s: %w", g.group, err)
			}
		}
		cl.AllowRebalance()
		if n += int64(len(recs)); g.max > 0 && n >= g.max {
			return nil
		}
		if !g.follow && len(recs) == 0 {
			if done, err := asg.readToEnd(ctx, cl, adm, g); err != nil || done {
				return err
			}
		}
	}
}

// pollGroup polls at most the records --max leaves, waiting idlePoll
// unless the member follows.
func pollGroup(ctx context.Context, cl *kgo.Client, g groupConsume, n int64) ([]*kgo.Record, error) {
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if !g.follow {
		pctx, cancel = context.WithTimeout(ctx, idlePoll)
	}
	defer cancel()
	left := -1
	if g.max > 0 {
		left = int(g.max - n)
	}
	fetches := cl.PollRecords(pctx, left)
	var errs []error
	fetches.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	})
	return fetches.Records(), errors.Join(errs...)
}

// assignment is the partitions the group gives this member, which kgo's
// group goroutine changes through the callbacks.
type assignment struct {
	mu     sync.Mutex
	joined bool
	parts  map[int32]bool
}

func (a *assignment) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.joined = true
	if a.parts == nil {
		a.parts = map[int32]bool{}
	}
	for _, ps := range m {
		for _, p := range ps {
			a.parts[p] = true
		}
	}
}

func (a *assignment) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ps := range m {
		for _, p := range ps {
			delete(a.parts, p)
		}
	}
}

func (a *assignment) current() (joined bool, parts []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.joined, slices.Sorted(maps.Keys(a.parts))
}

// readToEnd reports whether this member has joined and the group's
// commits reach the end of each partition it holds (or, for one without
// a commit, whether it has nothing to read from where it starts). A
// member given no partitions has nothing to read.
func (a *assignment) readToEnd(ctx context.Context, cl *kgo.Client, adm *kadm.Client, g groupConsume) (bool, error) {
	joined, parts := a.current()
	if _, gen := cl.GroupMetadata(); !joined && gen <= 0 {
		return false, nil
	}
	if len(parts) == 0 {
		return true, nil
	}
	offs, err := listOffsets(ctx, adm, g.topic, parts, listOffsetsWait)
	if err != nil {
		return false, err
	}
	commits, err := adm.FetchOffsets(ctx, g.group)
	if err != nil {
		return false, fmt.Errorf("fetch offsets of group %s: %w", g.group, err)
	}
	for _, p := range parts {
		o := offs[p]
		if o.err != nil {
			return false, fmt.Errorf("partition %d: %w", p, o.err)
		}
		pos := o.start
		if c, ok := commits.Lookup(g.topic, p); ok && c.At >= 0 {
			pos = c.At
		} else if g.from == fromEnd {
			pos = o.end
		}
		if pos < o.end {
			return false, nil
		}
	}
	return true, nil
}
