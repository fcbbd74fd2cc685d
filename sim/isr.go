package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/isr"
	"github.com/raftq/raftq/partition"
	"github.com/raftq/raftq/raftgroup"
)

// ISR partitions (Config.ISRPartitions) run the real isr.Manager and
// isr.Partition of every node in manual mode, on the node's simulated
// disk, with follower fetches carried by the simulated network (dropped,
// delayed, cut like raft's messages). Group 0 is isrController: the real
// coordinator.Metadata with its ISR rules (elections, AlterPartition,
// fencing), applied at once; its own replication is what the metadata
// and raft groups prove. It sits on no node: a node cut off from the
// others is cut off from it, and learns no new state meanwhile.
type isrController struct {
	meta     *coordinator.Metadata
	index    uint64
	lastSeen map[uint64]int64
	topic    [16]byte
	// proposed are the AlterPartitions leaders sent, applied at the start
	// of the next tick (a leader proposes holding its partition's lock).
	proposed []alterSent
}

type alterSent struct {
	n  *node
	it coordinator.AlterPartitionItem
	ch chan coordinator.ItemResult
}

// isrTopic is the ISR topic's name; its partitions are Config.ISRPartitions.
const isrTopic = "isr"

// isrSessionTicks is how long the controller hears nothing from a node
// before it fences it (SetAlive false), as a broker session expires.
const isrSessionTicks = 10

// isrKey is the checker's group key of ISR partition i, apart from raft
// group ids.
func isrKey(i int) uint64 { return 1_000_000 + uint64(i) }

func (s *Sim) newISRController() {
	c := &isrController{meta: coordinator.NewMetadata(), lastSeen: map[uint64]int64{}, topic: [16]byte{'i', 's', 'r'}}
	s.ctrl = c
	var replicas []uint64
	for _, n := range s.nodes {
		replicas = append(replicas, n.id)
		s.ctrlApply(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: n.id, KafkaAddr: fmt.Sprintf("n%d:9092", n.id),
			Incarnation: fmt.Sprint(n.id), StartID: startID(n.id, 1), ResignLostData: true, RestartForgetsLeader: true}})
	}
	// Kafka promises no acknowledged loss under single power losses only
	// with ELR (the last replica standing) and flush.messages=1 (the
	// correlated loss of unsynced tails, ISR-NOTES §2): with both, any
	// loss the checker finds is ours.
	s.ctrlApply(&coordinator.Command{UpdateFeatures: &coordinator.UpdateFeatures{EligibleLeaderReplicas: true}})
	assign := make([][]uint64, s.cfg.ISRPartitions)
	for i := range assign {
		assign[i] = replicas
	}
	res := s.ctrlApply(&coordinator.Command{CreateTopic: &coordinator.CreateTopic{Name: isrTopic, ID: c.topic, Partitions: int32(s.cfg.ISRPartitions),
		AllowISR: true, Assignment: assign, Configs: map[string]string{
			"replication.mode": coordinator.ModeISR, "min.insync.replicas": fmt.Sprint(min(2, len(replicas))),
			"flush.messages": s.isrFlush(),
		}}})
	if res.Err != nil {
		s.chk.fail("isr: create topic: %s", res.Err)
	}
}

func startID(node uint64, inc int) string { return fmt.Sprintf("start-%d-%d", node, inc) }

// ctrlApply applies one command to group 0 and publishes the new state to
// every node that can hear it.
func (s *Sim) ctrlApply(cmd *coordinator.Command) coordinator.Result {
	c := s.ctrl
	data, err := cmd.Encode()
	if err != nil {
		s.chk.fail("isr: encode %+v: %s", cmd, err)
		return coordinator.Result{Err: err}
	}
	c.index++
	v, err := c.meta.Apply(raftgroup.Entry{Index: c.index, Term: 1, Data: data})
	if err != nil {
		s.chk.fail("isr: group 0 apply: %s", err)
		return coordinator.Result{Err: err}
	}
	s.publishISR()
	return v.(coordinator.Result)
}

