package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/internal/vfs"
	"github.com/raftq/raftq/isr"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// partReplica is a node's partition.Replica, as the broker runs it, with
// the checker told of every batch it applies.
type partReplica struct {
	*partition.Replica // SkipEntry (raftgroup.ConfIndexer) comes with it
	s                  *Sim
	node, group        uint64
}

var (
	_ raftgroup.StateMachine = (*partReplica)(nil)
	_ raftgroup.ConfIndexer  = (*partReplica)(nil)
)

// Apply applies the entry to the real replica and reports each appended
// batch, read back from the log, to the checker.
func (p *partReplica) Apply(e raftgroup.Entry) (any, error) {
	if p.s.cfg.DropProducerID && len(e.Data) > 1 && e.Data[0] == produceKind {
		e.Data = append(e.Data[:1:1], dropProducer(e.Data[1:])...)
	}
	v, err := p.Replica.Apply(e)
	if err != nil {
		return v, err
	}
	if res, ok := v.(*partition.ProduceResult); ok && res.Err == nil && !res.Duplicate {
		l := p.Log()
		b, rerr := l.Read(res.Base, 1, l.EndOffset())
		if rerr != nil {
			p.s.chk.fail("node %d partition %d: read back batch %d: %s", p.node, p.group, res.Base, rerr)
			return v, nil
		}
		batches, _, serr := splitBatches(b)
		if serr != nil || len(batches) == 0 || batches[0].base != res.Base {
			p.s.chk.fail("node %d partition %d: batch %d reads back wrong: %v", p.node, p.group, res.Base, serr)
			return v, nil
		}
		p.s.pchk.onAppend(p.node, p.group, batches[0])
	}
	return v, nil
}

// produceKind is the first byte of a produce entry.
var produceKind = partition.ProduceParts(nil)[0][0]

// Restore installs a snapshot (from the leader, or one staged before a
// crash) into the real replica, and counts it.
func (p *partReplica) Restore(snap *raftpb.Snapshot) error {
	err := p.Replica.Restore(snap)
	if err == nil {
		p.s.res.Installs++
		p.s.note("partition %d: node %d installed snapshot %d", p.group, p.node, snap.GetMetadata().GetIndex())
	}
	return err
}

// partDir is where a node keeps partition group g on its disk.
func partDir(g uint64) string { return fmt.Sprintf("/data/p%d", g) }

// openPartition opens the node's replica of group g from its disk.
func (s *Sim) openPartition(n *node, g uint64) (*partReplica, error) {
	cfg := partition.DefaultConfig()
	cfg.SegmentBytes, cfg.MaxBatchBytes, cfg.IndexIntervalBytes = 1<<10, 1<<10, 256
	cfg.WritebackBytes = 0
	cfg.FS = n.disk
	cfg.Clock = s.clock
	cfg.UnsafeSkipCRCChecks = s.cfg.SkipCRCChecks
	rc := partition.ReplicaConfig{Dir: partDir(g), Log: cfg}
	r, err := partition.OpenReplica(rc)
	var gap *partition.GapError
	if errors.As(err, &gap) {
		if rerr := s.repairFrom(n, g, rc, gap); rerr != nil {
			return nil, fmt.Errorf("%w; no repair yet: %w", err, rerr)
		}
		r, err = partition.OpenReplica(rc)
	}
	if err != nil {
		return nil, err
	}
	return &partReplica{Replica: r, s: s, node: n.id, group: g}, nil
}

// startPartition starts the raft group of replica r, opened. A restore of
// its local snapshot that finds a hole (a damaged replica.checkpoint over
// damaged batches: the restore rewrote the checkpoint, so the next open
// finds the hole) closes it and leaves it offline, to be repaired and
// started again by retryOffline, as the broker's reconcile retries it;
// any other failure is a finding. It reports whether the group started.
func (s *Sim) startPartition(n *node, h *raftgroup.Host, g uint64, r *partReplica) bool {
	err := s.createGroup(n, h, g, r)
	if err == nil {
		return true
	}
	delete(n.parts, g)
	_ = r.Close()
	if gap := (*partition.GapError)(nil); errors.As(err, &gap) {
		n.offline[g] = err
		s.note("node %d partition %d: offline: %s", n.id, g, err)
		return false
	}
	s.chk.fail("node %d partition %d: cannot start at tick %d: %s", n.id, g, s.now, err)
	return false
}

// retryOffline tries again, on every live node, to repair and start the
// partition replicas that were offline for want of a peer to refill them.
func (s *Sim) retryOffline() {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		for _, g := range s.partitionGroups() {
			if n.offline[g] == nil {
				continue
			}
			r, err := s.openPartition(n, g)
			if err != nil {
				n.offline[g] = err
				continue
			}
			delete(n.offline, g)
			n.parts[g] = r
			if s.startPartition(n, n.host, g, r) {
				s.note("node %d partition %d: repaired and started", n.id, g)
			}
		}
	}
}

