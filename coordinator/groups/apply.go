package groups

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// state is the whole replicated state of one offsets partition. apply is a
// pure function of it and a command, so every replica reaches the same
// state; nothing here reads a clock.
type state struct {
	groups  map[string]*Group
	offsets map[string]map[TopicPartition]Offset
	// pending holds transactional offsets per group and producer id,
	// invisible to OffsetFetch until the producer's marker commits them.
	pending map[string]map[int64]*PendingTxn
	// producers holds the latest epoch of each producer id that left
	// transactional offsets here, as Kafka's partition keeps producer
	// state: a zombie's TxnOffsetCommit is refused even after its
	// transaction's marker.
	producers map[int64]ProducerSeen
}

func newState() *state {
	return &state{groups: map[string]*Group{}, offsets: map[string]map[TopicPartition]Offset{},
		pending: map[string]map[int64]*PendingTxn{}, producers: map[int64]ProducerSeen{}}
}

func success() Result            { return Result{} }
func fail(e *kerr.Error) Result  { return Result{Code: e.Code} }
func codeOf(e *kerr.Error) int16 { return e.Code }

// apply applies c, the entry at raft index index.
func (s *state) apply(c *Command, index uint64) Result {
	switch {
	case c.Barrier != nil:
		return success()
	case c.NewGeneration != nil:
		return s.newGeneration(c.NewGeneration)
	case c.Assign != nil:
		return s.assign(c.Assign)
	case c.Remove != nil:
		return s.remove(c.Remove)
	case c.ReplaceStatic != nil:
		return s.replaceStatic(c.ReplaceStatic)
	case c.Commit != nil:
		return s.commit(c.Commit, index)
	case c.TxnCommit != nil:
		return s.txnCommit(c.TxnCommit, index)
	case c.TxnMarker != nil:
		return s.txnMarker(c.TxnMarker)
	case c.DeleteOffsets != nil:
		return s.deleteOffsets(c.DeleteOffsets)
	case c.DeleteGroups != nil:
		return s.deleteGroups(c.DeleteGroups)
	case c.Expire != nil:
		return s.expire(c.Expire)
	}
	return fail(kerr.InvalidRequest)
}

func (s *state) newGeneration(c *NewGeneration) Result {
	g := s.groups[c.Group]
	if g == nil {
		g = &Group{Name: c.Group, Phase: PhaseEmpty}
	}
	if g.Generation != c.PrevGeneration || c.Group == "" {
		return fail(kerr.IllegalGeneration)
	}
	ng := g.clone()
	ng.Generation, ng.ProtocolType = c.Generation, c.ProtocolType
	ng.Members = make(map[string]*Member, len(c.Members))
	for _, m := range c.Members {
		nm := m.clone()
		nm.Assignment = nil
		ng.Members[m.ID] = nm
	}
	if len(ng.Members) == 0 {
		ng.becomeEmpty(c.NowMs)
	} else {
		ng.Phase, ng.Protocol, ng.Leader = PhaseCompleting, c.Protocol, c.Leader
	}
	s.groups[c.Group] = ng
	return success()
}

func (g *Group) becomeEmpty(nowMs int64) {
	g.Phase, g.Protocol, g.Leader, g.EmptySinceMs = PhaseEmpty, "", "", nowMs
}

func (s *state) assign(c *Assign) Result {
	g := s.groups[c.Group]
	switch {
	case g == nil || len(g.Members) == 0:
		return fail(kerr.UnknownMemberID)
	case g.Generation != c.Generation:
		return fail(kerr.IllegalGeneration)
	case g.Phase != PhaseCompleting:
		return fail(kerr.RebalanceInProgress)
	}
	ng := g.clone()
	for id, m := range ng.Members {
		nm := m.clone()
		nm.Assignment = c.Assignments[id]
		ng.Members[id] = nm
	}
	ng.Phase = PhaseStable
	s.groups[c.Group] = ng
	return success()
}

func (s *state) remove(c *Remove) Result {
	g := s.groups[c.Group]
	if g == nil {
		return fail(kerr.UnknownMemberID)
	}
	ng := g.clone()
	removed := 0
	for _, id := range c.Members {
		if _, ok := ng.Members[id]; ok {
			delete(ng.Members, id)
			removed++
			if ng.Leader == id {
				ng.Leader = ""
			}
		}
	}
	if removed == 0 {
		return fail(kerr.UnknownMemberID)
	}
	if len(ng.Members) == 0 {
		ng.Generation = nextGeneration(ng.Generation)
		ng.becomeEmpty(c.NowMs)
	} else {
		ng.Phase = PhasePreparing
	}
	s.groups[c.Group] = ng
	return success()
}

// nextGeneration is gen+1, wrapping to 1 as Kafka does.
func nextGeneration(gen int32) int32 {
	if gen+1 <= 0 {
		return 1
	}
	return gen + 1
}

