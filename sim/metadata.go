package sim

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/coordinator"
	"github.com/raftq/raftq/coordinator/groups"
	"github.com/raftq/raftq/raftgroup"
)

// machines is the simulator's part for the groups that run one of the
// coordinator's real state machines: metadata groups (coordinator.Metadata,
// as group 0 runs it) and offsets groups (groups.Machine, as a
// __consumer_offsets partition runs it). Both are volatile: a restarted
// replica rebuilds from its snapshot and log.
type machines struct {
	states     *stateChecker
	offsets    *offsetChecker
	replicas   map[[2]uint64]*machineReplica // (node, group) -> this incarnation's
	starts     map[uint64]string             // node -> StartID of its process
	metaLoads  []*metaLoad
	groupLoads []*groupLoad
}

func (s *Sim) newMachines() {
	s.mach = &machines{
		states: newStateChecker(s.chk), offsets: newOffsetChecker(s.chk),
		replicas: map[[2]uint64]*machineReplica{}, starts: map[uint64]string{},
	}
	for _, g := range s.metadataGroups() {
		s.mach.metaLoads = append(s.mach.metaLoads, &metaLoad{group: g})
	}
	for _, g := range s.offsetGroups() {
		s.mach.groupLoads = append(s.mach.groupLoads, newGroupLoad(g))
	}
}

// groupCount is the number of groups of every kind: toy 1..Groups, then
// partitions, metadata groups and offsets groups.
func (s *Sim) groupCount() int {
	return s.cfg.Groups + s.cfg.Partitions + s.cfg.MetadataGroups + s.cfg.OffsetGroups
}

func (s *Sim) metadataGroups() []uint64 {
	first := uint64(s.cfg.Groups+s.cfg.Partitions) + 1
	return idRange(first, s.cfg.MetadataGroups)
}

func (s *Sim) offsetGroups() []uint64 {
	first := uint64(s.cfg.Groups+s.cfg.Partitions+s.cfg.MetadataGroups) + 1
	return idRange(first, s.cfg.OffsetGroups)
}

func idRange(first uint64, n int) []uint64 {
	var out []uint64
	for g := first; g < first+uint64(n); g++ {
		out = append(out, g)
	}
	return out
}

func (s *Sim) isMetadata(g uint64) bool { return slices.Contains(s.metadataGroups(), g) }
func (s *Sim) isOffsets(g uint64) bool  { return slices.Contains(s.offsetGroups(), g) }

// machineReplica is a node's replica of a metadata or offsets group: the
// real state machine, with the checkers told of its state after every
// apply and restore.
type machineReplica struct {
	raftgroup.StateMachine // *coordinator.Metadata or *groups.Machine
	s                      *Sim
	node, group            uint64
	kind                   string
	meta                   *coordinator.Metadata // metadata groups
	offs                   *groups.Machine       // offsets groups
}

var (
	_ raftgroup.StateMachine = (*machineReplica)(nil)
	_ raftgroup.ConfIndexer  = (*machineReplica)(nil)
)

// openMachine makes a node's new replica of a metadata or offsets group;
// nil for any other group.
func (s *Sim) openMachine(n *node, g uint64) raftgroup.StateMachine {
	var r *machineReplica
	switch {
	case s.isMetadata(g):
		m := coordinator.NewMetadata()
		r = &machineReplica{StateMachine: m, meta: m, kind: "metadata"}
	case s.isOffsets(g):
		m := groups.NewMachine()
		r = &machineReplica{StateMachine: m, offs: m, kind: "offsets"}
	default:
		return nil
	}
	r.s, r.node, r.group = s, n.id, g
	s.mach.replicas[[2]uint64{n.id, g}] = r
	s.mach.starts[n.id] = fmt.Sprintf("n%d-t%d", n.id, s.now) // a new process
	s.mach.states.onOpen(n.id, g, r.kind, r.digest())
	if r.offs != nil {
		s.mach.offsets.onOpen(n.id, g)
	}
	return r
}

// Apply applies the entry to the real state machine and reports the
// state after it.
func (r *machineReplica) Apply(e raftgroup.Entry) (any, error) {
	if r.meta != nil {
		return r.applyMetadata(e)
	}
	return r.applyOffsets(e)
}