// reachesCtrl reports whether node n can talk to group 0: it is up and
// not cut off from every other node (the partitions isolate one node,
// sometimes in one direction only; group 0 stays with the majority).
func (s *Sim) reachesCtrl(n *node) bool {
	if !n.up {
		return false
	}
	for _, m := range s.nodes {
		if m.id != n.id && !s.net.cut[[2]uint64{n.id, m.id}] && !s.net.cut[[2]uint64{m.id, n.id}] {
			return true
		}
	}
	return len(s.nodes) == 1
}

// publishISR hands every node that hears group 0, is registered in its
// current start and has not seen group 0's newest state that state, as
// reconcile does on each metadata change it learns (a node cut off
// catches up when it is back).
func (s *Sim) publishISR() {
	if s.ctrl == nil {
		return
	}
	v := s.ctrl.meta.View()
	t := v.Topics[isrTopic]
	if t == nil {
		return
	}
	for _, n := range s.nodes {
		if n.isrM == nil || !s.reachesCtrl(n) || n.isrIndex == s.ctrl.index {
			continue
		}
		if b := v.Brokers[n.id]; b == nil || b.StartID != startID(n.id, n.isrInc) {
			// As the broker's updateISR (Controller.RegisteredIn): no
			// role from a state that predates this start's registration.
			continue
		}
		n.isrIndex = s.ctrl.index
		n.isrEpoch = 0
		if b := v.Brokers[n.id]; b != nil {
			n.isrEpoch = b.Epoch
		}
		for i, p := range t.Partitions {
			if i < len(n.isrParts) && n.isrParts[i] != nil {
				n.isrParts[i].Update(isr.State{Leader: p.Leader, LeaderEpoch: int32(p.LeaderTerm), PartitionEpoch: p.PartitionEpoch,
					Replicas: p.Replicas, ISR: p.ISR, ELR: p.ELR, Recovering: p.Recovering, LastKnownLeader: p.LastKnownLeader,
					MinISR: int(t.ConfigInt("min.insync.replicas")), BrokerEpoch: n.isrEpoch,
					Reported: slices.ContainsFunc(p.LogEnds, func(e coordinator.ReplicaLogEnd) bool { return e.Broker == n.id })})
			}
		}
	}
}

// bootISR starts node n's ISR side: its Manager and replicas, from its
// disk. A restart registers again (with a new StartID) once n hears
// group 0, which fences it out of every ISR until it catches up.
func (s *Sim) bootISR(n *node) {
	if s.cfg.ISRPartitions == 0 {
		return
	}
	n.isrInc++
	n.fetching = map[uint64]int64{}
	cfg := isr.DefaultManagerConfig()
	cfg.Self, cfg.Manual, cfg.Clock = n.id, true, s.clock
	cfg.ReplicaLagTimeMax = 2 * time.Second // 20 ticks
	cfg.Fetch = func(context.Context, uint64, []byte) ([]byte, error) {
		panic("sim: a manual isr.Manager fetched on its own")
	}
	cfg.Propose = func(it coordinator.AlterPartitionItem) <-chan coordinator.ItemResult { return s.isrPropose(n, it) }
	cfg.BrokerEpoch = func() uint64 { return n.isrEpoch }
	m, err := isr.NewManager(cfg)
	if err != nil {
		s.chk.fail("node %d: isr manager: %s", n.id, err)
		return
	}
	n.isrM = m
	t := s.ctrl.meta.View().Topics[isrTopic]
	n.isrParts = make([]*isr.Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		lc := partition.DefaultConfig()
		lc.SegmentBytes, lc.MaxBatchBytes, lc.IndexIntervalBytes = 1<<10, 1<<10, 256
		lc.WritebackBytes, lc.FS, lc.Clock = 0, n.disk, s.clock
		lc.UnsafeSkipCRCChecks = s.cfg.SkipCRCChecks
		ip, err := m.Open(isr.PartitionConfig{Group: p.Group, TopicID: s.ctrl.topic, Index: int32(i), Dir: fmt.Sprintf("/data/isr-%d", i), Log: lc,
			Flush: isr.FlushPolicy{Messages: t.ConfigInt("flush.messages")}})
		if err != nil {
			s.chk.fail("node %d isr partition %d: cannot open at tick %d: %s", n.id, i, s.now, err)
			continue
		}
		n.isrParts[i] = ip
	}
	n.isrRegister = n.isrInc > 1
	n.isrIndex = 0
	s.publishISR()
}

