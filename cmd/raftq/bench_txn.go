package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// checkTxnFlags checks the flags of a transactional run (--txn-records):
// transactions need acks=all and an idempotent producer, and the run is
// by --duration or by a --records that is a whole number of transactions.
// Rate limits, keys and intervals are for record runs only.
func checkTxnFlags(b *benchFlags, pf *producerFlags, changed func(string) bool) error {
	if b.txnRecords < 0 || b.txnPartitions < 1 || b.txnBackoff <= 0 {
		return usageError{errors.New("--txn-records must be non-negative, --txn-partitions and --txn-backoff positive")}
	}
	if b.txnRecords == 0 {
		for _, f := range []string{"txn-partitions", "txn-backoff"} {
			if changed(f) {
				return usageError{fmt.Errorf("--%s needs --txn-records", f)}
			}
		}
		return nil
	}
	if pf.acks != "all" && pf.acks != "-1" || !pf.idempotent {
		return usageError{errors.New("--txn-records needs --acks all and --idempotent (transactions are idempotent)")}
	}
	if b.records%int64(b.txnRecords) != 0 {
		return usageError{fmt.Errorf("--records %d is not a whole number of transactions of --txn-records %d", b.records, b.txnRecords)}
	}
	for _, f := range []string{"rate", "keys", "tombstone-ratio", "interval", "partition"} {
		if changed(f) {
			return usageError{fmt.Errorf("--%s is not for a transactional run (--txn-records)", f)}
		}
	}
	return nil
}

// checkTxnPartitions checks that the topic has the partitions
// --txn-partitions spreads each transaction over, where the setup found
// its partition count.
func checkTxnPartitions(b *benchFlags, setup map[string]string) error {
	n, err := strconv.Atoi(setup["topic.partitions"])
	if err != nil || b.txnRecords == 0 || int(b.txnPartitions) <= n {
		return nil
	}
	return usageError{fmt.Errorf("--txn-partitions %d: topic %s has %d partitions", b.txnPartitions, b.topic, n)}
}

