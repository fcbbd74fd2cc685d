package broker

import (
	"context"
	"encoding/binary"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// serveFetch reads every requested partition from its local replica, up
// to that replica's high watermark (its applied end: followers serve
// reads too), or for read_committed up to its last stable offset with the
// aborted transactions of the range, and long-polls until MinBytes are
// there or MaxWait passes.
// Fetch sessions are declined (session id 0), so clients send full
// requests; Kafka allows a broker to do that.
func (n *Node) serveFetch(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.FetchRequest)
	f := kafka.NewFuture()
	go func() {
		f.Complete(n.fetch(c.Context(), r), nil)
	}()
	return f
}

func (n *Node) fetch(ctx context.Context, r *kmsg.FetchRequest) *kmsg.FetchResponse {
	deadline := time.Now().Add(time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond)
	for {
		resp, size, watches := n.fetchOnce(r)
		if size >= int(r.MinBytes) || len(watches) == 0 || !time.Now().Before(deadline) {
			n.metrics.countFetch(resp)
			return resp
		}
		if !waitAny(ctx, watches, deadline) {
			resp, _, _ = n.fetchOnce(r)
			n.metrics.countFetch(resp)
			return resp
		}
	}
}

// waitAny blocks until one of watches fires (true) or the deadline or ctx
// passes (false).
func waitAny(ctx context.Context, watches []<-chan struct{}, deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	cases := make([]reflect.SelectCase, 0, len(watches)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
	for _, w := range watches {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 2
}

// fetchOnce builds one response from the logs as they are now. It returns
// the bytes of records in it and, for partitions that had no error, the
// channels that fire when their high watermark (read_committed: their
// LSO) moves.
func (n *Node) fetchOnce(r *kmsg.FetchRequest) (*kmsg.FetchResponse, int, []<-chan struct{}) {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	budget := int(r.MaxBytes)
	if r.Version < 3 || budget <= 0 {
		budget = 1 << 30
	}
	total := 0
	var watches []<-chan struct{}
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := topicName(n, rt.Topic, rt.TopicID)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp, w := n.fetchPartition(r, name, rp, budget-total, total == 0)
			total += len(sp.RecordBatches)
			if w != nil {
				watches = append(watches, w)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, watches
}

func (n *Node) fetchPartition(r *kmsg.FetchRequest, topic string, rp *kmsg.FetchRequestTopicPartition, budget int, first bool) (kmsg.FetchResponseTopicPartition, <-chan struct{}) {
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition = rp.Partition
	sp.RecordBatches = []byte{} // empty, not null: librdkafka refuses a null record set
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
	rep, internal := n.dataFor(topic, rp.Partition)
	if internal {
		return emptyFetch(sp, rp.FetchOffset), nil
	}
	if rep == nil {
		sp.ErrorCode = n.noReplicaCode(topic, rp.Partition, r.Version)
		return sp, nil
	}
	repl := rep.data.repl
	st := repl.Leadership()
	if code := epochCheck(rp.CurrentLeaderEpoch, st.Epoch); code != 0 {
		sp.ErrorCode = code
		return sp, nil
	}
	if r.Version < 10 && rep.data.codec.Load() == int32(partition.CodecZstd) {
		// As Kafka: a client that fetches below v10 cannot read zstd.
		sp.ErrorCode = kerr.UnsupportedCompressionType.Code
		return sp, nil
	}
	// Caught up is checked before the high watermark is read: see
	// replication.CaughtUp.
	caughtUp := st.IsLeader && repl.CaughtUp(st.Epoch)
	l := repl.Log()
	// The LSO is read first: it never passes the high watermark, so the
	// pair stays ordered however the two move between the reads. Only
	// read_committed watches it (a watch makes a channel for the next
	// change to close).
	lso, lsoChanged := l.LastStableOffset(), (<-chan struct{})(nil)
	if readCommitted(r) {
		lso, lsoChanged = l.WatchLastStableOffset()
	}
	hw, changed := l.WatchHighWatermark()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, l.StartOffset()
	if code := offsetCheck(caughtUp, rp.FetchOffset, l.StartOffset(), hw); code != 0 {
		sp.ErrorCode = code
		return sp, nil
	}
	upTo := hw
	if readCommitted(r) {
		// read_committed reads up to the LSO and waits for it to move;
		// offsets between it and the high watermark are valid, but
		// not yet readable, as in Kafka.
		upTo, changed = lso, lsoChanged
	}
	if rp.FetchOffset >= upTo {
		return sp, changed
	}
	limit := min(int(rp.PartitionMaxBytes), budget)
	if !first && limit <= 0 {
		return sp, nil
	}
	b, err := l.Read(rp.FetchOffset, max(limit, 1), upTo)
	if err != nil {
		sp.ErrorCode = partition.ErrorCode(err)
		return sp, nil
	}
	sp.RecordBatches = b
	if readCommitted(r) {
		sp.AbortedTransactions = abortedIn(l, rp.FetchOffset, b)
	}
	return sp, nil
}

// readCommitted reports a read_committed fetch (isolation_level 1, v4+).
func readCommitted(r *kmsg.FetchRequest) bool {
	return r.Version >= 4 && r.IsolationLevel == partition.ReadCommitted
}

// abortedIn lists the aborted transactions a read_committed consumer
// needs to drop the aborted records among batches b read from offset:
// those overlapping [from, end of the last batch in b).
func abortedIn(l *partition.Log, from int64, b []byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	to := batchesEnd(b)
	if to <= from {
		return nil
	}
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, a := range l.AbortedTransactions(from, to) {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}

// batchesEnd returns the offset after the last whole batch of b, -1 if
// b holds none.
func batchesEnd(b []byte) int64 {
	end := int64(-1)
	for len(b) >= 12 {
		size := 12 + int64(int32(binary.BigEndian.Uint32(b[8:12]))) // offset, length, then the batch
		if size <= 12 || size > int64(len(b)) {
			break
		}
		info, err := partition.ParseBatchHeader(b[:size])
		if err != nil {
			break
		}
		end = info.BaseOffset + int64(info.LastOffsetDelta) + 1
		b = b[size:]
	}
	return end
}

// emptyFetch answers a fetch of a __consumer_offsets partition as one of
// an empty log (see Node.dataFor).
func emptyFetch(sp kmsg.FetchResponseTopicPartition, offset int64) kmsg.FetchResponseTopicPartition {
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = 0, 0, 0
	if offset != 0 {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
	}
	return sp
}

// epochCheck compares a client's leader epoch with the replica's.
func epochCheck(clientEpoch, epoch int32) int16 {
	switch {
	case clientEpoch < 0:
		return 0
	case clientEpoch < epoch:
		return kerr.FencedLeaderEpoch.Code
	case clientEpoch > epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// offsetCheck answers offsets outside [log start, high watermark]. Above
// the high watermark it is OUT_OF_RANGE only from a leader that is caught
// up (replication.CaughtUp), whose high watermark is therefore at least
// any a former leader showed; elsewhere it is OFFSET_NOT_AVAILABLE, which
// clients retry.
func offsetCheck(caughtUp bool, offset, start, hw int64) int16 {
	switch {
	case offset < start:
		return kerr.OffsetOutOfRange.Code
	case offset <= hw:
		return 0
	case caughtUp:
		return kerr.OffsetOutOfRange.Code
	}
	return kerr.OffsetNotAvailable.Code
}

// noReplicaCode is the error for a partition this node does not host.
func (n *Node) noReplicaCode(topic string, index int32, version int16) int16 {
	if _, ok := n.partitionRef(topic, index); ok {
		return kerr.NotLeaderForPartition.Code
	}
	if topic == "" && version >= 13 {
		return kerr.UnknownTopicID.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}