// crashISR drops node n's ISR side; its disk has crashed already.
func (s *Sim) crashISR(n *node) {
	if n.isrM == nil {
		return
	}
	n.isrM.Close()
	n.isrM, n.isrParts = nil, nil
}

// isrPropose is a leader's AlterPartition to group 0, applied at the next
// tick (applyProposed).
func (s *Sim) isrPropose(n *node, it coordinator.AlterPartitionItem) <-chan coordinator.ItemResult {
	ch := make(chan coordinator.ItemResult, 1)
	s.ctrl.proposed = append(s.ctrl.proposed, alterSent{n, it, ch})
	return ch
}

// applyProposed applies the AlterPartitions sent since the last tick, each
// if its node (still) hears group 0; the others are answered with an
// error, which makes the leader send them again.
func (s *Sim) applyProposed() {
	sent := s.ctrl.proposed
	s.ctrl.proposed = nil
	for _, a := range sent {
		if !s.reachesCtrl(a.n) {
			a.ch <- coordinator.ItemResult{Group: a.it.Group, Err: errUnreachable}
			continue
		}
		r := s.ctrlApply(&coordinator.Command{AlterPartition: &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{a.it}}})
		if r.Err != nil || len(r.Items) == 0 {
			a.ch <- coordinator.ItemResult{Group: a.it.Group, Err: errors.Join(r.Err, errUnreachable)}
		} else {
			s.note("isr: group %d AlterPartition from node %d (%d members): %v", a.it.Group, a.n.id, len(a.it.ISR), r.Items[0].Err)
			a.ch <- r.Items[0]
		}
	}
}

// isrLiveness is the controller's broker sessions: a node that hears
// group 0 heartbeats (and registers anew after a restart); one silent for
// isrSessionTicks is fenced.
func (s *Sim) isrLiveness() {
	c := s.ctrl
	for _, n := range s.nodes {
		b := c.meta.View().Brokers[n.id]
		switch {
		case s.reachesCtrl(n) && n.isrM != nil:
			c.lastSeen[n.id] = s.now
			if n.isrRegister {
				n.isrRegister = false
				s.note("isr: node %d registers again (start %d): fenced out of its ISRs", n.id, n.isrInc)
				s.ctrlApply(&coordinator.Command{RegisterBroker: &coordinator.Broker{ID: n.id, KafkaAddr: fmt.Sprintf("n%d:9092", n.id),
					Incarnation: fmt.Sprint(n.id), StartID: startID(n.id, n.isrInc), ResignLostData: true, RestartForgetsLeader: true}})
			} else if b != nil && !b.Alive {
				s.note("isr: node %d is alive again", n.id)
				s.ctrlApply(&coordinator.Command{SetAlive: &coordinator.SetAlive{ID: n.id, Alive: true}})
			}
		case b != nil && b.Alive && s.now-c.lastSeen[n.id] > isrSessionTicks:
			s.note("isr: node %d fenced (silent %d ticks)", n.id, s.now-c.lastSeen[n.id])
			s.ctrlApply(&coordinator.Command{SetAlive: &coordinator.SetAlive{ID: n.id, Alive: false}})
		}
	}
}

// stepISR runs one tick of the ISR side: the controller's sessions,
// every Manager's Step, and every fetch a follower has to send (one in
// flight per leader; a lost one is given up after isrFetchTimeout).
func (s *Sim) stepISR(load bool) {
	if s.ctrl == nil || s.cfg.ISRPartitions == 0 {
		return
	}
	s.applyProposed()
	s.isrLiveness()
	s.publishISR()
	for _, n := range s.nodes {
		if n.up && n.isrM != nil {
			n.isrM.Step()
		}
	}
	for _, n := range s.nodes {
		if !n.up || n.isrM == nil {
			continue
		}
		for _, r := range n.isrM.FetchRounds() {
			if at, ok := n.fetching[r.Leader]; ok && s.now-at < isrFetchTimeout {
				continue
			}
			n.fetching[r.Leader] = s.now
			s.sendFetch(n, r)
		}
	}
	if load {
		s.offerISR()
	}
	s.pollISR()
	s.observeISR()
}

const isrFetchTimeout = 5