func (r *machineReplica) applyMetadata(e raftgroup.Entry) (any, error) {
	var v any = coordinator.Result{}
	before := r.meta.View()
	if !r.s.cfg.SkipMetadataCommand || !skippedOnNode1(r.node, e) {
		var err error
		if v, err = r.meta.Apply(e); err != nil {
			return v, err
		}
	}
	// A published State is immutable: the same one encodes the same, so
	// a refused command or a no-op need not be encoded again.
	d := r.s.mach.states.current(r.node, r.group)
	if r.meta.View() != before {
		d = r.digest()
	}
	r.s.mach.states.onApply(r.node, r.group, pos{e.Index, e.Sub}, d)
	return v, nil
}

// skippedOnNode1 is the planted SkipMetadataCommand and SkipOffsetCommand
// bugs: node 1 takes every command at an index divisible by 3 for a no-op.
func skippedOnNode1(node uint64, e raftgroup.Entry) bool {
	return node == 1 && len(e.Data) > 0 && e.Index%3 == 0
}

// Restore restores the real state machine and checks the state against
// the others' at the snapshot's index.
func (r *machineReplica) Restore(snap *raftpb.Snapshot) error {
	if err := r.StateMachine.Restore(snap); err != nil {
		return err
	}
	d, idx := r.digest(), snap.GetMetadata().GetIndex()
	if data := snap.GetData(); len(data) > 0 && d != digestOf(data) {
		r.s.chk.fail("%s group %d node %d: the state restored from the snapshot at %d encodes to other bytes than the snapshot", r.kind, r.group, r.node, idx)
	}
	r.s.mach.states.onRestore(r.node, r.group, idx, d)
	if r.offs != nil {
		r.s.mach.offsets.onRestore(r.node, r.group, offsetsOf(r.offs))
	}
	return nil
}

// SkipEntry notes a configuration change, which the state machine never
// sees, so that a snapshot at its index is checked too.
func (r *machineReplica) SkipEntry(index uint64) {
	r.s.mach.states.onSkip(r.node, r.group, index)
}

// fresh returns an empty state machine of r's kind.
func (r *machineReplica) fresh() raftgroup.StateMachine {
	if r.meta != nil {
		return coordinator.NewMetadata()
	}
	return groups.NewMachine()
}

// digest hashes the state as Snapshot encodes it.
func (r *machineReplica) digest() uint64 {
	b, err := r.StateMachine.Snapshot()
	if err != nil {
		r.s.chk.fail("%s group %d node %d: snapshot: %s", r.kind, r.group, r.node, err)
		return 0
	}
	return digestOf(b)
}

// replica returns an up node's replica of a machine group, or nil.
func (s *Sim) replica(n *node, g uint64) *machineReplica {
	if !n.up {
		return nil
	}
	return s.mach.replicas[[2]uint64{n.id, g}]
}

// offerMachines gives the metadata and offsets loads a turn.
func (s *Sim) offerMachines() {
	for _, l := range s.mach.metaLoads {
		s.offerMetadata(l)
	}
	for _, l := range s.mach.groupLoads {
		s.offerGroups(l)
	}
}

func (s *Sim) pollMachines() {
	for _, l := range s.mach.metaLoads {
		s.pollMetadata(l)
	}
	for _, l := range s.mach.groupLoads {
		s.pollGroups(l)
	}
}

