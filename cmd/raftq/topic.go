package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
)

func runTopic(ctx context.Context, e *env, args []string) error {
	return runSubcommand(ctx, e, args, []subcommand{
		{"create", topicCreate}, {"list", topicList}, {"describe", topicDescribe}, {"alter", topicAlter}, {"delete", topicDelete},
	})
}

func topicCreate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "topic create", "TOPIC")
	cf := bindClientFlags(e, fs)
	parts := fs.Int32P("partitions", "p", 1, "number of partitions")
	rf := fs.Int16P("replication-factor", "r", -1, "replicas per partition (default: the cluster's)")
	configs := fs.StringArrayP("config", "c", nil, "topic config key=value (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one topic name")}
	}
	cfgs, err := parseTopicConfigs(*configs)
	if err != nil {
		return err
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.CreateTopic(ctx, *parts, *rf, cfgs, fs.Arg(0))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", fs.Arg(0), errMsg(err, res.ErrMessage))
	}
	fmt.Fprintf(e.stdout, "created topic %s: %s, replication factor %d\n", res.Topic, count(int64(res.NumPartitions), "partition"), res.ReplicationFactor)
	return nil
}

// parseTopicConfigs reads --config key=value flags into CreateTopics
// configs; a malformed one is a usage error.
func parseTopicConfigs(kvs []string) (map[string]*string, error) {
	cfgs := map[string]*string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageError{fmt.Errorf("--config %q: want key=value", kv)}
		}
		cfgs[k] = &v
	}
	return cfgs, nil
}

// errMsg joins a Kafka error and the broker's message for it: the code's
// name and the message, rather than the code's stock description too.
func errMsg(err error, msg string) error {
	if msg == "" {
		return err
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return &brokerError{code: ke, msg: msg}
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// brokerError is a Kafka error code with the broker's own message.
type brokerError struct {
	code *kerr.Error
	msg  string
}

func (e *brokerError) Error() string { return e.code.Message + ": " + e.msg }
func (e *brokerError) Unwrap() error { return e.code }

func topicList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "topic list", "")
	cf := bindClientFlags(e, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITIONS\tREPLICAS")
	for _, t := range tds.Sorted() {
		fmt.Fprintf(w, "%s\t%d\t%d\n", t.Topic, len(t.Partitions), t.Partitions.NumReplicas())
	}
	return w.Flush()
}

func topicDescribe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "topic describe", "TOPIC")
	cf := bindClientFlags(e, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one topic name")}
	}
	cl, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	td, ok := tds[fs.Arg(0)]
	if !ok {
		return &noTopicError{fs.Arg(0)}
	}
	if nt := noTopic(fs.Arg(0), td.Err); nt != td.Err {
		return nt
	}
	if td.Err != nil {
		return fmt.Errorf("describe %s: %w", fs.Arg(0), td.Err)
	}
	offs, err := listOffsets(ctx, adm, td.Topic, td.Partitions.Numbers(), describeOffsetsWait)
	if err != nil {
		return err
	}
	isr := isrPartitions(ctx, cl, td.Topic)
	if isr != nil {
		fmt.Fprintf(e.stdout, "topic %s  id %s  replication.mode isr\n", td.Topic, kafkaUUID(td.ID))
	} else {
		fmt.Fprintf(e.stdout, "topic %s  id %s\n", td.Topic, kafkaUUID(td.ID))
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if isr != nil {
		fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tELR\tOFFLINE\tSTART\tEND")
	} else {
		fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tOFFLINE\tSTART\tEND")
	}
	var unknown []string
	for _, p := range td.Partitions.Sorted() {
		o := offs[p.Partition]
		start, end := fmt.Sprint(o.start), fmt.Sprint(o.end)
		if o.err != nil {
			start, end = "-", "-"
			unknown = append(unknown, fmt.Sprintf("partition %d: offsets unknown: %v", p.Partition, o.err))
		}
		if d, ok := isr[p.Partition]; ok {
			fmt.Fprintf(w, "%d\t%s\t%d\t%v\t%v\t%v\t%v\t%s\t%s\n", p.Partition, leaderName(d.LeaderID), d.LeaderEpoch, d.Replicas, d.ISR, d.EligibleLeaderReplicas, d.OfflineReplicas, start, end)
			continue
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%v\t%v\t%s\t%s\n", p.Partition, leaderName(p.Leader), p.LeaderEpoch, p.Replicas, p.OfflineReplicas, start, end)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, u := range unknown {
		fmt.Fprintln(e.stdout, u)
	}
	return describeTopicConfigs(ctx, e, adm, td.Topic)
}

// describeOffsetsWait is how long describe retries the offsets of a
// partition whose leader is moving: a leaderless one is shown as such.
const describeOffsetsWait = 3 * time.Second

// kafkaUUID writes an id as Kafka's tools do: URL-safe base64, unpadded.
func kafkaUUID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// leaderName shows a partition's leader, or "none", as kafka-topics does.
func leaderName(id int32) string {
	if id < 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

func describeTopicConfigs(ctx context.Context, e *env, adm *kadm.Client, topic string) error {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return err
	}
	sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Key < rc.Configs[j].Key })
	fmt.Fprintln(e.stdout, "configs:")
	for _, c := range rc.Configs {
		fmt.Fprintf(e.stdout, "  %s=%s (%s%s)%s\n", c.Key, c.MaybeValue(), c.Source, inheritedFrom(c), enforcedNote(c.Key))
	}
	return nil
}