// sendFetch carries one fetch round to its leader and the answer back;
// the answer goes to the incarnation that asked, or nowhere.
func (s *Sim) sendFetch(n *node, r isr.FetchRound) {
	inc := n.isrInc
	s.net.sendCall(n.id, r.Leader, func() {
		l := s.node(r.Leader)
		if l.isrM == nil {
			return
		}
		resp := l.isrM.HandleFetch(n.id, r.Request, s.clock().Add(time.Hour))
		s.net.sendCall(r.Leader, n.id, func() {
			if n.isrInc != inc || n.isrM == nil {
				return
			}
			delete(n.fetching, r.Leader)
			r.Done(resp, nil)
		})
	})
}

// newISRProducers adds two idempotent producers and a plain one per ISR
// partition, as newProducers does for raft partitions.
func (s *Sim) newISRProducers() {
	for i := range s.cfg.ISRPartitions {
		for _, pid := range []int64{1, 2, -1} {
			s.isrProducers = append(s.isrProducers, &producer{group: isrKey(i), pid: pid, isrPart: i})
		}
		if s.cfg.Transactions {
			s.isrProducers = append(s.isrProducers, newTxnProducer(s, isrKey(i), i))
		}
	}
}

// isrLeader returns the live node that believes it leads ISR partition i,
// and its replica, first in id order.
func (s *Sim) isrLeader(i int) (*node, *isr.Partition) {
	for _, n := range s.nodes {
		if !n.up || i >= len(n.isrParts) || n.isrParts[i] == nil {
			continue
		}
		if _, _, leads := n.isrParts[i].Leadership(); leads {
			return n, n.isrParts[i]
		}
	}
	return nil, nil
}

// offerISR gives each ISR producer a turn: an acks=all append on the
// partition's believed leader.
func (s *Sim) offerISR() {
	for _, pr := range s.isrProducers {
		if pr.a != nil || s.rng.Float64() >= s.cfg.ProposeRate {
			continue
		}
		pr.next(s)
		n, p := s.isrLeader(pr.isrPart)
		if p == nil {
			continue
		}
		info, err := partition.ValidateBatch(pr.cur, 1<<20)
		if err != nil {
			s.chk.fail("isr partition %d: our own batch is invalid: %s", pr.isrPart, err)
			return
		}
		a, err := p.Append(pr.cur, info, true)
		if err != nil {
			s.note("isr partition %d: %s refused by node %d: %s", pr.isrPart, pr, n.id, err)
			pr.failed()
			continue
		}
		pr.a, pr.node, pr.inc, pr.sentAt = a, n.id, n.isrInc, s.now
		s.traceEvent("isr-produce", pr.group)
		s.note("isr partition %d: %s appended on node %d at [%d, %d]", pr.isrPart, pr, n.id, a.Result().Base, a.Result().Last)
	}
}

// isrAckTicks is how long an ISR producer waits for its batch to commit
// before it counts the send as failed and (if idempotent) resends it, as
// a client's request.timeout.ms runs out.
const isrAckTicks = 60

// pollISR records the ISR batches that committed; a send whose leader
// crashed, stopped leading or took too long has an unknown outcome.
func (s *Sim) pollISR() {
	done, cancel := context.WithCancel(context.Background())
	cancel() // Committed only polls
	for _, pr := range s.isrProducers {
		if pr.a == nil {
			continue
		}
		n := s.node(pr.node)
		if !n.up || n.isrInc != pr.inc {
			s.note("isr partition %d: %s lost with node %d's crash", pr.isrPart, pr, n.id)
			pr.a = nil
			pr.failed()
			continue
		}
		res, err := pr.a.Committed(done)
		switch {
		case errors.Is(err, context.Canceled) && s.now-pr.sentAt < isrAckTicks:
			continue
		case err != nil:
			s.note("isr partition %d: %s failed: %s", pr.isrPart, pr, err)
			pr.a = nil
			pr.failed()
		case res.Err != nil:
			s.note("isr partition %d: %s answered %s", pr.isrPart, pr, res.Err)
			pr.a = nil
			pr.failed()
		default:
			pr.a = nil
			s.ackProduce(pr, &res)
		}
	}
}