// finishMachines commits a last command on every machine group, waits
// until every replica has applied it and all have applied the same
// entries, and checks that they hold the same state.
func (s *Sim) finishMachines() {
	for _, g := range append(s.metadataGroups(), s.offsetGroups()...) {
		marker := &groups.Command{Barrier: &groups.Barrier{}}
		data, err := marker.Encode()
		if s.isMetadata(g) {
			data, err = (&coordinator.Command{AllocateProducerIDs: &coordinator.AllocateProducerIDs{Node: 1, Count: 1}}).Encode()
		}
		if err != nil {
			s.chk.fail("group %d: encode final command: %s", g, err)
			continue
		}
		var p *raftgroup.Proposal
		var at uint64
		ok := s.until(600, func() bool {
			if at == 0 && p != nil {
				select {
				case <-p.Done():
					if res, err := p.Wait(ctxBackground); err == nil {
						at = res.Index
					}
					p = nil
				default:
				}
			}
			if at == 0 {
				if p == nil {
					p = s.proposeLeader(g, data, "final")
				}
				return false
			}
			return s.machinesAt(g, at)
		})
		if !ok {
			s.chk.fail("%s group %d: no final command applied on every replica within 600 ticks of healing", s.mach.states.kind[g], g)
		}
	}
	// Proposals still in flight may commit after the marker.
	s.until(600, s.machinesConverged)
	for _, g := range append(s.metadataGroups(), s.offsetGroups()...) {
		s.finalMachine(g)
	}
}

func (s *Sim) machinesAt(g, index uint64) bool {
	for _, n := range s.nodes {
		if s.replica(n, g) == nil || s.mach.states.last[[2]uint64{n.id, g}].p.Index < index {
			return false
		}
	}
	return true
}

func (s *Sim) machinesConverged() bool {
	for _, g := range append(s.metadataGroups(), s.offsetGroups()...) {
		var ref replicaState
		for i, n := range s.nodes {
			l := s.mach.states.last[[2]uint64{n.id, g}]
			if i == 0 {
				ref = l
			} else if l.p.Index != ref.p.Index {
				return false
			}
		}
	}
	return true
}

// finalMachine checks that every replica of g holds the same state, byte
// for byte, at the same index.
func (s *Sim) finalMachine(g uint64) {
	var ref []byte
	var refNode uint64
	var refAt pos
	for _, n := range s.nodes {
		r := s.replica(n, g)
		if r == nil {
			s.chk.fail("%s group %d: node %d has no replica at the end", s.mach.states.kind[g], g, n.id)
			continue
		}
		b, err := r.Snapshot()
		if err != nil {
			s.chk.fail("%s group %d node %d: snapshot: %s", r.kind, g, n.id, err)
			continue
		}
		if err := r.fresh().Restore(&raftpb.Snapshot{Data: b}); err != nil {
			// Metadata's Restore checks the state's invariants
			// (coordinator/state_check.go), which apply must keep.
			s.chk.fail("%s group %d node %d: the final state does not restore: %s", r.kind, g, n.id, err)
		}
		at := s.mach.states.last[[2]uint64{n.id, g}].p
		switch {
		case ref == nil:
			ref, refNode, refAt = b, n.id, at
		case at.Index != refAt.Index:
			s.chk.fail("%s group %d: node %d ends at index %d, node %d at %d", r.kind, g, n.id, at.Index, refNode, refAt.Index)
		case string(b) != string(ref):
			s.chk.fail("%s group %d: node %d ends with another state than node %d at index %d (%d bytes vs %d)", r.kind, g, n.id, refNode, at.Index, len(b), len(ref))
		}
	}
}

// proposeLeader submits data to the group's believed leader, as a
// coordinator does; nil if none took it.
func (s *Sim) proposeLeader(group uint64, data []byte, what string) *raftgroup.Proposal {
	p, leader := s.proposeToLeader(group, data)
	if p != nil {
		s.traceCommand(what, group, leader, data)
	}
	return p
}

// traceCommand traces a proposal; with Config.Trace its line names the
// proposing node and the command.
func (s *Sim) traceCommand(what string, group, node uint64, data []byte) {
	s.traceEvent(what, group)
	if s.cfg.Trace {
		const max = 160
		cmd := string(data)
		if len(cmd) > max {
			cmd = cmd[:max] + "..."
		}
		s.lines[len(s.lines)-1] += fmt.Sprintf(" from node %d: %s", node, cmd)
	}
}

// metaLoad is the load of one metadata group: what the brokers and the
// controller of a cluster propose to group 0 — registrations, liveness,
// topics, configs, leadership hints, producer ids, reassignments, ISR
// changes, elections, features, shutdowns, maintenance — each proposed,
// as the broker does, by any node (the group forwards proposals to its
// leader) and built from that node's view, which may be stale: some fail
// at apply, as in real use.
type metaLoad struct {
	group    uint64
	inflight []metaProposal
	ids      uint64 // topic ids made
}

