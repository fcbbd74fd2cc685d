package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/transport/kafka"
)

// serveAlterPartitionReassignments starts or cancels (null replicas)
// partition moves with one group-0 command: each partition's answer is
// its item's, as in Kafka. The answer comes once group 0 has recorded the
// moves; they go on in the background (coordinator/reassign.go), and
// ListPartitionReassignments shows them until they end.
func (n *Node) serveAlterPartitionReassignments(c *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	f := kafka.NewFuture()
	go func() {
		ctx, cancel := context.WithTimeout(c.Context(), requestTimeout(r.TimeoutMillis))
		defer cancel()
		f.Complete(n.alterReassignments(ctx, r), nil)
	}()
	return f
}

func (n *Node) alterReassignments(ctx context.Context, r *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	cmd := &coordinator.ReassignPartitions{AllowReplicationFactorChange: r.Version < 1 || r.AllowReplicationFactorChange}
	type slot struct{ topic, part int }
	var slots []slot
	for i, rt := range r.Topics {
		out := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		out.Topic = rt.Topic
		for j, rp := range rt.Partitions {
			op := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			op.Partition = rp.Partition
			out.Partitions = append(out.Partitions, op)
			item, err := reassignItem(rt.Topic, rp)
			if err != nil {
				out.Partitions[j].ErrorCode, out.Partitions[j].ErrorMessage = coordinator.KafkaError(err)
				continue
			}
			cmd.Items = append(cmd.Items, item)
			slots = append(slots, slot{i, j})
		}
		resp.Topics = append(resp.Topics, out)
	}
	if len(cmd.Items) == 0 {
		return resp
	}
	res, err := n.ctl.Propose(ctx, &coordinator.Command{ReassignPartitions: cmd})
	if err = firstErr(metaKafkaError(err), res.Err); err != nil {
		resp.ErrorCode, resp.ErrorMessage = coordinator.KafkaError(err)
		return resp
	}
	for k, s := range slots {
		op := &resp.Topics[s.topic].Partitions[s.part]
		op.ErrorCode, op.ErrorMessage = coordinator.KafkaError(res.Items[k].Err)
	}
	return resp
}

// reassignItem turns one requested partition into a group-0 item; Kafka's
// null replica list cancels.
func reassignItem(topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition) (coordinator.ReassignItem, error) {
	it := coordinator.ReassignItem{Topic: topic, Partition: rp.Partition}
	if rp.Replicas == nil {
		it.Cancel = true
		return it, nil
	}
	for _, id := range rp.Replicas {
		if id <= 0 {
			return it, &coordinator.Error{Code: kerr.InvalidReplicaAssignment, Msg: "broker ids are positive"}
		}
		it.Replicas = append(it.Replicas, uint64(id))
	}
	return it, nil
}

// serveListPartitionReassignments lists the moves under way, of the named
// partitions or (null topics) of all, with Kafka's replicas (every
// broker holding a copy), adding and removing replicas.
func (n *Node) serveListPartitionReassignments(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	s := n.meta.View()
	if r.Topics == nil {
		for _, name := range s.TopicNames() {
			if out, ok := listMoves(s.Topics[name], nil); ok {
				resp.Topics = append(resp.Topics, out)
			}
		}
		return kafka.Ready(resp)
	}
	for _, rt := range r.Topics {
		t, ok := s.Topics[rt.Topic]
		if !ok {
			continue // Kafka answers for the partitions that move only
		}
		if out, ok := listMoves(t, rt.Partitions); ok {
			resp.Topics = append(resp.Topics, out)
		}
	}
	return kafka.Ready(resp)
}

// listMoves lists t's moving partitions among parts (nil: all).
func listMoves(t *coordinator.Topic, parts []int32) (kmsg.ListPartitionReassignmentsResponseTopic, bool) {
	out := kmsg.NewListPartitionReassignmentsResponseTopic()
	out.Topic = t.Name
	for i := range t.Partitions {
		p := &t.Partitions[i]
		if !p.Moving() || parts != nil && !slices.Contains(parts, p.Index) {
			continue
		}
		op := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		op.Partition = p.Index
		op.Replicas, op.AddingReplicas, op.RemovingReplicas = int32s(p.Replicas), int32s(p.Adding()), int32s(p.Removing())
		out.Partitions = append(out.Partitions, op)
	}
	return out, len(out.Partitions) > 0
}

// int32s converts broker ids to Kafka's.
func int32s(ids []uint64) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