// benchTxn runs --producers transactional clients (kgo.TransactionalID,
// one id each, fresh for the run), each committing transactions one after
// the other: begin, --txn-records records of --record-size bytes, record i
// to partition i mod --txn-partitions, flush, commit. A transaction's
// commit latency runs from its begin to its commit acknowledged; its
// records' latencies from each Produce to its acknowledgement, and they
// count only once the transaction commits. A transaction begun in the
// warm-up counts as warm-up; one begun before the run's end finishes
// within --drain-timeout after it. A transaction's first produce usually
// waits out --txn-backoff: the coordinator answers its AddPartitionsToTxn
// CONCURRENT_TRANSACTIONS while the previous one's markers are still being
// written, as Kafka's does.
func benchTxn(ctx context.Context, e *env, cf *clientFlags, opts []kgo.Opt, b *benchFlags) (benchResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if b.records == 0 {
		runCtx, cancel = context.WithTimeout(ctx, b.warmup+b.duration)
		defer cancel()
	}
	// endCtx bounds the transactions' produces and commits: drain after the run.
	endCtx, endCancel := context.WithCancel(context.Background())
	defer endCancel()
	stop := context.AfterFunc(runCtx, func() { time.AfterFunc(b.drain, endCancel) })
	defer stop()

	st := &txnStats{recs: &latencies{start: time.Now().Add(b.warmup)}}
	st.commits = &latencies{start: st.recs.start}
	trips := &roundTrips{start: st.recs.start}
	prefix := fmt.Sprintf("raftq-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	var claimed atomic.Int64
	var wg sync.WaitGroup
	for i := range b.producers {
		cl, err := cf.client(append(opts, kgo.DefaultProduceTopic(b.topic), kgo.TransactionalID(fmt.Sprintf("%s-%d", prefix, i)), kgo.ConcurrentTransactionsBackoff(b.txnBackoff),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(max(1<<16, b.txnRecords)), kgo.WithHooks(trips))...)
		if err != nil {
			cancel()
			wg.Wait()
			return benchResult{}, err
		}
		wg.Go(func() {
			defer cl.Close()
			txnBench(runCtx, endCtx, cl, b, &claimed, st)
		})
	}
	wg.Wait()
	elapsed := max(time.Since(st.recs.start), time.Millisecond)
	res := st.recs.result(elapsed, b)
	c := st.commits.result(elapsed, b)
	res.TxnRecords, res.TxnPartitions = b.txnRecords, b.txnPartitions
	res.Transactions, res.TxnsPerS = c.Records, c.RecordsPerS
	res.CommitP50ms, res.CommitP99ms, res.CommitMaxMs = c.P50ms, c.P99ms, c.MaxMs
	res.FailedTxns, res.UnansweredTxns = st.failed.Load(), st.unanswered.Load()
	res.Failed, res.Unanswered = res.FailedTxns*int64(b.txnRecords), res.UnansweredTxns*int64(b.txnRecords)
	trips.fill(&res)
	if err := st.firstErr(); err != nil {
		fmt.Fprintf(e.stderr, "raftq bench: %d transactions failed, the first with: %v\n", res.FailedTxns+res.UnansweredTxns, err)
	}
	return res, nil
}

// txnStats gathers a transactional run's figures.
type txnStats struct {
	recs, commits      *latencies
	failed, unanswered atomic.Int64 // transactions after the warm-up
	mu                 sync.Mutex
	err                error
}

func (s *txnStats) fail(began time.Time, err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	switch {
	case began.Before(s.recs.start):
	case unanswered(err) || errors.Is(err, context.DeadlineExceeded):
		s.unanswered.Add(1)
	default:
		s.failed.Add(1)
	}
}

func (s *txnStats) firstErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// txnBench is one transactional producer's loop; it claims transactions
// from claimed when the run is by --records.
func txnBench(runCtx, endCtx context.Context, cl *kgo.Client, b *benchFlags, claimed *atomic.Int64, st *txnStats) {
	values := newValuePool(b.size)
	want := b.records / int64(b.txnRecords)
	lat := make([]time.Duration, b.txnRecords)
	for runCtx.Err() == nil {
		if want > 0 && claimed.Add(1) > want {
			return
		}
		began := time.Now()
		if err := cl.BeginTransaction(); err != nil {
			st.fail(began, err)
			return
		}
		var answered sync.WaitGroup
		var produceErr atomic.Pointer[error]
		for i := range b.txnRecords {
			rec := &kgo.Record{Value: values.next(), Partition: int32(i) % b.txnPartitions}
			sent := time.Now()
			answered.Add(1)
			cl.Produce(endCtx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					produceErr.CompareAndSwap(nil, &err)
				}
				lat[i] = time.Since(sent)
				answered.Done()
			})
		}
		err := cl.Flush(endCtx)
		answered.Wait()
		if p := produceErr.Load(); err == nil && p != nil {
			err = *p
		}
		how := kgo.TryCommit
		if err != nil {
			how = kgo.TryAbort
		}
		if endErr := cl.EndTransaction(endCtx, how); err == nil {
			err = endErr
		}
		if err != nil {
			st.fail(began, err)
			if endCtx.Err() != nil {
				return
			}
			continue
		}
		st.commits.add(began, time.Since(began))
		for _, d := range lat {
			st.recs.add(began, d)
		}
	}
}

// printTxnBench prints the lines of a transactional run that stand for
// the first two of a record run.
func printTxnBench(e *env, r benchResult) {
	fmt.Fprintf(e.stdout, "%d transactions of %d records of %d B over %d partitions in %.1fs (compression=%s): %.1f transactions/s, %.0f records/s, %.1f MB/s, %d failed\n",
		r.Transactions, r.TxnRecords, r.RecordSize, r.TxnPartitions, r.Seconds, r.Compression, r.TxnsPerS, r.RecordsPerS, r.MBPerS, r.FailedTxns)
	fmt.Fprintf(e.stdout, "commit latency (begin to commit acknowledged) p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", r.CommitP50ms, r.CommitP99ms, r.CommitMaxMs)
	fmt.Fprintf(e.stdout, "record latency (in committed transactions) p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms\n", r.P50ms, r.P99ms, r.P999ms, r.MaxMs)
	if r.UnansweredTxns > 0 {
		fmt.Fprintf(e.stdout, "%d transactions still unanswered when the drain timed out (not counted above)\n", r.UnansweredTxns)
	}
}