type metaProposal struct {
	p        *raftgroup.Proposal
	register uint64 // the node whose registration it is, 0 if none
}

// metaTopics are the topic names the load creates and deletes; two of
// them collide ('.' and '_').
var metaTopics = []string{"orders", "clicks", "logs", "a.b", "a_b"}

// offerMetadata proposes a burst of one to three commands, each from a
// random node.
func (s *Sim) offerMetadata(l *metaLoad) {
	if s.rng.Float64() >= s.cfg.ProposeRate {
		return
	}
	for range 1 + s.rng.IntN(3) {
		if len(l.inflight) < 8 {
			s.proposeMetadata(l, s.nodes[s.rng.IntN(len(s.nodes))])
		}
	}
}

func (s *Sim) proposeMetadata(l *metaLoad, n *node) {
	r := s.replica(n, l.group)
	if r == nil {
		return
	}
	cmd := s.metaCommand(l, n.id, r.meta.View())
	data, err := cmd.Encode()
	if err != nil {
		s.chk.fail("metadata group %d: encode: %s", l.group, err)
		return
	}
	p, err := n.host.Group(l.group).Propose(ctxBackground, data)
	if err != nil {
		return
	}
	mp := metaProposal{p: p}
	if cmd.RegisterBroker != nil {
		mp.register = n.id
	}
	l.inflight = append(l.inflight, mp)
	s.traceCommand("meta", l.group, n.id, data)
}

func (s *Sim) pollMetadata(l *metaLoad) {
	kept := l.inflight[:0]
	for _, mp := range l.inflight {
		p := mp.p
		select {
		case <-p.Done():
		default:
			kept = append(kept, mp)
			continue
		}
		res, err := p.Wait(ctxBackground)
		switch r, ok := res.Value.(coordinator.Result); {
		case err != nil:
			if !expectedFailure(err) {
				s.chk.fail("metadata group %d: proposal failed unexpectedly: %s", l.group, err)
			}
		case !ok:
			s.chk.fail("metadata group %d: command applied with %T", l.group, res.Value)
		case r.Err != nil:
			s.res.Refused++
		default:
			s.res.Commands++
		}
	}
	clear(l.inflight[len(kept):])
	l.inflight = kept
}

