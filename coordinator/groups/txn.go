package groups

import (
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
)

// CheckTxnCommit decides whether a TxnOffsetCommit from (generation,
// member, instance) may leave offsets pending in g, as Kafka's
// GroupCoordinator.validateOffsetCommit with isTransactional does. A
// group that does not exist is checked as the Empty group of generation
// 0 that the commit creates. Unlike OffsetCommit, a transactional commit
// is not refused during CompletingRebalance, and one without a member
// (generation -1: v0-v2, or a producer outside the group) is accepted
// whatever the group's members. It returns a Kafka error code, 0 to
// accept.
func CheckTxnCommit(g *Group, generation int32, memberID, instanceID string) int16 {
	if g == nil {
		g = &Group{}
	}
	if generation < 0 && memberID == "" && instanceID == "" {
		return 0
	}
	if id, ok := g.StaticMember(instanceID); ok && id != memberID {
		return codeOf(kerr.FencedInstanceID)
	}
	if _, ok := g.Members[memberID]; memberID != "" && !ok {
		return codeOf(kerr.UnknownMemberID)
	}
	if generation != g.Generation {
		return codeOf(kerr.IllegalGeneration)
	}
	return 0
}

// checkTxnEpoch refuses a producer epoch older than the latest this
// partition has seen from the producer (seen: whether it has): a zombie
// of a fenced producer (Kafka's log refuses its batch to
// __consumer_offsets with INVALID_PRODUCER_EPOCH,
// ProducerStateManager.checkProducerEpoch).
func checkTxnEpoch(p ProducerSeen, seen bool, epoch int16) int16 {
	if seen && epoch < p.Epoch {
		return codeOf(kerr.InvalidProducerEpoch)
	}
	return 0
}

func (s *state) txnCommit(c *TxnCommit, index uint64) Result {
	if c.Group == "" {
		return fail(kerr.InvalidGroupID)
	}
	g := s.groups[c.Group]
	if code := CheckTxnCommit(g, c.Generation, c.MemberID, c.InstanceID); code != 0 {
		return Result{Code: code}
	}
	seen, ok := s.producers[c.ProducerID]
	if code := checkTxnEpoch(seen, ok, c.ProducerEpoch); code != 0 {
		return Result{Code: code}
	}
	s.producers[c.ProducerID] = ProducerSeen{Epoch: c.ProducerEpoch, LastMs: c.NowMs}
	byProducer := s.pending[c.Group]
	if g == nil {
		s.groups[c.Group] = &Group{Name: c.Group, Phase: PhaseEmpty, EmptySinceMs: c.NowMs}
	}
	if byProducer == nil {
		byProducer = map[int64]*PendingTxn{}
		s.pending[c.Group] = byProducer
	}
	p := byProducer[c.ProducerID]
	if p == nil {
		p = &PendingTxn{Offsets: map[TopicPartition]Offset{}}
		byProducer[c.ProducerID] = p
	}
	p.ProducerEpoch = c.ProducerEpoch
	for _, o := range c.Offsets {
		p.Offsets[o.TopicPartition] = Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitMs: c.NowMs, Index: index}
	}
	return success()
}

// txnMarker completes the producer's pending offsets in every group of
// the partition, as Kafka's GroupMetadata.completePendingTxnOffsetCommit:
// on commit each becomes the committed offset unless a commit written
// after it (a later raft index) is there already; on abort they are
// dropped. A marker that finds nothing pending changes nothing.
func (s *state) txnMarker(c *TxnMarker) Result {
	if seen, ok := s.producers[c.ProducerID]; ok {
		s.producers[c.ProducerID] = ProducerSeen{Epoch: max(seen.Epoch, c.ProducerEpoch), LastMs: c.NowMs}
	}
	for name, byProducer := range s.pending {
		p := byProducer[c.ProducerID]
		if p == nil {
			continue
		}
		delete(byProducer, c.ProducerID)
		if len(byProducer) == 0 {
			delete(s.pending, name)
		}
		if c.Commit {
			s.completeTxn(name, p)
		}
		s.dropIfGone(name)
	}
	return success()
}

