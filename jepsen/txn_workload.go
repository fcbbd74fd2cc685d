package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxTxnSends bounds WorkloadConfig.TxnSends.
const maxTxnSends = 1000

// transactor is one txn process: a transactional kgo client, and the
// read_committed consumer its transactions poll first (a consumer whose
// assigns are recorded under the same process). When a txn ends in info
// the process is over: both clients are closed and a new process with new
// clients, but the same transactional id, takes over the worker; its
// InitProducerId fences the old producer and aborts whatever transaction
// it left open.
type transactor struct {
	w    *Workload
	rng  *rand.Rand
	id   string
	proc int
	cl   *kgo.Client
	n    int // sends by this process
	cons *consumer
}

func (w *Workload) transact(ctx context.Context, stopAt time.Time, worker int) {
	rng := w.rng(worker)
	t := &transactor{
		w: w, rng: rng, id: fmt.Sprintf("jepsen-txn-%d", worker), proc: worker,
		cons: &consumer{w: w, rng: rng, proc: worker, next: map[int32]int64{}},
	}
	defer t.close()
	for w.wait(ctx, stopAt) {
		poll := w.cfg.TxnPollP > 0 && rng.Float64() < w.cfg.TxnPollP
		if poll && (t.cons.cl == nil || rng.IntN(w.cfg.ReassignEvery) == 0) {
			t.cons.proc = t.proc
			t.cons.assign() // this op's token; the next one may poll
			continue
		}
		if t.cl == nil {
			if err := t.open(); err != nil {
				w.log.Warn("txn client", "err", err)
				continue
			}
		}
		if t.txn(ctx, poll) == Info {
			t.close()
			t.proc = w.newProcess()
			t.n = 0
		}
	}
}