// metaCommand is what node proposes next, from its view st: its own
// registration first if the view lacks this process's (one at a time, as
// the controller's registerLoop proposes it), else one command of any
// kind.
func (s *Sim) metaCommand(l *metaLoad, node uint64, st *coordinator.State) *coordinator.Command {
	b, ok := st.Brokers[node]
	if !ok || b.StartID != s.mach.starts[node] {
		if !slices.ContainsFunc(l.inflight, func(mp metaProposal) bool { return mp.register == node }) {
			return &coordinator.Command{RegisterBroker: s.registration(node)}
		}
	}
	brokers := st.BrokerIDs()
	if len(brokers) == 0 {
		return &coordinator.Command{AllocateProducerIDs: &coordinator.AllocateProducerIDs{Node: node, Count: 1000}}
	}
	broker := brokers[s.rng.IntN(len(brokers))]
	name := metaTopics[s.rng.IntN(len(metaTopics))]
	if names := st.TopicNames(); len(names) > 0 && s.rng.IntN(4) > 0 {
		name = names[s.rng.IntN(len(names))] // mostly, requests name topics that exist
	}
	t := st.Topics[name]
	switch s.rng.IntN(18) {
	case 0, 1, 2:
		name = metaTopics[s.rng.IntN(len(metaTopics))]
		return &coordinator.Command{CreateTopic: s.createTopic(l, name, len(brokers))}
	case 3:
		return &coordinator.Command{DeleteTopic: &coordinator.DeleteTopic{Name: name}}
	case 4:
		count := int32(1)
		if t != nil {
			count = int32(len(t.Partitions)) + int32(s.rng.IntN(2)) // adding none fails
		}
		return &coordinator.Command{CreatePartitions: &coordinator.CreatePartitions{Name: name, Count: count}}
	case 5, 6:
		return &coordinator.Command{AlterConfigs: s.alterConfigs(name)}
	case 7:
		return &coordinator.Command{SetAlive: &coordinator.SetAlive{ID: broker, Alive: s.rng.IntN(3) > 0}}
	case 8:
		if p := s.somePartition(t); p != nil {
			hint := coordinator.LeaderHint{Group: p.Group, Leader: p.Replicas[s.rng.IntN(len(p.Replicas))], Term: p.LeaderTerm + uint64(s.rng.IntN(3))}
			return &coordinator.Command{LeaderHints: []coordinator.LeaderHint{hint}} // term +0: stale, ignored
		}
	case 9:
		if p := s.somePartition(t); p != nil {
			return &coordinator.Command{ReassignPartitions: s.reassign(name, p, brokers)}
		}
	case 10:
		if p := s.somePartition(t); p != nil && p.Moving() {
			target := p.Target
			if s.rng.IntN(4) == 0 {
				target = p.Original // retargeted meanwhile: refused
			}
			return &coordinator.Command{CompleteReassignment: &coordinator.CompleteReassignment{Group: p.Group, Target: target}}
		}
	case 11:
		if p := s.somePartition(t); p != nil && t.IsISR() {
			return &coordinator.Command{AlterPartition: s.alterPartition(st, p)}
		}
	case 12:
		if p := s.somePartition(t); p != nil {
			return &coordinator.Command{ElectLeaders: &coordinator.ElectLeaders{Groups: []uint64{p.Group}, Preferred: s.rng.IntN(2) == 0, Unclean: s.rng.IntN(4) == 0}}
		}
	case 13:
		if b := st.Brokers[broker]; s.rng.IntN(3) == 0 {
			return &coordinator.Command{ControlledShutdown: &coordinator.ControlledShutdown{ID: broker, StartID: b.StartID}}
		}
		return &coordinator.Command{UpdateFeatures: &coordinator.UpdateFeatures{EligibleLeaderReplicas: s.rng.IntN(2) == 0}}
	case 14:
		return &coordinator.Command{SetMaintenance: &coordinator.SetMaintenance{ID: broker, On: s.rng.IntN(2) == 0}}
	case 15:
		return &coordinator.Command{Decommission: &coordinator.Decommission{ID: broker, On: s.rng.IntN(3) == 0}}
	case 16:
		// The metadata leader's broker configs, as the controller
		// proposes them when they differ from the state's.
		set := map[string]string{"log.retention.hours": fmt.Sprint(1 + s.rng.IntN(200))}
		if s.rng.IntN(2) == 0 {
			set["log.cleanup.policy"] = "compact"
		}
		if d, err := coordinator.ResolveTopicDefaults(set); err == nil {
			return &coordinator.Command{SetTopicDefaults: &coordinator.SetTopicDefaults{Defaults: d, ConfigVersion: coordinator.CurrentConfigVersion}}
		}
	}
	return &coordinator.Command{AllocateProducerIDs: &coordinator.AllocateProducerIDs{Node: node, Count: 1000}}
}

// registration is the node's RegisterBroker, as its controller proposes
// it on every start; now and then from a data directory that lost its
// state, which is refused.
func (s *Sim) registration(node uint64) *coordinator.Broker {
	inc := fmt.Sprintf("inc-%d", node)
	if s.rng.IntN(20) == 0 {
		inc += "-wiped"
	}
	return &coordinator.Broker{
		ID: node, KafkaAddr: fmt.Sprintf("n%d:9092", node), PeerAddr: fmt.Sprintf("n%d:7000", node),
		AdminAddr: fmt.Sprintf("n%d:8080", node), Rack: fmt.Sprintf("r%d", node%2), Incarnation: inc,
		StartID: s.mach.starts[node], ControlledShutdown: true, SetMaintenance: true, ElectUnclean: true, ResignLostData: true, RestartForgetsLeader: true,
	}
}

