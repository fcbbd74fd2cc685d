package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producer is one send process and its client. When a send ends in info
// the process is over: its client is closed and a new process with a new
// client takes over the worker, as Jepsen does after a crash.
type producer struct {
	w    *Workload
	rng  *rand.Rand
	proc int
	cl   *kgo.Client
	n    int // sends by this process
}

func (w *Workload) produce(ctx context.Context, stopAt time.Time, worker int) {
	p := &producer{w: w, rng: w.rng(worker), proc: worker}
	defer p.close()
	for w.wait(ctx, stopAt) {
		if p.cl == nil {
			if err := p.open(); err != nil {
				w.log.Warn("producer client", "err", err)
				continue
			}
		}
		if p.send(ctx) == Info {
			p.close()
			p.proc = w.newProcess()
			p.n = 0
		}
	}
}

func (p *producer) open() error {
	c := p.w.cfg
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(c.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(c.OpTimeout),
		kgo.ProduceRequestTimeout(c.OpTimeout),
		kgo.RequestTimeoutOverhead(c.OpTimeout),
		kgo.RetryTimeout(c.OpTimeout),
		kgo.RetryBackoffFn(retryBackoff),
	}
	switch c.Acks {
	case AcksAll:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case AcksLeader:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case AcksNone:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !c.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := p.w.client(opts...)
	p.cl = cl
	return err
}

func (p *producer) close() {
	if p.cl != nil {
		p.cl.Close()
		p.cl = nil
	}
}

// send produces one unique value to a random partition and records it.
func (p *producer) send(ctx context.Context) Type {
	part := p.rng.Int32N(p.w.cfg.Partitions)
	sv := &SendValue{
		Topic: p.w.cfg.Topic, Partition: part, Key: fmt.Sprintf("k%d", part),
		Value: fmt.Sprintf("p%d-%06d", p.proc, p.n), Offset: NoOffset,
	}
	p.n++
	inv := p.w.rec.Invoke(Op{Process: p.proc, F: FSend, Send: sv})
	r := &kgo.Record{Topic: sv.Topic, Partition: part, Key: []byte(sv.Key), Value: []byte(sv.Value)}
	off, err := p.produceOne(ctx, r)
	c := inv.Completion(OK)
	switch {
	case err != nil:
		c.Type, c.Error = classifySend(err), err.Error()
	case p.w.cfg.Acks == AcksNone:
		c.Type, c.Error = Info, "acks=none: the broker does not answer"
	default:
		c.Send.Offset = off
	}
	p.w.rec.Complete(c)
	return c.Type
}

// errSendTimeout is the error of a send that outlived OpTimeout plus grace.
var errSendTimeout = errors.New("jepsen: send timed out")

// produceOne waits for kgo, but no longer than the op timeout and a grace
// period: a broker that never answers must not stall the worker. On that
// timeout the client is closed, which fails the record inside kgo.
func (p *producer) produceOne(ctx context.Context, r *kgo.Record) (int64, error) {
	octx, cancel := context.WithTimeout(ctx, p.w.cfg.OpTimeout)
	defer cancel()
	done := make(chan error, 1)
	cl := p.cl
	go func() { done <- cl.ProduceSync(octx, r).FirstErr() }()
	grace := time.NewTimer(p.w.cfg.OpTimeout + time.Second)
	defer grace.Stop()
	select {
	case err := <-done:
		return r.Offset, err
	case <-grace.C:
		p.close()
		<-done
		return NoOffset, errSendTimeout
	}
}

// definiteProduceErrors are broker answers that reject a record before it
// is appended, for reasons that no earlier attempt of the same record
// could have got past. Only these make a send fail; every other error
// leaves its outcome unknown.
var definiteProduceErrors = []*kerr.Error{
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidTopicException,
	kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
	kerr.InvalidRequiredAcks, kerr.InvalidRecord, kerr.UnsupportedForMessageFormat,
	kerr.UnsupportedVersion,
}

// classifySend says whether a send error is definite (Fail) or not (Info).
func classifySend(err error) Type {
	for _, e := range definiteProduceErrors {
		if errors.Is(err, e) {
			return Fail
		}
	}
	return Info
}

// retryBackoff is the Java client's default between retries
// (retry.backoff.ms 100 ms doubling to retry.backoff.max.ms 1 s, KIP-580)
// rather than franz-go's (250 ms doubling to 2.5 s): the failover a run
// measures is then the cluster's plus at most a second, not plus 2.5 s.
func retryBackoff(tries int) time.Duration {
	return min(100*time.Millisecond<<min(max(tries-1, 0), 4), time.Second)
}