func (s *state) replaceStatic(c *ReplaceStatic) Result {
	g := s.groups[c.Group]
	if g == nil || c.Member == nil {
		return fail(kerr.UnknownMemberID)
	}
	old, ok := g.Members[c.OldID]
	if !ok {
		return fail(kerr.UnknownMemberID)
	}
	if old.InstanceID == "" || old.InstanceID != c.Member.InstanceID {
		return fail(kerr.FencedInstanceID)
	}
	if _, taken := g.Members[c.Member.ID]; taken {
		return fail(kerr.InvalidRequest)
	}
	ng := g.clone()
	nm := c.Member.clone()
	nm.Assignment = old.Assignment
	delete(ng.Members, c.OldID)
	ng.Members[nm.ID] = nm
	if ng.Leader == c.OldID {
		ng.Leader = nm.ID
	}
	s.groups[c.Group] = ng
	return success()
}

// CheckCommit decides whether a commit from (generation, member, instance)
// may store offsets in g (nil: no such group), as Kafka's coordinator
// does. It returns a Kafka error code, 0 to accept.
func CheckCommit(g *Group, generation int32, memberID, instanceID string) int16 {
	if g == nil {
		if generation < 0 {
			return 0 // a simple commit creates the group
		}
		return codeOf(kerr.IllegalGeneration)
	}
	if id, ok := g.StaticMember(instanceID); ok && id != memberID {
		return codeOf(kerr.FencedInstanceID)
	}
	if generation >= 0 || memberID != "" || instanceID != "" {
		if g.Phase == PhaseCompleting {
			return codeOf(kerr.RebalanceInProgress)
		}
		if _, ok := g.Members[memberID]; !ok {
			return codeOf(kerr.UnknownMemberID)
		}
		if generation != g.Generation {
			return codeOf(kerr.IllegalGeneration)
		}
		return 0
	}
	if len(g.Members) > 0 {
		return codeOf(kerr.UnknownMemberID)
	}
	return 0
}

func (s *state) commit(c *Commit, index uint64) Result {
	g := s.groups[c.Group]
	if c.Group == "" {
		return fail(kerr.InvalidGroupID)
	}
	if code := CheckCommit(g, c.Generation, c.MemberID, c.InstanceID); code != 0 {
		return Result{Code: code}
	}
	if g == nil {
		g = &Group{Name: c.Group, Phase: PhaseEmpty, EmptySinceMs: c.NowMs}
		s.groups[c.Group] = g
	}
	offs := s.offsets[c.Group]
	if offs == nil {
		offs = map[TopicPartition]Offset{}
		s.offsets[c.Group] = offs
	}
	for _, o := range c.Offsets {
		offs[o.TopicPartition] = Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitMs: c.NowMs, Index: index}
	}
	return success()
}

func (s *state) deleteOffsets(c *DeleteOffsets) Result {
	if s.groups[c.Group] == nil {
		return fail(kerr.GroupIDNotFound)
	}
	for _, tp := range c.Partitions {
		delete(s.offsets[c.Group], tp)
	}
	s.dropIfGone(c.Group)
	return success()
}

// dropIfGone forgets a group with no members, no offsets and no pending
// transactional offsets left (Kafka's GroupMetadata.hasOffsets).
func (s *state) dropIfGone(name string) {
	g := s.groups[name]
	if g != nil && len(g.Members) == 0 && len(s.offsets[name]) == 0 && len(s.pending[name]) == 0 {
		delete(s.groups, name)
		delete(s.offsets, name)
	}
}

func (s *state) deleteGroups(c *DeleteGroups) Result {
	res := Result{Codes: map[string]int16{}}
	for _, name := range c.Groups {
		g := s.groups[name]
		switch {
		case g == nil:
			res.Codes[name] = codeOf(kerr.GroupIDNotFound)
		case len(g.Members) > 0:
			res.Codes[name] = codeOf(kerr.NonEmptyGroup)
		default:
			// Kafka deletes an empty group whatever its pending
			// transactional offsets; its marker then finds nothing.
			delete(s.groups, name)
			delete(s.offsets, name)
			delete(s.pending, name)
			res.Codes[name] = 0
		}
	}
	return res
}

func (s *state) expire(c *Expire) Result {
	for name, g := range s.groups {
		if len(g.Members) > 0 {
			continue
		}
		for tp, o := range s.offsets[name] {
			if expired(g, o, c.NowMs, c.RetentionMs) {
				delete(s.offsets[name], tp)
			}
		}
		s.dropIfGone(name)
	}
	s.expireProducers(c.NowMs, c.RetentionMs)
	return success()
}

// expired reports whether offset o of the empty group g has outlived the
// retention at nowMs: retention counts from the later of the group
// becoming empty and the commit (KIP-211).
func expired(g *Group, o Offset, nowMs, retentionMs int64) bool {
	return nowMs-max(g.EmptySinceMs, o.CommitMs) >= retentionMs
}
