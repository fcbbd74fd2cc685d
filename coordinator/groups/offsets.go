package groups

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitRequest is an OffsetCommit for one group, after the broker has
// answered partitions it refuses on its own (unknown topics, oversized
// metadata).
type CommitRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID string
	Offsets    []CommitOffset
}

// Commit stores offsets once the partition's raft group has committed
// them. It returns one Kafka code for all of them; a refused commit
// changes nothing. A member's successful commit also extends its session.
func (c *Coordinator) Commit(req CommitRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	if code := c.Check(); code != 0 {
		return code
	}
	g := c.cfg.Machine.Group(req.Group)
	if code := CheckCommit(g, req.Generation, req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if len(req.Offsets) == 0 {
		return 0
	}
	now := c.cfg.Now()
	_, code := c.proposeCode(&Command{Commit: &Commit{Group: req.Group, Generation: req.Generation, MemberID: req.MemberID,
		InstanceID: req.InstanceID, Offsets: req.Offsets, NowMs: now.UnixMilli()}})
	if code == 0 && req.MemberID != "" {
		c.touch(req.Group, req.MemberID)
	}
	return code
}

// touch extends a member's session.
func (c *Coordinator) touch(group, memberID string) {
	s, code := c.session(group, false)
	if code != 0 || s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := c.cfg.Machine.Group(group).member(memberID); m != nil && !s.dead {
		s.deadlines[memberID] = c.cfg.Now().Add(ms(m.SessionTimeoutMs))
	}
}

// FetchOffsets returns the group's committed offsets for the partitions
// asked (nil: all of them). A partition without one is absent.
func (c *Coordinator) FetchOffsets(group string, want []TopicPartition) (map[TopicPartition]Offset, int16) {
	if code := c.Check(); code != 0 {
		return nil, code
	}
	all := c.cfg.Machine.Offsets(group)
	if want == nil {
		return all, 0
	}
	out := make(map[TopicPartition]Offset, len(want))
	for _, tp := range want {
		if o, ok := all[tp]; ok {
			out[tp] = o
		}
	}
	return out, 0
}

// DeleteOffsets handles an OffsetDelete: the offsets of an empty group, or
// of topics its consumer members do not subscribe to, are deleted. It
// returns a group-level code and per-partition codes.
func (c *Coordinator) DeleteOffsets(group string, tps []TopicPartition) (int16, map[TopicPartition]int16) {
	if group == "" {
		return kerr.InvalidGroupID.Code, nil
	}
	s, code := c.lockSession(group)
	if code != 0 {
		return code, nil
	}
	defer s.mu.Unlock()
	g := c.cfg.Machine.Group(group)
	if g == nil {
		return kerr.GroupIDNotFound.Code, nil
	}
	codes := map[TopicPartition]int16{}
	var subscribed map[string]bool
	if s.active(g) {
		if g.ProtocolType != "consumer" {
			return kerr.NonEmptyGroup.Code, nil
		}
		subscribed = subscriptions(g)
	}
	var del []TopicPartition
	for _, tp := range tps {
		if subscribed[tp.Topic] {
			codes[tp] = kerr.GroupSubscribedToTopic.Code
			continue
		}
		codes[tp] = 0
		del = append(del, tp)
	}
	if len(del) > 0 {
		if _, code := c.proposeCode(&Command{DeleteOffsets: &DeleteOffsets{Group: group, Partitions: del}}); code != 0 {
			return code, nil
		}
	}
	return 0, codes
}

// subscriptions decodes the topics a consumer group's members subscribe
// to from their metadata for the chosen protocol.
func subscriptions(g *Group) map[string]bool {
	out := map[string]bool{}
	for _, m := range g.Members {
		meta, _ := m.metadataFor(g.Protocol)
		var cm kmsg.ConsumerMemberMetadata
		if err := cm.ReadFrom(meta); err != nil {
			continue
		}
		for _, t := range cm.Topics {
			out[t] = true
		}
	}
	return out
}