// expireProducers forgets producers seen no later than retentionMs ago
// that have nothing pending.
func (s *state) expireProducers(nowMs, retentionMs int64) {
	for pid, p := range s.producers {
		if nowMs-p.LastMs >= retentionMs && !s.hasPending(pid) {
			delete(s.producers, pid)
		}
	}
}

func (s *state) hasPending(pid int64) bool {
	for _, byProducer := range s.pending {
		if byProducer[pid] != nil {
			return true
		}
	}
	return false
}

func (s *state) completeTxn(group string, p *PendingTxn) {
	offs := s.offsets[group]
	if offs == nil {
		offs = map[TopicPartition]Offset{}
		s.offsets[group] = offs
	}
	for tp, o := range p.Offsets {
		if cur, ok := offs[tp]; !ok || cur.Index < o.Index {
			offs[tp] = o
		}
	}
}

// pendingFor returns, of the partitions asked (nil: all), those with a
// pending transactional offset in group.
func (s *state) pendingFor(group string, want []TopicPartition) map[TopicPartition]bool {
	out := map[TopicPartition]bool{}
	for _, p := range s.pending[group] {
		for tp := range p.Offsets {
			out[tp] = true
		}
	}
	if want == nil {
		return out
	}
	asked := make(map[TopicPartition]bool, len(want))
	for _, tp := range want {
		if out[tp] {
			asked[tp] = true
		}
	}
	return asked
}

func (p *PendingTxn) clone() *PendingTxn {
	return &PendingTxn{ProducerEpoch: p.ProducerEpoch, Offsets: maps.Clone(p.Offsets)}
}

// TxnCommitRequest is a TxnOffsetCommit for one group, after the broker
// has answered the partitions it refuses on its own.
type TxnCommitRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Group           string
	Generation      int32
	MemberID        string
	InstanceID      string
	Offsets         []CommitOffset
}

// TxnCommit leaves offsets pending for the producer's transaction once
// the partition's raft group has committed them. It returns one Kafka
// code for all of them (PRODUCER_FENCED for a stale epoch); a refused
// commit changes nothing and proposes nothing.
func (c *Coordinator) TxnCommit(req TxnCommitRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	if code := c.Check(); code != 0 {
		return code
	}
	if code := CheckTxnCommit(c.cfg.Machine.Group(req.Group), req.Generation, req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if p, ok := c.cfg.Machine.Producer(req.ProducerID); checkTxnEpoch(p, ok, req.ProducerEpoch) != 0 {
		return kerr.InvalidProducerEpoch.Code
	}
	if len(req.Offsets) == 0 {
		return 0
	}
	_, code := c.proposeCode(&Command{TxnCommit: &TxnCommit{TransactionalID: req.TransactionalID, ProducerID: req.ProducerID,
		ProducerEpoch: req.ProducerEpoch, Group: req.Group, Generation: req.Generation, MemberID: req.MemberID,
		InstanceID: req.InstanceID, Offsets: req.Offsets, NowMs: c.cfg.Now().UnixMilli()}})
	return code
}

// TxnMarker applies a transaction's marker to the partition's groups and
// returns once it is applied (0), or the code that makes the transaction
// coordinator send it again. It is proposed even when nothing is pending
// here, so that it is ordered after every earlier entry.
func (c *Coordinator) TxnMarker(producerID int64, producerEpoch int16, commit bool) int16 {
	if code := c.Check(); code != 0 {
		return code
	}
	_, code := c.proposeCode(&Command{TxnMarker: &TxnMarker{ProducerID: producerID, ProducerEpoch: producerEpoch, Commit: commit,
		NowMs: c.cfg.Now().UnixMilli()}})
	return code
}