// clock is the simulator's virtual time, for the logs' rolling.
func (s *Sim) clock() time.Time { return time.UnixMilli(1_700_000_000_000 + s.now*100) }

func (s *Sim) partitionGroups() []uint64 {
	var out []uint64
	for g := uint64(s.cfg.Groups) + 1; g <= uint64(s.cfg.Groups+s.cfg.Partitions); g++ {
		out = append(out, g)
	}
	return out
}

func (s *Sim) isPartition(g uint64) bool {
	return g > uint64(s.cfg.Groups) && g <= uint64(s.cfg.Groups+s.cfg.Partitions)
}

// producer is one Kafka producer of a partition: idempotent ones retry a
// batch (same sequence) until it is acknowledged, as Kafka clients do;
// a plain one (pid < 0) never retries.
type producer struct {
	group   uint64
	pid     int64
	nextSeq int32
	cur     []byte // the batch being sent, nil when none
	curSeq  int32
	p       *raftgroup.Proposal
	made    int

	// An ISR partition's producer sends to isrPart's leader; a is its
	// append in flight there, on node at incarnation inc since sentAt.
	isrPart int
	a       *isr.Appended

	txn    *txnProducer // the transactional producer's (txn.go); nil for the others
	node   uint64
	inc    int
	sentAt int64
}

// next makes the producer's next batch unless it has one to resend.
func (pr *producer) next(s *Sim) {
	if pr.cur != nil {
		return
	}
	if pr.txn != nil {
		pr.nextTxn(s)
		return
	}
	pr.made++
	n := 1 + s.rng.IntN(3)
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("g%d-p%d-b%d-r%d", pr.group, pr.pid, pr.made, i)
	}
	pr.cur, pr.curSeq = makeBatch(pr.pid, pr.nextSeq, s.clock().UnixMilli(), vals), pr.nextSeq
}

// failed notes a send that failed or whose outcome is unknown: an
// idempotent producer resends the batch, a plain one drops it.
func (pr *producer) failed() {
	if pr.pid < 0 {
		pr.cur = nil
	}
}

func (pr *producer) String() string {
	if pr.pid < 0 {
		return fmt.Sprintf("plain batch %d", pr.made)
	}
	if pr.txn != nil && pr.txn.sending != txnData {
		return fmt.Sprintf("transactional producer %d's marker (transaction %d, late copy %v)", pr.pid, pr.txn.num, pr.txn.sending == txnLate)
	}
	return fmt.Sprintf("producer %d seq %d", pr.pid, pr.curSeq)
}

func (s *Sim) newProducers() {
	for _, g := range s.partitionGroups() {
		for pid := int64(1); pid <= 2; pid++ {
			s.producers = append(s.producers, &producer{group: g, pid: pid})
		}
		s.producers = append(s.producers, &producer{group: g, pid: -1})
		if s.cfg.Transactions {
			s.producers = append(s.producers, newTxnProducer(s, g, 0))
		}
	}
}

// offerProduce gives each partition's producers a turn.
func (s *Sim) offerProduce() {
	for _, pr := range s.producers {
		if pr.p != nil || s.rng.Float64() >= s.cfg.ProposeRate {
			continue
		}
		pr.next(s)
		pr.p = s.proposeParts(pr.group, pr.String(), partition.ProduceParts(pr.cur))
	}
}

// proposeParts submits an entry to the group's believed leader.
func (s *Sim) proposeParts(group uint64, what string, parts [][]byte) *raftgroup.Proposal {
	p, leader := s.proposeToLeader(group, parts...)
	if p != nil {
		s.traceEvent("produce", group)
		s.note("partition %d: %s sent to node %d", group, what, leader)
	}
	return p
}

// pollProducers records acknowledged batches; an idempotent producer
// whose send failed keeps its batch for a retry, a plain one drops it.
func (s *Sim) pollProducers() {
	for _, pr := range s.producers {
		if pr.p == nil {
			continue
		}
		select {
		case <-pr.p.Done():
		default:
			continue
		}
		res, err := pr.p.Wait(ctxBackground)
		pr.p = nil
		if err != nil {
			if !expectedFailure(err) {
				s.chk.fail("partition %d producer %d: send failed unexpectedly: %s", pr.group, pr.pid, err)
			}
			s.note("partition %d: %s failed: %s", pr.group, pr, err)
			pr.failed()
			continue
		}
		s.ackProduce(pr, res.Value)
	}
}

