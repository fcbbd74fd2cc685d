package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
	"github.com/raftq/raftq/transport/kafka"
)

// serveProduce validates each partition's batch, proposes it to the
// partition's raft group in arrival order, and answers when every
// partition is done: acks=all once applied (offsets are assigned at apply),
// acks=1 once the leader's own WAL holds it, acks=0 never.
func (n *Node) serveProduce(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	var waits []func(context.Context)
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			sp := &resp.Topics[i].Partitions[j]
			if w := n.startProduce(c.Context(), r, &r.Topics[i], &r.Topics[i].Partitions[j], sp); w != nil {
				waits = append(waits, w)
			}
		}
	}
	if r.Acks == 0 || len(waits) == 0 {
		n.addLeaderEndpoints(resp)
		n.metrics.countProduce(resp)
		if r.Acks == 0 {
			return kafka.NoResponse()
		}
		return kafka.Ready(resp)
	}
	f := kafka.NewFuture()
	timeout := time.Duration(max(r.TimeoutMillis, 1)) * time.Millisecond
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), timeout)
		defer cancel()
		for _, w := range waits {
			w(ctx)
		}
		n.addLeaderEndpoints(resp)
		// Counted once the waits have filled in every outcome: an error
		// found at apply (a sequence gap) or a timeout is not a success.
		n.metrics.countProduce(resp)
		f.Complete(resp, nil)
	}()
	return f
}

// startProduce handles one partition of a produce request. It fills sp at
// once for an error, or returns a wait that fills it.
func (n *Node) startProduce(ctx context.Context, r *kmsg.ProduceRequest, rt *kmsg.ProduceRequestTopic, rp *kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) func(context.Context) {
	fail := func(err error, msg string) func(context.Context) {
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = errCode(err)
		if msg != "" {
			sp.ErrorMessage = &msg
		}
		return nil
	}
	if r.Acks != 0 && r.Acks != 1 && r.Acks != -1 {
		return fail(kerr.InvalidRequiredAcks, "acks must be -1, 0 or 1")
	}
	name := topicName(n, rt.Topic, rt.TopicID)
	if name == groups.OffsetsTopic {
		// As Kafka: clients may not write internal topics.
		return fail(kerr.InvalidTopicException, "cannot append to internal topic "+name)
	}
	rep := n.replicaFor(name, rp.Partition)
	if rep == nil {
		if _, ok := n.partitionRef(name, rp.Partition); !ok {
			return fail(kerr.UnknownTopicOrPartition, "")
		}
		n.fillLeader(sp, name, rp.Partition)
		return fail(kerr.NotLeaderForPartition, "this node hosts no replica of the partition")
	}
	batch, info, err := validateProduced(rep, rp.Records)
	if err != nil {
		return fail(codeErr(partition.ErrorCode(err)), err.Error())
	}
	return n.proposeBatch(ctx, rep, r.Acks, batch, info, sp)
}

// validateProduced checks a produced batch against the topic's limits,
// and its records, compressed or not, as Kafka's broker does; it returns
// the batch as it is to be proposed: in the codec the topic's
// compression.type names, if it names one (partition.Recompress).
func validateProduced(rep *replica, batch []byte) ([]byte, partition.BatchInfo, error) {
	limit := int(rep.maxBatchBytes.Load())
	info, err := partition.ValidateBatch(batch, limit)
	if err != nil {
		return nil, info, err
	}
	if info.Control() || info.Transactional() {
		return nil, info, &partition.BatchError{Kind: partition.ErrInvalidRecord, Reason: "transactional and control batches are not supported"}
	}
	to := rep.codec.Load()
	if to < 0 || info.Compression() == partition.Codec(to) {
		if info.Compression() != partition.CodecNone {
			err = partition.CheckRecords(batch)
		}
		return batch, info, err
	}
	if batch, err = partition.Recompress(batch, partition.Codec(to)); err != nil {
		return nil, info, err
	}
	if len(batch) > limit {
		return nil, info, &partition.BatchError{Kind: partition.ErrBatchTooLarge, Reason: fmt.Sprintf("%d bytes once recompressed, limit %d", len(batch), limit)}
	}
	info, err = partition.ParseBatchHeader(batch) // Recompress wrote a valid header and CRC
	return batch, info, err
}

