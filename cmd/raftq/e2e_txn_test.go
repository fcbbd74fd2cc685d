package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
)

// TestE2E_Transactions runs Kafka transactions on real processes, on a raft
// and an ISR topic: franz-go's transactional producer commits and aborts
// transactions over two partitions (one node is killed between two of
// them and restarted later), sarama's commits one and aborts one, and then
// a read_committed consumer sees exactly the committed records, in order,
// and a read_uncommitted one every record. A second franz-go producer with
// the same transactional id fences the first. Then franz-go's
// GroupTransactSession runs consume-transform-produce on each mode
// (e2e_txn_ctp_test.go).
func TestE2E_Transactions(t *testing.T) {
	c := e2eCluster(t, 3)
	for _, mode := range []struct {
		name string
		tc   topicConfigs
	}{{"raft", nil}, {"isr", isrTopic}} {
		t.Run(mode.name, func(t *testing.T) { e2eTransactions(t, c, mode.name, mode.tc) })
		t.Run(mode.name+"/group-transact-session", func(t *testing.T) { e2eGroupTransactSession(t, c, mode.name, mode.tc) })
	}
	checkNoCrashes(t, c)
}

// txnLog is what a test's transactions wrote to each partition: committed
// values, and every value sent.
type txnLog struct {
	committed, all map[int32][]string
}

func e2eTransactions(t *testing.T, c *chaos.Cluster, mode string, tc topicConfigs) {
	topic := "txn-" + mode
	// The mode before this one killed and restarted node 2: a topic of
	// three replicas needs it registered again.
	waitAllRegistered(t, c)
	createTopic(t, c, topic, 2, 3, tc.with(nil))
	log := txnLog{committed: map[int32][]string{}, all: map[int32][]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cl := e2eClient(t, c, kgo.TransactionalID("e2e-"+mode), kgo.TransactionTimeout(30*time.Second),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 9 {
		if i == 4 {
			if err := c.Kill(ctx, 2); err != nil {
				t.Fatal(err)
			}
		}
		if i == 6 {
			if err := c.Start(ctx, 2); err != nil {
				t.Fatal(err)
			}
		}
		commit := i%3 != 2
		franzTxn(ctx, t, cl, &log, fmt.Sprintf("%s-franz-t%d", mode, i), commit)
	}
	saramaTxn(t, c, topic, &log, mode+"-sarama-t0", true)
	saramaTxn(t, c, topic, &log, mode+"-sarama-t1", false)

	for p := range int32(2) {
		got := readIsolated(ctx, t, c, topic, p, kgo.ReadCommitted())
		if !slices.Equal(got, log.committed[p]) {
			t.Errorf("%s-%d read_committed: %d records %q, want the %d committed %q", topic, p, len(got), got, len(log.committed[p]), log.committed[p])
		}
		got = readIsolated(ctx, t, c, topic, p, kgo.ReadUncommitted())
		if !slices.Equal(got, log.all[p]) {
			t.Errorf("%s-%d read_uncommitted: %d records, want all %d sent", topic, p, len(got), len(log.all[p]))
		}
	}
	fenceFranz(ctx, t, c, cl, topic, mode)
}

// franzTxn sends three records to each of the topic's two partitions in
// one transaction and commits or aborts it.
func franzTxn(ctx context.Context, t *testing.T, cl *kgo.Client, log *txnLog, prefix string, commit bool) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("%s: begin: %v", prefix, err)
	}
	var recs []*kgo.Record
	for p := range int32(2) {
		for r := range 3 {
			recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-p%d-r%d", prefix, p, r)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("%s: produce: %v", prefix, err)
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatalf("%s: end (commit %v): %v", prefix, commit, err)
	}
	log.add(recs, commit)
}

func (l *txnLog) add(recs []*kgo.Record, commit bool) {
	for _, r := range recs {
		l.all[r.Partition] = append(l.all[r.Partition], string(r.Value))
		if commit {
			l.committed[r.Partition] = append(l.committed[r.Partition], string(r.Value))
		}
	}
}

// saramaTxn is franzTxn with sarama's transactional producer.
func saramaTxn(t *testing.T, c *chaos.Cluster, topic string, log *txnLog, prefix string, commit bool) {
	t.Helper()
	cfg := saramaConfig(sarama.V3_0_0_0)
	cfg.Producer.Transaction.ID = prefix
	cfg.Producer.Transaction.Retry.Max = 20
	cfg.Producer.Transaction.Retry.Backoff = 200 * time.Millisecond
	p, err := sarama.NewSyncProducer(seeds(c), cfg)
	if err != nil {
		t.Fatalf("%s: sarama producer: %v", prefix, err)
	}
	defer p.Close()
	if err := p.BeginTxn(); err != nil {
		t.Fatalf("%s: sarama begin: %v", prefix, err)
	}
	var recs []*kgo.Record
	for part := range int32(2) {
		for r := range 3 {
			v := fmt.Sprintf("%s-p%d-r%d", prefix, part, r)
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: part, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("%s: sarama send: %v", prefix, err)
			}
			recs = append(recs, &kgo.Record{Partition: part, Value: []byte(v)})
		}
	}
	if commit {
		err = p.CommitTxn()
	} else {
		err = p.AbortTxn()
	}
	if err != nil {
		t.Fatalf("%s: sarama end (commit %v): %v", prefix, commit, err)
	}
	log.add(recs, commit)
}

// readIsolated reads topic/p from the start at the isolation level and
// returns the values before an end mark: a plain record it appends first.
// Every transaction has ended by then, so the mark lies past every marker
// and a read_committed reader reaches it only after judging every record
// before it; no wait for records that should not come is needed. Earlier
// end marks are left out of the result.
func readIsolated(ctx context.Context, t *testing.T, c *chaos.Cluster, topic string, p int32, level kgo.IsolationLevel) []string {
	t.Helper()
	mark := fmt.Sprintf("%s%d-%d", endMarkPrefix, p, time.Now().UnixNano())
	pr := e2eClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pr.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(mark)}).FirstErr(); err != nil {
		t.Fatalf("%s-%d: append the end mark: %v", topic, p, err)
	}
	cl := e2eClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond))
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got []string
	for {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("%s-%d: the end mark not read in 30s; read %d records", topic, p, len(got))
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			switch {
			case done:
			case v == mark:
				done = true
			case !strings.HasPrefix(v, endMarkPrefix):
				got = append(got, v)
			}
		})
		if done {
			return got
		}
	}
}

// endMarkPrefix begins the values readIsolated appends.
const endMarkPrefix = "end-mark-"

// fenceFranz starts a second producer with the first one's transactional
// id: its InitProducerId bumps the epoch, and the first one's next
// transaction fails as fenced.
func fenceFranz(ctx context.Context, t *testing.T, c *chaos.Cluster, old *kgo.Client, topic, mode string) {
	t.Helper()
	cl := e2eClient(t, c, kgo.TransactionalID("e2e-"+mode), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("the second producer's begin: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(mode + "-fencer")}).FirstErr(); err != nil {
		t.Fatalf("the second producer's send: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the second producer's commit: %v", err)
	}
	if err := old.BeginTransaction(); err != nil {
		t.Fatalf("the fenced producer's begin: %v", err)
	}
	err := old.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(mode + "-zombie")}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
}
