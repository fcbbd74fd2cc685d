package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// serveProduce validates each partition's batch, appends it to the
// partition's replication in arrival order, and answers when every
// partition is done: acks=all once committed, acks=1 once the leader's own
// log holds it (and its offset is known), acks=0 never.
func (n *Node) serveProduce(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	return n.produce(c.Context(), req.Body.(*kmsg.ProduceRequest), c.Listener())
}

// produce serves one Produce request; ctx is the connection's, and
// listener the name of the listener it came in on.
func (n *Node) produce(ctx context.Context, r *kmsg.ProduceRequest, listener string) kafka.Pending {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	var waits []func(context.Context)
	refuse := r.TransactionID == nil && hasTransactional(r)
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			if refuse {
				// As Kafka: transactional records without a
				// transactional id fail the whole request.
				sp.BaseOffset, sp.LogStartOffset = -1, -1
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for i := range r.Topics {
		if refuse {
			break
		}
		for j := range r.Topics[i].Partitions {
			sp := &resp.Topics[i].Partitions[j]
			if w := n.startProduce(ctx, r, &r.Topics[i], &r.Topics[i].Partitions[j], sp); w != nil {
				waits = append(waits, w)
			}
		}
	}
	if r.Acks == 0 || len(waits) == 0 {
		n.addLeaderEndpoints(resp, listener)
		n.metrics.countProduce(r, resp)
		if r.Acks == 0 {
			return kafka.NoResponse()
		}
		return kafka.Ready(resp)
	}
	f := kafka.NewFuture()
	timeout := time.Duration(max(r.TimeoutMillis, 1)) * time.Millisecond
	go func() {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for _, w := range waits {
			w(ctx)
		}
		n.addLeaderEndpoints(resp, listener)
		// Counted once the waits have filled in every outcome: an error
		// found at apply (a sequence gap) or a timeout is not a success.
		n.metrics.countProduce(r, resp)
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
	if name == groups.OffsetsTopic || name == txns.TransactionTopic {
		// As Kafka: clients may not write internal topics.
		return fail(kerr.InvalidTopicException, "cannot append to internal topic "+name)
	}
	rep, _ := n.dataFor(name, rp.Partition) // the internal topics are refused above
	if rep == nil {
		if _, ok := n.partitionRef(name, rp.Partition); !ok {
			return fail(kerr.UnknownTopicOrPartition, "")
		}
		n.fillLeader(sp, name, rp.Partition)
		return fail(kerr.NotLeaderForPartition, "this node hosts no replica of the partition")
	}
	batch, info, err := validateProduced(rep.data, rp.Records)
	if err != nil {
		return fail(codeErr(partition.ErrorCode(err)), err.Error())
	}
	var guard uint64
	if info.Transactional() {
		var code int16
		txnID := "" // never nil here: produce refused such a request
		if r.TransactionID != nil {
			txnID = *r.TransactionID
		}
		if guard, code = n.verifyTxn(ctx, rep.data, txnID, name, rp.Partition, info); code != 0 {
			sp.BaseOffset, sp.LogStartOffset, sp.ErrorCode = -1, -1, code
			return nil
		}
	}
	return n.appendBatch(ctx, rep.data, r.Acks, batch, info, guard, sp)
}

// hasTransactional reports whether any batch of r is transactional.
func hasTransactional(r *kmsg.ProduceRequest) bool {
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			if info, err := partition.ParseBatchHeader(r.Topics[i].Partitions[j].Records); err == nil && info.Transactional() {
				return true
			}
		}
	}
	return false
}