// open makes the transactional client: the producer's settings plus the
// transactional id. The transaction timeout leaves room for the sends and
// the end, each bounded by OpTimeout; a transaction its process abandoned
// is aborted by the coordinator after it, or when the next process fences.
func (t *transactor) open() error {
	c := t.w.cfg
	cl, err := t.w.client(
		kgo.DefaultProduceTopic(c.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(c.OpTimeout),
		kgo.ProduceRequestTimeout(c.OpTimeout),
		kgo.RequestTimeoutOverhead(c.OpTimeout),
		kgo.RetryTimeout(c.OpTimeout),
		kgo.RetryBackoffFn(retryBackoff),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.TransactionalID(t.id),
		kgo.TransactionTimeout(txnTimeout(c.OpTimeout)),
	)
	t.cl = cl
	return err
}

// txnTimeout is the transaction timeout for an op timeout.
func txnTimeout(op time.Duration) time.Duration { return 2*op + time.Second }

// close ends the process's clients. The consumer's positions stay: the
// next process's assigns may continue from them.
func (t *transactor) close() {
	if t.cl != nil {
		t.cl.Close()
		t.cl = nil
	}
	if t.cons.cl != nil {
		t.cons.cl.Close()
		t.cons.cl = nil
	}
}

// txnPollWait bounds a txn's poll, shorter than a poll op's OpTimeout: a
// poll with nothing new to read waits the whole bound, and it holds up
// the txn op (though not yet the transaction, which no broker has seen).
func (c WorkloadConfig) txnPollWait() time.Duration {
	return min(c.OpTimeout, max(4*c.FetchMaxWait, 500*time.Millisecond))
}

// txn runs one transaction and records it: invoke, BeginTransaction, an
// optional poll, the sends, then EndTransaction. The outcome:
//
//   - ok: every send was acknowledged and the commit was acknowledged.
//   - fail: the transaction definitely did not commit: no commit was
//     ever requested (a deliberate abort, or an abort after a send
//     failed) and the abort was acknowledged, or a commit kgo refused
//     before sending it (kerr.OperationNotAttempted) followed by an
//     acknowledged abort, or BeginTransaction failed.
//   - info: anything else: a commit that returned an error (it may have
//     landed), an abort that returned an error, sends that outlived
//     their grace period (the client is closed, nothing can be ended).
//
// Info ends the process.
func (t *transactor) txn(ctx context.Context, poll bool) Type {
	c := t.w.cfg
	tv := &TxnValue{ID: t.id, Abort: c.TxnAbortP > 0 && t.rng.Float64() < c.TxnAbortP}
	for range 1 + t.rng.IntN(c.TxnSends) {
		part := t.rng.Int32N(c.Partitions)
		tv.Sends = append(tv.Sends, SendValue{
			Topic: c.Topic, Partition: part, Key: fmt.Sprintf("k%d", part),
			Value: fmt.Sprintf("p%d-%06d", t.proc, t.n), Offset: NoOffset,
		})
		t.n++
	}
	inv := t.w.rec.Invoke(Op{Process: t.proc, F: FTxn, Txn: tv})
	comp := inv.Completion(OK)
	var notes []string
	defer func() {
		comp.Error = strings.Join(notes, "; ")
		t.w.rec.Complete(comp)
	}()
	if err := t.cl.BeginTransaction(); err != nil {
		// Nothing was sent. The client's state is suspect: the next op
		// gets a new one.
		comp.Type = Fail
		notes = append(notes, "begin: "+err.Error())
		t.cl.Close()
		t.cl = nil
		return comp.Type
	}
	if poll && t.cons.cl != nil {
		_, reads, pnotes := t.cons.fetch(ctx, c.txnPollWait())
		comp.Reads = reads
		for _, n := range pnotes {
			notes = append(notes, "poll: "+n)
		}
	}
	errs, timedOut := t.produce(ctx, comp.Txn.Sends)
	if timedOut {
		// The client is closed: nothing can end the transaction, which
		// the coordinator aborts after its timeout or when the next
		// process fences it. No commit was asked for, but nobody
		// acknowledged an abort either.
		comp.Type = Info
		notes = append(notes, errSendTimeout.Error())
		return comp.Type
	}
	var sendErr error
	for i, err := range errs {
		if err != nil {
			sendErr = errors.Join(sendErr, fmt.Errorf("send %s: %w", comp.Txn.Sends[i].Value, err))
		}
	}
	ectx, cancel := context.WithTimeout(ctx, c.OpTimeout)
	defer cancel()
	if sendErr != nil || comp.Txn.Abort {
		if sendErr != nil {
			notes = append(notes, sendErr.Error())
		}
		// No commit was asked for: an acknowledged abort is definite.
		comp.Type = t.abort(ectx, comp, &notes)
		return comp.Type
	}
	comp.Txn.EndStart = t.w.rec.Now()
	err := t.cl.EndTransaction(ectx, kgo.TryCommit)
	if err == nil {
		return comp.Type // ok
	}
	notes = append(notes, "commit: "+err.Error())
	notAttempted := errors.Is(err, kerr.OperationNotAttempted)
	comp.Type = t.abort(ectx, comp, &notes)
	if !notAttempted {
		// The commit may have reached the coordinator; the abort after
		// it says nothing about whether it landed.
		comp.Type = Info
	}
	return comp.Type
}

// abort aborts the open transaction: Fail when the abort was acknowledged,
// else Info. It sets EndStart if no end was called before.
func (t *transactor) abort(ctx context.Context, comp Op, notes *[]string) Type {
	if err := t.cl.AbortBufferedRecords(ctx); err != nil {
		*notes = append(*notes, "abort buffered records: "+err.Error())
		return Info
	}
	if comp.Txn.EndStart == 0 {
		comp.Txn.EndStart = t.w.rec.Now()
	}
	if err := t.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		*notes = append(*notes, "abort: "+err.Error())
		return Info
	}
	return Fail
}

// produce sends the txn's records at once (kgo keeps each partition's in
// order), fills in the acknowledged offsets and returns each send's
// error. It waits no longer than OpTimeout and a grace period: on that
// timeout the client is closed, which fails the records inside kgo, and
// timedOut is true.
func (t *transactor) produce(ctx context.Context, sends []SendValue) (errs []error, timedOut bool) {
	octx, cancel := context.WithTimeout(ctx, t.w.cfg.OpTimeout)
	defer cancel()
	errs = make([]error, len(sends))
	var wg sync.WaitGroup
	for i := range sends {
		s := &sends[i]
		r := &kgo.Record{Topic: s.Topic, Partition: s.Partition, Key: []byte(s.Key), Value: []byte(s.Value)}
		wg.Add(1)
		t.cl.Produce(octx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			errs[i] = err
			if err == nil {
				s.Offset = r.Offset
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(t.w.cfg.OpTimeout + time.Second)
	defer grace.Stop()
	select {
	case <-done:
		return errs, false
	case <-grace.C:
		t.close()
		<-done // sends acknowledged before the close keep their offsets
		return errs, true
	}
}
