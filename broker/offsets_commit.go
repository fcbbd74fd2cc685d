package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/transport/kafka"
)

// maxOffsetMetadata is Kafka's offset.metadata.max.bytes.
const maxOffsetMetadata = 4096

// serveOffsetCommit stores offsets through the group's coordinator once
// its offsets partition has committed them (raft acks). Partitions of
// unknown topics and oversized metadata are refused here, each on its
// own; the rest share the coordinator's verdict on generation and member.
func (n *Node) serveOffsetCommit(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	coord, code := n.groupCoordinator(r.Group)
	if code != 0 || r.Group == "" {
		if r.Group == "" {
			code = kerr.InvalidGroupID.Code
		}
		fillCommit(r, resp, func(int, int) int16 { return code })
		return kafka.Ready(resp)
	}
	return runAsync(func() kmsg.Response {
		pre, cr := n.commitRequest(r)
		verdict := coord.Commit(cr)
		fillCommit(r, resp, func(i, j int) int16 {
			if c := pre[i][j]; c != 0 {
				return c
			}
			return verdict
		})
		return resp
	})
}

// commitRequest sorts the partitions: pre holds the code of each one
// refused here (0: passed on).
func (n *Node) commitRequest(r *kmsg.OffsetCommitRequest) ([][]int16, groups.CommitRequest) {
	cr := groups.CommitRequest{Group: r.Group, Generation: r.Generation, MemberID: r.MemberID}
	if r.InstanceID != nil {
		cr.InstanceID = *r.InstanceID
	}
	st := n.meta.View()
	pre := make([][]int16, len(r.Topics))
	for i, t := range r.Topics {
		pre[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			var o groups.CommitOffset
			if o, pre[i][j] = commitOffset(st, t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata); pre[i][j] == 0 {
				cr.Offsets = append(cr.Offsets, o)
			}
		}
	}
	return pre, cr
}

// commitOffset checks one partition of an offset commit (plain or
// transactional): an unknown topic or partition, or metadata above
// maxOffsetMetadata, gets its code; otherwise the offset to commit.
func commitOffset(st *coordinator.State, topic string, partition int32, offset int64, leaderEpoch int32, metadata *string) (groups.CommitOffset, int16) {
	meta := ""
	if metadata != nil {
		meta = *metadata
	}
	t := st.Topics[topic]
	switch {
	case t == nil || partition < 0 || int(partition) >= len(t.Partitions):
		return groups.CommitOffset{}, kerr.UnknownTopicOrPartition.Code
	case len(meta) > maxOffsetMetadata:
		return groups.CommitOffset{}, kerr.OffsetMetadataTooLarge.Code
	}
	return groups.CommitOffset{TopicPartition: groups.TopicPartition{Topic: topic, Partition: partition},
		Offset: offset, LeaderEpoch: leaderEpoch, Metadata: meta}, 0
}

func fillCommit(r *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, code func(i, j int) int16) {
	for i, t := range r.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		for j, p := range t.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code(i, j)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}
