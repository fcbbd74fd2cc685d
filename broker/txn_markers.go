package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/transport/kafka"
)

// markerTimeout bounds how long a WriteTxnMarkers request waits for its
// markers to commit; the request carries no timeout of its own, and the
// coordinator retries whatever did not answer NONE (Kafka's coordinator
// waits request.timeout.ms, 30 s by default).
const markerTimeout = 30 * time.Second

// serveWriteTxnMarkers appends each marker, a control batch ending a
// producer's transaction, to every listed partition this node leads,
// through the partition's replication as a produce batch with acks=all,
// and answers each partition once its marker is committed (NONE) or
// refused: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH for an epoch older than the producer's,
// NOT_ENOUGH_REPLICAS for an ISR partition below min.insync.replicas.
// A marker delivered again (the coordinator retried it after losing the
// answer, and the first request landed late) is answered NONE and not
// appended: the partition takes each transaction's marker once
// (partition/doc.go, MarkerSeq). A marker is never recompressed,
// whatever the topic's compression.type.
func (n *Node) serveWriteTxnMarkers(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	return n.writeTxnMarkers(c.Context(), req.Body.(*kmsg.WriteTxnMarkersRequest))
}

func (n *Node) writeTxnMarkers(ctx context.Context, r *kmsg.WriteTxnMarkersRequest) kafka.Pending {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	now := time.Now().UnixMilli()
	var waits []func(context.Context)
	for i := range r.Markers {
		m := &r.Markers[i]
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = mt.Topic
			for _, p := range mt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = p
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	for i := range r.Markers {
		m := &r.Markers[i]
		for j, mt := range m.Topics {
			for k, p := range mt.Partitions {
				sp := &resp.Markers[i].Topics[j].Partitions[k]
				if w := n.startMarker(ctx, m, mt.Topic, p, now, sp); w != nil {
					waits = append(waits, w)
				}
			}
		}
	}
	if len(waits) == 0 {
		return kafka.Ready(resp)
	}
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(ctx, markerTimeout)
		defer cancel()
		for _, w := range waits {
			w(ctx)
		}
		f.Complete(resp, nil)
	}()
	return f
}

// startMarker appends one partition's marker. It fills sp at once for an
// error, or returns a wait that fills it.
func (n *Node) startMarker(ctx context.Context, m *kmsg.WriteTxnMarkersRequestMarker, topic string, index int32, nowMs int64, sp *kmsg.WriteTxnMarkersResponseMarkerTopicPartition) func(context.Context) {
	rep, internal := n.dataFor(topic, index)
	switch {
	case internal && topic == groups.OffsetsTopic:
		return n.startGroupsMarker(m, topic, index, sp)
	case internal:
		// Another internal partition (__transaction_state) holds no
		// transactional data for a marker to end.
		if _, code := n.leaderReplica(topic, index, -1); code != 0 {
			sp.ErrorCode = code
		}
		return nil
	case rep == nil:
		sp.ErrorCode = n.noReplicaCode(topic, index, 0)
		return nil
	}
	dp := rep.data
	batch := partition.ControlBatch(m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, nowMs)
	info, err := partition.ParseBatchHeader(batch)
	if err != nil { // ControlBatch builds a valid header
		sp.ErrorCode = errCode(err)
		return nil
	}
	n.awaitLeading(ctx, dp.repl)
	dp.produceMu.Lock()
	if !dp.repl.Leadership().IsLeader {
		dp.produceMu.Unlock()
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return nil
	}
	// The marker ends the producer's transaction here: a batch verified
	// for it must not open another (produce_txn.go).
	dp.txnGuards.drop(m.ProducerID, 0)
	dp.stampTime(batch, &info)
	pa, err := dp.repl.Append(ctx, batch, info, true)
	dp.produceMu.Unlock()
	if err != nil {
		sp.ErrorCode = replicationErrCode(err)
		return nil
	}
	return func(ctx context.Context) {
		pr, err := pa.Committed(ctx)
		switch {
		case err != nil:
			sp.ErrorCode = replicationErrCode(err)
		case pr.Err != nil:
			sp.ErrorCode = errCode(pr.Err)
		}
	}
}

// startGroupsMarker ends the producer's transaction in the groups of a
// __consumer_offsets partition this node leads: its group coordinator
// proposes a TxnMarker, and the partition answers NONE only once it is
// applied (the transactional offsets are committed or dropped), as
// Kafka's GroupCoordinator.scheduleHandleTxnCompletion. A partition
// whose coordinator is still loading answers COORDINATOR_LOAD_IN_PROGRESS
// and the transaction coordinator sends the marker again.
func (n *Node) startGroupsMarker(m *kmsg.WriteTxnMarkersRequestMarker, topic string, index int32, sp *kmsg.WriteTxnMarkersResponseMarkerTopicPartition) func(context.Context) {
	if _, code := n.leaderReplica(topic, index, -1); code != 0 {
		sp.ErrorCode = code
		return nil
	}
	r := n.replicaFor(topic, index)
	if r == nil || r.offsets == nil {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return nil
	}
	op := r.offsets
	if active, term := op.coord.Active(); !active || term != uint64(op.group.Leadership().Epoch) {
		sp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return nil
	}
	pid, epoch, commit := m.ProducerID, m.ProducerEpoch, m.Committed
	return func(context.Context) {
		sp.ErrorCode = op.coord.TxnMarker(pid, epoch, commit)
	}
}