// observeISR records the HW every serving ISR leader shows (once it is
// caught up on its epoch, as the broker serves), and the batches below
// it, which must never change.
func (s *Sim) observeISR() {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		for i, p := range n.isrParts {
			if p == nil {
				continue
			}
			_, epoch, leads := p.Leadership()
			if !leads || !(p.CaughtUp(epoch) || s.cfg.ServeBeforeCaughtUp) {
				continue
			}
			s.pchk.onServe(n.id, isrKey(i), p.Log().HighWatermark())
			s.recordCommitted(n, i, p)
		}
	}
}

// recordCommitted hands the checker the batches of a serving leader's log
// below its HW that it has not seen from this replica yet.
func (s *Sim) recordCommitted(n *node, i int, p *isr.Partition) {
	l := p.Log()
	from := max(n.isrSeen[i], l.StartOffset())
	hw := l.HighWatermark()
	for from < hw {
		b, err := l.Read(from, 64<<10, hw)
		if err != nil || len(b) == 0 {
			s.chk.fail("isr partition %d node %d: read committed at %d: %v", i, n.id, from, err)
			return
		}
		bs, next, err := splitBatches(b)
		if err != nil {
			s.chk.fail("isr partition %d node %d: %s", i, n.id, err)
			return
		}
		for _, ba := range bs {
			s.pchk.onAppend(n.id, isrKey(i), ba)
		}
		from = next
	}
	n.isrSeen[i] = from
}

// finishISR waits, after the final heal, until every ISR partition has a
// caught-up leader, every replica back in its ISR and every replica's log
// and HW at the leader's end, and then checks the logs. A partition that
// never gets there is a violation: with at most one node down at a time
// and min.insync.replicas 2, Kafka's rules always leave an electable,
// complete replica.
func (s *Sim) finishISR() {
	if s.ctrl == nil {
		return
	}
	ok := s.until(600, func() bool { return s.isrConverged() })
	for i := range s.cfg.ISRPartitions {
		if !ok {
			p := s.ctrl.meta.View().Topics[isrTopic].Partitions[i]
			s.chk.fail("isr partition %d: not converged within 600 ticks of healing (leader %d, ISR %v, ELR %v): %s", i, p.Leader, p.ISR, p.ELR, s.isrEnds(i))
		}
		logs := map[uint64][]batchAt{}
		for _, n := range s.nodes {
			if i < len(n.isrParts) && n.isrParts[i] != nil {
				logs[n.id] = s.readLog(n.id, isrKey(i), n.isrParts[i].Log())
				s.tchk.check(isrKey(i), n.id, logs[n.id], n.isrParts[i].Log())
			}
		}
		s.pchk.final(isrKey(i), logs)
	}
}

func (s *Sim) isrConverged() bool {
	for _, pr := range s.isrProducers {
		if pr.a != nil {
			return false
		}
	}
	t := s.ctrl.meta.View().Topics[isrTopic]
	for i, cp := range t.Partitions {
		if cp.Leader == 0 || len(cp.ISR) != len(s.nodes) {
			return false
		}
		_, lp := s.isrLeader(i)
		if lp == nil {
			return false
		}
		_, epoch, _ := lp.Leadership()
		end := lp.Log().EndOffset()
		if !lp.CaughtUp(epoch) {
			return false
		}
		for _, n := range s.nodes {
			if i >= len(n.isrParts) || n.isrParts[i] == nil {
				return false
			}
			l := n.isrParts[i].Log()
			if l.EndOffset() != end || l.HighWatermark() != end {
				return false
			}
		}
	}
	return true
}

func (s *Sim) isrEnds(i int) string {
	out := ""
	for _, n := range s.nodes {
		if i < len(n.isrParts) && n.isrParts[i] != nil {
			l := n.isrParts[i].Log()
			_, epoch, leads := n.isrParts[i].Leadership()
			out += fmt.Sprintf("node %d: end %d HW %d epoch %d leads %v; ", n.id, l.EndOffset(), l.HighWatermark(), epoch, leads)
		} else {
			out += fmt.Sprintf("node %d: no replica; ", n.id)
		}
	}
	return out
}

func (s *Sim) isrFlush() string {
	if s.cfg.ISRNoFlush {
		return "9223372036854775807"
	}
	return "1"
}