// inheritedFrom names the broker config a value inherited from the
// cluster's defaults comes from (" from log.retention.hours=1"), its first
// synonym; nothing for any other value.
func inheritedFrom(c kadm.Config) string {
	if c.Source != kmsg.ConfigSourceStaticBrokerConfig || len(c.Synonyms) == 0 {
		return ""
	}
	s := c.Synonyms[0]
	v := ""
	if s.Value != nil {
		v = *s.Value
	}
	return fmt.Sprintf(" from %s=%s", s.Key, v)
}

// topicAlter changes a topic's configs (incrementally: the others keep
// their values) and raises its partition count, as kafka-configs --alter
// and kafka-topics --alter do.
func topicAlter(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "topic alter", "TOPIC")
	cf := bindClientFlags(e, fs)
	configs := fs.StringArrayP("config", "c", nil, "set a topic config key=value (repeatable)")
	deletes := fs.StringArray("delete-config", nil, "return a topic config to its default (repeatable)")
	parts := fs.Int32P("partitions", "p", 0, "raise the partition count to this")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("want exactly one topic name")}
	}
	if len(*configs) == 0 && len(*deletes) == 0 && *parts == 0 {
		return usageError{errors.New("nothing to alter: give --config, --delete-config or --partitions")}
	}
	alters, err := configAlters(*configs, *deletes)
	if err != nil {
		return err
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	topic := fs.Arg(0)
	if len(alters) > 0 {
		res, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err == nil && len(res) > 0 {
			err = errMsg(res[0].Err, res[0].ErrMessage)
		}
		if err != nil {
			return fmt.Errorf("alter %s configs: %w", topic, noTopic(topic, err))
		}
		fmt.Fprintf(e.stdout, "altered %s of topic %s\n", count(len(alters), "config"), topic)
	}
	if *parts > 0 {
		res, err := adm.UpdatePartitions(ctx, int(*parts), topic)
		if r, ok := res[topic]; err == nil && ok {
			err = errMsg(r.Err, r.ErrMessage) // the broker's words, not the code's generic text
		}
		if err != nil {
			return fmt.Errorf("alter %s partitions: %w", topic, noTopic(topic, err))
		}
		fmt.Fprintf(e.stdout, "topic %s now has %s\n", topic, count(int(*parts), "partition"))
	}
	return nil
}

// configAlters turns --config key=value and --delete-config key flags
// into incremental config changes.
func configAlters(sets, deletes []string) ([]kadm.AlterConfig, error) {
	cfgs, err := parseTopicConfigs(sets)
	if err != nil {
		return nil, err
	}
	var out []kadm.AlterConfig
	for k, v := range cfgs {
		out = append(out, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
	}
	deleted := map[string]bool{}
	for _, k := range deletes {
		if _, set := cfgs[k]; set {
			return nil, usageError{fmt.Errorf("config %s is both set and deleted", k)}
		}
		if !deleted[k] {
			deleted[k] = true
			out = append(out, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
	}
	return out, nil
}

func topicDelete(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "topic delete", "TOPIC...")
	cf := bindClientFlags(e, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("want at least one topic name")}
	}
	adm, done, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.DeleteTopics(ctx, fs.Args()...)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range res.Sorted() {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", r.Topic, noTopic(r.Topic, errMsg(r.Err, r.ErrMessage))))
			continue
		}
		fmt.Fprintf(e.stdout, "deleted topic %s\n", r.Topic)
	}
	return errors.Join(errs...)
}

// enforcedNote marks a Kafka config raftq stores without acting on it.
func enforcedNote(key string) string {
	if coordinator.NotEnforced(key) {
		return "  [accepted, not enforced]"
	}
	return ""
}
