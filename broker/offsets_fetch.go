package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/transport/kafka"
)

// serveOffsetFetch reads committed offsets from the group's coordinator
// (one group before v8, several from v8). Partitions without a commit
// answer offset -1; no topics asked (v2+) means every committed one.
// With require_stable (v7+, KIP-447) a partition with transactional
// offsets waiting for their marker answers UNSTABLE_OFFSET_COMMIT (the
// client retries); without it the committed offsets are returned,
// whatever is pending.
func (n *Node) serveOffsetFetch(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version < 8 {
		var want []kmsg.OffsetFetchRequestGroupTopic
		for _, t := range r.Topics {
			want = append(want, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		g := n.fetchGroupOffsets(r.Group, want, r.Topics == nil, r.RequireStable)
		resp.ErrorCode = g.ErrorCode
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				if r.Version < 2 && g.ErrorCode != 0 {
					rp.ErrorCode = g.ErrorCode // v0-1 have no group-level error
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return kafka.Ready(resp)
	}
	for _, rg := range r.Groups {
		resp.Groups = append(resp.Groups, n.fetchGroupOffsets(rg.Group, rg.Topics, rg.Topics == nil, r.RequireStable))
	}
	return kafka.Ready(resp)
}

func (n *Node) fetchGroupOffsets(group string, want []kmsg.OffsetFetchRequestGroupTopic, all, requireStable bool) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = group
	var tps []groups.TopicPartition
	for _, t := range want {
		for _, p := range t.Partitions {
			tps = append(tps, groups.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	coord, code := n.groupCoordinator(group)
	var offs map[groups.TopicPartition]groups.Offset
	var unstable map[groups.TopicPartition]bool
	if code == 0 {
		if all {
			tps = nil
		}
		offs, code = coord.FetchOffsets(group, tps)
		if code == 0 && requireStable {
			unstable = coord.Machine().Unstable(group, tps)
		}
	}
	out.ErrorCode = code
	if all && code == 0 {
		for tp := range offs {
			tps = append(tps, tp)
		}
		sort.Slice(tps, func(i, j int) bool {
			return tps[i].Topic < tps[j].Topic || tps[i].Topic == tps[j].Topic && tps[i].Partition < tps[j].Partition
		})
	}
	for _, tp := range tps {
		if len(out.Topics) == 0 || out.Topics[len(out.Topics)-1].Topic != tp.Topic {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = tp.Topic
			out.Topics = append(out.Topics, t)
		}
		t := &out.Topics[len(out.Topics)-1]
		p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.Partition, -1, -1
		if unstable[tp] {
			p.Metadata, p.ErrorCode = kmsg.StringPtr(""), kerr.UnstableOffsetCommit.Code
		} else if o, ok := offs[tp]; ok {
			p.Offset, p.LeaderEpoch, p.Metadata = o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
		} else {
			p.Metadata = kmsg.StringPtr("")
		}
		t.Partitions = append(t.Partitions, p)
	}
	return out
}