// validateProduced checks a produced batch against the topic's limits,
// and its records, compressed or not, as Kafka's broker does; it returns
// the batch as it is to be proposed: in the codec the topic's
// compression.type names, if it names one (partition.Recompress).
func validateProduced(rep *dataPartition, batch []byte) ([]byte, partition.BatchInfo, error) {
	limit := int(rep.maxBatchBytes.Load())
	info, err := partition.ValidateBatch(batch, limit)
	if err != nil {
		return nil, info, err
	}
	if info.Control() {
		// As Kafka: markers come only from the coordinator
		// (WriteTxnMarkers, txn_markers.go).
		return nil, info, &partition.BatchError{Kind: partition.ErrInvalidRecord, Reason: "clients are not allowed to write control records"}
	}
	if rep.compacted.Load() {
		if err := partition.CheckKeys(batch); err != nil {
			return nil, info, err
		}
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

// appendBatch appends one validated batch, holding the partition's
// produce lock so that appends keep arrival order (and raft's acks=1
// projection stays exact).
// guard is the verification a transactional batch passed (verifyTxn), 0
// for none: a marker that came since voids it and the batch is refused.
func (n *Node) appendBatch(ctx context.Context, rep *dataPartition, acks int16, batch []byte, info partition.BatchInfo, guard uint64, sp *kmsg.ProduceResponseTopicPartition) func(context.Context) {
	n.awaitLeading(ctx, rep.repl)
	rep.produceMu.Lock()
	st := rep.repl.Leadership()
	if !st.IsLeader {
		rep.produceMu.Unlock()
		if st.Leader == 0 { // an election: answer once its winner is known
			return func(ctx context.Context) { n.answerNotLeader(ctx, rep.repl, sp) }
		}
		fillLeaderFrom(sp, st)
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return nil
	}
	if guard != 0 && !rep.txnGuards.holds(info.ProducerID, guard) {
		rep.produceMu.Unlock()
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = kerr.InvalidTxnState.Code
		return nil
	}
	appendTime := rep.stampTime(batch, &info)
	appended := time.Now()
	pa, err := rep.repl.Append(ctx, batch, info, acks == -1)
	rep.produceMu.Unlock()
	if err != nil {
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = replicationErrCode(err)
		return nil
	}
	n.metrics.produceRecs.Inc()
	early := acks == 1 || (acks == -1 && n.cfg.UnsafeAckBeforeCommit)
	return func(ctx context.Context) {
		until := "applied"
		if early && n.awaitAppended(ctx, rep.repl, pa, appendTime, sp) {
			until = "appended"
		} else if sp.ErrorCode == 0 {
			n.awaitCommitted(ctx, rep.repl, pa, appendTime, sp)
		}
		if sp.ErrorCode == 0 {
			n.metrics.replicate.WithLabelValues(until).Observe(time.Since(appended).Seconds())
		}
	}
}

// awaitAppended answers once the batch is durable in the leader's own
// log, if the replication knows its offset by then; it reports whether it
// answered (an error is an answer). appendTime is the batch's
// LogAppendTime, or -1.
func (n *Node) awaitAppended(ctx context.Context, repl replication, pa pendingAppend, appendTime int64, sp *kmsg.ProduceResponseTopicPartition) bool {
	base, err := pa.Appended(ctx)
	switch {
	case err != nil:
		n.answerFailed(ctx, repl, err, sp)
	case base >= 0:
		sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = base, appendTime, repl.Log().StartOffset()
	default:
		return false
	}
	return true
}

// awaitCommitted answers once the batch is committed, with the offsets
// (and, for a LogAppendTime topic, the append time) it got, or the ones it
// got the first time if it is an idempotent retry.
func (n *Node) awaitCommitted(ctx context.Context, repl replication, pa pendingAppend, appendTime int64, sp *kmsg.ProduceResponseTopicPartition) {
	pr, err := pa.Committed(ctx)
	if err != nil {
		n.answerFailed(ctx, repl, err, sp)
		return
	}
	sp.LogAppendTime = appendTime
	if pr.Duplicate {
		n.log.Debug("produce answered as a retry of a batch already in the log", "partition", sp.Partition, "base", pr.Base, "last", pr.Last)
	}
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

// answerFailed answers a batch whose append failed: one that may still
// commit under a new leader with REQUEST_TIMED_OUT (errLeadershipLost);
// after a leadership change that lost it, once it has settled
// (answerNotLeader); else with the failure's code.
func (n *Node) answerFailed(ctx context.Context, repl replication, err error, sp *kmsg.ProduceResponseTopicPartition) {
	if errors.Is(err, errLeadershipLost) {
		// It may still commit: say that the outcome is unknown, so
		// that the client retries with the same sequence numbers
		// (deduplicated if it did) instead of reusing them. The retry
		// here is answered NOT_LEADER with the new leader.
		sp.BaseOffset, sp.LogStartOffset = -1, -1
		sp.ErrorCode = kerr.RequestTimedOut.Code
		return
	}
	if isLeadershipLoss(err) {
		n.answerNotLeader(ctx, repl, sp)
		return
	}
	sp.BaseOffset, sp.LogStartOffset = -1, -1
	sp.ErrorCode = replicationErrCode(err)
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
