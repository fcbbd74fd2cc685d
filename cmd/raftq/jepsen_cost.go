package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/jepsen"
)

// costBench is the matrix's cost hook (jepsen.CostConfig.Bench): it runs
// one load with raftq bench's code and defaults (acks=all, idempotent,
// linger 0, no compression) against the cost phase's cluster, on a topic
// it creates for the load and deletes after it.
func costBench(e *env) func(ctx context.Context, l jepsen.CostLoad) (jepsen.CostFigures, error) {
	return func(ctx context.Context, l jepsen.CostLoad) (jepsen.CostFigures, error) {
		cf := &clientFlags{brokers: strings.Join(l.Brokers, ","), dial: l.Dial}
		opts, pf, err := costProducerOpts()
		if err != nil {
			return jepsen.CostFigures{}, err
		}
		cfgs := map[string]*string{}
		for k, v := range l.TopicConfigs {
			cfgs[k] = &v
		}
		if err := ensureTopic(ctx, cf, l.Topic, l.Partitions, l.ReplicationFactor, cfgs); err != nil {
			return jepsen.CostFigures{}, err
		}
		// A partial setup still leaves the figures standing (as in raftq bench).
		setup, serr := benchSetup(ctx, cf, l.Topic)
		if serr != nil && ctx.Err() == nil {
			fmt.Fprintf(e.stderr, "raftq jepsen matrix: cost %s: %v; the row names only part of its setup\n", l.Name, serr)
		}
		b := &benchFlags{topic: l.Topic, size: l.RecordSize, duration: l.Duration, warmup: l.Warmup, rate: l.Rate,
			producers: l.Producers, drain: pf.drain}
		res, err := bench(ctx, e, cf, opts, b)
		if derr := deleteTopic(ctx, cf, l.Topic); derr != nil && err == nil {
			// The figures stand; only the disk keeps the topic's data.
			fmt.Fprintf(e.stderr, "raftq jepsen matrix: cost %s: %v\n", l.Name, derr)
		}
		if err != nil {
			return jepsen.CostFigures{}, err
		}
		return costFigures(res, setup), nil
	}
}

// costProducerOpts are raftq bench's producer options with its flags'
// defaults, so that the cost table measures what `raftq bench` does.
func costProducerOpts() ([]kgo.Opt, *producerFlags, error) {
	fs := pflag.NewFlagSet("cost", pflag.ContinueOnError)
	pf := bindProducerFlags(fs)
	opts, err := pf.opts()
	if err != nil {
		return nil, nil, err
	}
	codec, err := compressionOpt("none")
	return append(opts, codec), pf, err
}

// deleteTopic deletes a load's topic, so that the disk holds one load's
// records at a time; it gets its own minute when ctx is done.
func deleteTopic(ctx context.Context, cf *clientFlags, topic string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	defer done()
	res, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, errMsg(err, res.ErrMessage))
	}
	return nil
}

// costFigures are the cost table's share of a bench result.
func costFigures(r benchResult, setup map[string]string) jepsen.CostFigures {
	return jepsen.CostFigures{Records: r.Records, Failed: r.Failed, Unanswered: r.Unanswered, Seconds: r.Seconds,
		RecordsPerS: r.RecordsPerS, MBPerS: r.MBPerS, P50ms: r.P50ms, P99ms: r.P99ms, P999ms: r.P999ms, MaxMs: r.MaxMs, Setup: setup}
}