// createTopic is a CreateTopics request as the broker turns it into a
// command (broker/createtopics.go); the names repeat, so some exist.
func (s *Sim) createTopic(l *metaLoad, name string, brokers int) *coordinator.CreateTopic {
	l.ids++
	c := &coordinator.CreateTopic{
		Name: name, Partitions: 1 + int32(s.rng.IntN(3)), ReplicationFactor: int16(1 + s.rng.IntN(brokers)),
		Configs: map[string]string{}, RefuseCollision: true, AllowISR: true, ConfigVersion: coordinator.CurrentConfigVersion,
	}
	c.ID[0], c.ID[15] = byte(l.group), byte(l.ids)
	c.ID[1], c.ID[2] = byte(l.ids>>8), byte(s.rng.IntN(256))
	switch s.rng.IntN(5) {
	case 0:
		c.Configs["replication.mode"], c.Configs["min.insync.replicas"] = coordinator.ModeISR, fmt.Sprint(1+s.rng.IntN(2))
	case 1:
		c.Configs["replication.mode"] = coordinator.ModeISR
		c.Configs["unclean.leader.election.enable"] = "true"
	case 2:
		c.Configs["retention.ms"] = fmt.Sprint(60_000 * (s.rng.IntN(10) - 1)) // -60000 is refused
	case 3:
		c.Configs["cleanup.policy"] = "compact"
	}
	return c
}

// alterConfigs is an IncrementalAlterConfigs (or, with Replace, the older
// AlterConfigs) as the broker turns it into a command.
func (s *Sim) alterConfigs(name string) *coordinator.AlterConfigs {
	ac := &coordinator.AlterConfigs{Name: name, Set: map[string]string{}, ConfigVersion: coordinator.CurrentConfigVersion}
	switch s.rng.IntN(5) {
	case 0:
		ac.Set["retention.ms"] = fmt.Sprint(60_000 * (s.rng.IntN(10) - 1))
	case 1:
		ac.Delete = []string{"retention.ms"}
	case 2:
		ac.Set["min.insync.replicas"] = fmt.Sprint(1 + s.rng.IntN(3)) // refused on raft topics, and above the RF
	case 3:
		ac.Set["replication.mode"] = coordinator.ModeISR // refused unless it is one
	default:
		ac.Set["segment.bytes"], ac.Replace = "1048576", true
	}
	return ac
}

// somePartition is a random partition of t, or nil.
func (s *Sim) somePartition(t *coordinator.Topic) *coordinator.Partition {
	if t == nil || len(t.Partitions) == 0 {
		return nil
	}
	return &t.Partitions[s.rng.IntN(len(t.Partitions))]
}

// reassign moves p to random brokers, or cancels its move.
func (s *Sim) reassign(name string, p *coordinator.Partition, brokers []uint64) *coordinator.ReassignPartitions {
	it := coordinator.ReassignItem{Topic: name, Partition: p.Index}
	if p.Moving() && s.rng.IntN(2) == 0 {
		it.Cancel = true
	} else {
		perm := s.rng.Perm(len(brokers))
		for _, i := range perm[:1+s.rng.IntN(len(brokers))] {
			it.Replicas = append(it.Replicas, brokers[i])
		}
	}
	return &coordinator.ReassignPartitions{Items: []coordinator.ReassignItem{it}, AllowReplicationFactorChange: s.rng.IntN(4) > 0}
}

// alterPartition is an ISR partition leader's AlterPartition: its ISR
// shrunk to itself or grown to every replica, with the epochs it knows.
func (s *Sim) alterPartition(st *coordinator.State, p *coordinator.Partition) *coordinator.AlterPartition {
	it := coordinator.AlterPartitionItem{Group: p.Group, Leader: p.Leader, LeaderEpoch: int32(p.LeaderTerm), PartitionEpoch: p.PartitionEpoch}
	members := []uint64{p.Leader}
	if s.rng.IntN(2) == 0 {
		members = p.Replicas
	}
	for _, id := range members {
		var epoch uint64
		if b := st.Brokers[id]; b != nil {
			epoch = b.Epoch
		}
		it.ISR = append(it.ISR, coordinator.ISRMember{ID: id, BrokerEpoch: epoch})
	}
	if s.rng.IntN(5) == 0 {
		it.PartitionEpoch-- // a stale view: refused
	}
	return &coordinator.AlterPartition{Items: []coordinator.AlterPartitionItem{it}}
}