// proposeBatch proposes one validated batch, holding the replica's produce
// lock so that proposals keep arrival order and the acks=1 projection
// stays exact.
func (n *Node) proposeBatch(ctx context.Context, rep *replica, acks int16, batch []byte, info partition.BatchInfo, sp *kmsg.ProduceResponseTopicPartition) func(context.Context) {
	rep.produceMu.Lock()
	st := rep.group.Status()
	if !st.IsLeader() {
		rep.produceMu.Unlock()
		if st.Leader == 0 { // an election: answer once its winner is known
			return func(ctx context.Context) { n.answerNotLeader(ctx, rep, sp) }
		}
		n.fillLeaderFromStatus(sp, st)
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return nil
	}
	appendTime := rep.stampTime(batch, &info)
	base, projected := rep.project(st, int64(info.NumRecords), info.Idempotent())
	proposed := time.Now()
	p, err := rep.group.Propose(ctx, partition.ProduceParts(batch)...)
	if err != nil {
		rep.invalidate()
		rep.produceMu.Unlock()
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = proposeErrCode(err)
		return nil
	}
	rep.track(p)
	rep.produceMu.Unlock()
	n.metrics.produceRecs.Inc()
	early := acks == 1 || (acks == -1 && n.cfg.UnsafeAckBeforeCommit)
	return func(ctx context.Context) {
		until := "applied"
		if early && projected {
			until = "appended"
			n.awaitAppended(ctx, rep, p, base, appendTime, sp)
		} else {
			n.awaitApplied(ctx, rep, p, appendTime, sp)
		}
		if sp.ErrorCode == 0 {
			n.metrics.replicate.WithLabelValues(until).Observe(time.Since(proposed).Seconds())
		}
	}
}

// awaitAppended answers once the batch is durable in the leader's WAL,
// with the offset the projection gave it. appendTime is the batch's
// LogAppendTime, or -1.
func (n *Node) awaitAppended(ctx context.Context, rep *replica, p *raftgroup.Proposal, base, appendTime int64, sp *kmsg.ProduceResponseTopicPartition) {
	if _, _, err := p.WaitAppended(ctx); err != nil && isLeadershipLoss(err) {
		n.answerNotLeader(ctx, rep, sp)
		return
	} else if err != nil {
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = proposeErrCode(err)
		return
	}
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = base, appendTime, rep.sm.Log().StartOffset()
}

// awaitApplied answers once the batch is applied, with the offsets (and,
// for a LogAppendTime topic, the append time) it got, or the ones it got
// the first time if it is an idempotent retry.
func (n *Node) awaitApplied(ctx context.Context, rep *replica, p *raftgroup.Proposal, appendTime int64, sp *kmsg.ProduceResponseTopicPartition) {
	res, err := p.Wait(ctx)
	if err != nil && isLeadershipLoss(err) {
		n.answerNotLeader(ctx, rep, sp)
		return
	}
	if err != nil {
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = proposeErrCode(err)
		return
	}
	pr, ok := res.Value.(*partition.ProduceResult)
	if !ok {
		sp.ErrorCode = kerr.UnknownServerError.Code
		return
	}
	sp.LogAppendTime = appendTime
	if pr.Duplicate && appendTime >= 0 && pr.MaxTimestamp > 0 { // 0: state from an older build
		sp.LogAppendTime = pr.MaxTimestamp
	}
	if pr.Err != nil {
		sp.BaseOffset, sp.LogStartOffset = -1, pr.LogStart
		sp.ErrorCode = errCode(pr.Err)
		msg := pr.Err.Error()
		sp.ErrorMessage = &msg
		return
	}
	sp.BaseOffset, sp.LogStartOffset = pr.Base, pr.LogStart
}

// proposeErrCode maps a raftgroup proposal failure to a retriable Kafka
// error: the client refreshes metadata and retries on the leader.
func proposeErrCode(err error) int16 {
	switch {
	case errors.Is(err, raftgroup.ErrNotLeader), errors.Is(err, raftgroup.ErrProposalLost):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, raftgroup.ErrOutcomeUnknown):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, raftgroup.ErrProposalDropped):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, raftgroup.ErrStopped):
		return kerr.KafkaStorageError.Code
	}
	return kerr.UnknownServerError.Code
}

// errCode returns the Kafka code of err (a *kerr.Error, or wrapping one).
func errCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return partition.ErrorCode(err)
}

func codeErr(code int16) error { return kerr.ErrorForCode(code) }

// topicName resolves a request's topic by name or, for versions that send
// ids, by id ("" if unknown).
func topicName(n *Node, name string, id [16]byte) string {
	if name != "" {
		return name
	}
	if t, ok := n.meta.View().TopicByID(id); ok {
		return t.Name
	}
	return ""
}
