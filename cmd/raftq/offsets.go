package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// offsetRange is a partition's log start and end, or why they are not
// known (its leader is not elected, or does not answer).
type offsetRange struct {
	start, end int64
	err        error
}

// errNoAnswer stands for a partition missing from a ListOffsets answer.
var errNoAnswer = errors.New("no answer for the partition")

// topicPartitions returns the partitions of topic, in order.
func topicPartitions(ctx context.Context, adm *kadm.Client, topic string) ([]int32, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := tds[topic]
	if !ok {
		return nil, &noTopicError{topic}
	}
	if td.Err != nil {
		return nil, topicError(topic, td.Err)
	}
	parts := td.Partitions.Numbers()
	slices.Sort(parts)
	return parts, nil
}

// listOffsets returns the start and end offsets of topic's partitions
// parts. A partition that cannot be listed gets its error and the others
// are listed still, as Kafka's tools carry on past one leaderless
// partition; retriable errors (a leader moving) are retried for up to
// wait.
func listOffsets(ctx context.Context, adm *kadm.Client, topic string, parts []int32, wait time.Duration) (map[int32]offsetRange, error) {
	deadline := time.Now().Add(wait)
	for {
		out, err := listOffsetsOnce(ctx, adm, topic, parts)
		if err != nil || !anyRetriable(out) || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

func listOffsetsOnce(ctx context.Context, adm *kadm.Client, topic string, parts []int32) (map[int32]offsetRange, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	causeS, err := partial(err)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	causeE, err := partial(err)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]offsetRange, len(parts))
	for _, p := range parts {
		s, okS := starts.Lookup(topic, p)
		e, okE := ends.Lookup(topic, p)
		r := offsetRange{start: s.Offset, end: e.Offset, err: errors.Join(s.Err, e.Err)}
		switch {
		case !okS:
			r.err = causeS
		case !okE:
			r.err = causeE
		}
		out[p] = r
	}
	return out, nil
}

// partial separates the error that says only that some leaders failed to
// answer (their partitions are then missing from the result) from one
// that fails the whole request. The first is returned as the cause to
// give the missing partitions.
func partial(err error) (cause, fatal error) {
	var se *kadm.ShardErrors
	if !errors.As(err, &se) {
		return errNoAnswer, err
	}
	if len(se.Errs) > 0 && se.Errs[0].Err != nil {
		return se.Errs[0].Err, nil
	}
	return errNoAnswer, nil
}

// anyRetriable reports whether a partition's error may pass: anything
// but a Kafka error that says it will not.
func anyRetriable(offs map[int32]offsetRange) bool {
	for _, r := range offs {
		var ke *kerr.Error
		if r.err != nil && !(errors.As(r.err, &ke) && !ke.Retriable) {
			return true
		}
	}
	return false
}

// topicError is err about topic, with Kafka's not-found code put as the
// CLI puts it, naming the topic: the code's stock text ("This server does
// not host this topic-partition") names nothing.
func topicError(topic string, err error) error {
	if nt := noTopic(topic, err); nt != err {
		return nt
	}
	return fmt.Errorf("topic %s: %w", topic, err)
}

// noTopicError is a topic the cluster does not have.
type noTopicError struct{ topic string }

func (e *noTopicError) Error() string { return fmt.Sprintf("topic %q does not exist", e.topic) }

// Unwrap returns Kafka's code for it.
func (e *noTopicError) Unwrap() error { return kerr.UnknownTopicOrPartition }

// noTopic is err, or a noTopicError if err is Kafka's not-found code.
func noTopic(topic string, err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return &noTopicError{topic}
	}
	return err
}