func (s *Sim) ackProduce(pr *producer, v any) {
	res, ok := v.(*partition.ProduceResult)
	if ok && res.Err == nil && pr.txn != nil && pr.txn.sending != txnData {
		s.ackTxnControl(pr, res)
		pr.cur = nil
		return
	}
	switch {
	case !ok:
		s.chk.fail("partition %d: produce applied with %T", pr.group, v)
	case res.Err != nil:
		s.chk.fail("partition %d producer %d seq %d: refused: %s", pr.group, pr.pid, pr.curSeq, res.Err)
	default:
		s.pchk.onAck(pr.group, pr.pid, pr.curSeq, res, payload(pr.cur))
		s.res.Acked++
		s.traceEvent("ack", pr.group)
		s.note("partition %d: %s acknowledged at [%d, %d] (duplicate %v)", pr.group, pr, res.Base, res.Last, res.Duplicate)
	}
	if pr.pid >= 0 && ok && res.Err == nil {
		pr.nextSeq += int32(batchRecords(pr.cur))
		if pr.txn != nil {
			pr.txn.acked++
		}
	}
	pr.cur = nil
}

func batchRecords(b []byte) int { return int(int32(binary.BigEndian.Uint32(b[57:]))) }

// observeServing records the high watermark every replica that would
// serve fetches shows: the leader, once it has applied its own term's
// no-op (broker's raftReplication.CaughtUp), unless the planted
// ServeBeforeCaughtUp bug lets it serve at once.
func (s *Sim) observeServing() {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		for g, r := range n.parts {
			grp := n.host.Group(g)
			if grp == nil {
				continue
			}
			st := grp.Status()
			if !st.IsLeader() {
				continue
			}
			eps := r.Epochs()
			caught := len(eps) > 0 && eps[len(eps)-1].Epoch == int32(st.Term)
			if caught || s.cfg.ServeBeforeCaughtUp {
				s.pchk.onServe(n.id, g, r.Log().HighWatermark())
			}
		}
	}
}

// finishPartitions commits a final batch on every partition and waits
// until every replica's log ends at the same offset past it, then checks
// the logs.
func (s *Sim) finishPartitions() {
	for _, g := range s.partitionGroups() {
		var p *raftgroup.Proposal
		var end int64 = -1
		marker := makeBatch(-1, -1, s.clock().UnixMilli(), []string{fmt.Sprintf("final-g%d", g)})
		ok := s.until(600, func() bool {
			if end < 0 && p != nil {
				select {
				case <-p.Done():
					if res, err := p.Wait(ctxBackground); err == nil {
						if pr, ok := res.Value.(*partition.ProduceResult); ok && pr.Err == nil {
							end = pr.Last + 1
						}
					}
					p = nil
				default:
				}
			}
			if end < 0 {
				if p == nil {
					p = s.proposeParts(g, "the final batch", partition.ProduceParts(marker))
				}
				return false
			}
			return s.partitionsAt(g, end)
		})
		if !ok {
			s.chk.fail("partition %d: no final batch on every replica within 600 ticks of healing", g)
		}
	}
	// Producers' last sends may still commit: let every replica apply them.
	s.until(600, func() bool { return s.partitionsConverged() })
	for _, g := range s.partitionGroups() {
		logs := map[uint64][]batchAt{}
		for _, n := range s.nodes {
			r := n.parts[g]
			if r == nil {
				s.chk.fail("partition %d: node %d has no replica (cannot open: %v)", g, n.id, n.offline[g])
				continue
			}
			logs[n.id] = s.readLog(n.id, g, r.Log())
			s.tchk.check(g, n.id, logs[n.id], r.Log())
		}
		s.pchk.final(g, logs)
	}
}

// partitionsAt reports whether every replica of g ends at end or later.
func (s *Sim) partitionsAt(g uint64, end int64) bool {
	for _, n := range s.nodes {
		if r := n.parts[g]; r == nil || r.Log().EndOffset() < end {
			return false
		}
	}
	return true
}

func (s *Sim) partitionsConverged() bool {
	for _, g := range s.partitionGroups() {
		var end int64 = -1
		for _, n := range s.nodes {
			r := n.parts[g]
			if r == nil {
				return false
			}
			e := r.Log().EndOffset()
			if end >= 0 && e != end {
				return false
			}
			end = e
		}
	}
	return true
}

// readLog reads a replica's whole log, batch by batch.
func (s *Sim) readLog(node, g uint64, l *partition.Log) []batchAt {
	var out []batchAt
	for off, end := l.StartOffset(), l.EndOffset(); off < end; {
		b, err := l.Read(off, 64<<10, end)
		if err == nil && len(b) == 0 {
			err = errors.New("empty read")
		}
		var bs []batchAt
		var next int64
		if err == nil {
			bs, next, err = splitBatches(b)
		}
		if err != nil {
			s.chk.fail("partition %d node %d: read log at %d: %s", g, node, off, err)
			return out
		}
		out, off = append(out, bs...), next
	}
	return out
}

// newDisk is a node's simulated disk for its partitions.
func newDisk(lie bool) *vfs.Mem {
	m := vfs.NewMem()
	m.LieAboutSync = lie
	return m
}
