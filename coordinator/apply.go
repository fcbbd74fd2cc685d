package coordinator

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// apply changes s (a private clone) by c, the entry at raft index index.
// A returned Result.Err is the command's failure, reported to the
// proposer; s is then discarded.
func apply(s *State, c *Command, index uint64) Result {
	switch {
	case c.RegisterBroker != nil:
		return s.registerBroker(c.RegisterBroker, index)
	case c.SetAlive != nil:
		return s.setAlive(c.SetAlive)
	case c.CreateTopic != nil:
		return s.createTopic(c.CreateTopic)
	case c.DeleteTopic != nil:
		return s.deleteTopic(c.DeleteTopic)
	case c.CreatePartitions != nil:
		return s.createPartitions(c.CreatePartitions)
	case c.AlterConfigs != nil:
		return s.alterConfigs(c.AlterConfigs)
	case c.AllocateProducerIDs != nil:
		return s.allocateProducerIDs(c.AllocateProducerIDs)
	case len(c.LeaderHints) > 0:
		return s.leaderHints(c.LeaderHints)
	case c.AlterPartition != nil:
		return s.alterPartition(c.AlterPartition)
	case c.ElectLeaders != nil:
		return s.electLeaders(c.ElectLeaders)
	case c.UpdateFeatures != nil:
		return s.updateFeatures(c.UpdateFeatures)
	case c.SetTopicDefaults != nil:
		return s.setTopicDefaults(c.SetTopicDefaults)
	case c.ControlledShutdown != nil:
		return s.controlledShutdown(c.ControlledShutdown)
	case c.ReassignPartitions != nil:
		return s.reassignPartitions(c.ReassignPartitions)
	case c.CompleteReassignment != nil:
		return s.completeReassignment(c.CompleteReassignment)
	case c.Decommission != nil:
		return s.decommission(c.Decommission)
	case c.RemoveBroker != nil:
		return s.removeBroker(c.RemoveBroker)
	case c.AdmitNode != nil:
		return s.admitNode(c.AdmitNode, index)
	case c.SetMaintenance != nil:
		return s.setMaintenance(c.SetMaintenance)
	case c.AlterScramCredentials != nil:
		return s.alterScramCredentials(c.AlterScramCredentials)
	case c.CreateACLs != nil:
		return s.createACLs(c.CreateACLs)
	case c.DeleteACLs != nil:
		return s.deleteACLs(c.DeleteACLs)
	}
	return Result{Err: cmdErr(kerr.InvalidRequest, "empty metadata command")}
}

// registerBroker records a registration; its index becomes the broker's
// epoch. A new StartID means the process restarted: in ISR mode the
// broker is fenced first, as KRaft fences the old incarnation before it
// accepts the new one, so that it leaves every ISR and ELR and must catch
// up again. Registering also makes the broker alive (unfenced). Only a
// new StartID ends a controlled shutdown: a registration of the same
// start (new addresses, say) keeps it. No registration ends maintenance
// mode: only SetMaintenance does.
func (s *State) registerBroker(b *Broker, index uint64) Result {
	if b.ID == 0 {
		return Result{Err: cmdErr(kerr.InvalidRequest, "broker id 0 is reserved")}
	}
	if old, ok := s.Brokers[b.ID]; ok && old.Incarnation != "" && old.Incarnation != b.Incarnation {
		return Result{Err: cmdErr(kerr.InconsistentClusterID,
			"broker %d is registered from data directory incarnation %s, not %q: a node that lost its data must not rejoin under its old id",
			b.ID, old.Incarnation, b.Incarnation)}
	}
	if b.Incarnation != "" && slices.Contains(s.RemovedIncarnations, b.Incarnation) {
		return Result{Err: cmdErr(kerr.InconsistentClusterID,
			"broker %d: data directory incarnation %s belongs to a removed broker; start it on an empty data directory to rejoin", b.ID, b.Incarnation)}
	}
	if err := s.checkAdmitted(b); err != nil { // admit.go; no entry before AdmitNode has one
		return Result{Err: err}
	}
	old, known := s.Brokers[b.ID]
	restarted := known && old.StartID != b.StartID
	if restarted {
		s.fenceISR(b.ID, true, b.RestartForgetsLeader)
	}
	nb := *b
	nb.Alive = true
	nb.Epoch = index
	nb.ShuttingDown = known && !restarted && old.ShuttingDown
	nb.Decommissioned = known && old.Decommissioned
	nb.InMaintenance = known && old.InMaintenance // only SetMaintenance changes it
	s.Brokers[b.ID] = &nb
	if restarted || known && !old.Alive {
		s.unfenceISR(b.ID)
	}
	return Result{}
}

func (s *State) setAlive(a *SetAlive) Result {
	b, ok := s.Brokers[a.ID]
	if !ok {
		return Result{Err: cmdErr(kerr.BrokerNotAvailable, "broker %d is not registered", a.ID)}
	}
	nb := *b
	nb.Alive = a.Alive
	s.Brokers[a.ID] = &nb
	switch {
	case b.Alive && !a.Alive:
		s.fenceISR(a.ID, false, false)
	case !b.Alive && a.Alive:
		s.unfenceISR(a.ID)
	}
	return Result{}
}

func (s *State) createTopic(c *CreateTopic) Result {
	if err := ValidateTopicName(c.Name); err != nil {
		return Result{Err: err}
	}
	if _, ok := s.Topics[c.Name]; ok {
		return Result{Err: cmdErr(kerr.TopicAlreadyExists, "topic %q already exists", c.Name)}
	}
	if other, ok := s.collidesWith(c.Name); ok && c.RefuseCollision {
		// As Kafka: '.' and '_' become the same character in metric names.
		return Result{Err: cmdErr(kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' are the same in metric names)", c.Name, other)}
	}
	if _, ok := s.TopicByID(c.ID); ok || c.ID == ([16]byte{}) {
		return Result{Err: cmdErr(kerr.InvalidRequest, "topic id %x is zero or taken", c.ID)}
	}
	if err := validateTopicConfigs(c.Configs, c.AllowISR, c.ConfigVersion); err != nil {
		return Result{Err: cmdErr(kerr.InvalidConfig, "%s", err)}
	}
	t := &Topic{Name: c.Name, ID: c.ID, Internal: c.Internal, Configs: maps.Clone(c.Configs), defaults: s.TopicDefaults}
	if err := s.addPartitions(t, c.Partitions, int(c.ReplicationFactor), c.Assignment); err != nil {
		return Result{Err: err}
	}
	if t.IsISR() {
		if err := s.initISR(t, 0); err != nil {
			return Result{Err: err}
		}
	}
	s.Topics[t.Name] = t
	return Result{Topic: t}
}

// addPartitions grows t to count partitions, placing new ones by assignment
// or by the placement policy, and allocating their raft groups.
func (s *State) addPartitions(t *Topic, count int32, rf int, assignment [][]uint64) error {
	have := int32(len(t.Partitions))
	if count <= have || count > maxPartitions {
		return cmdErr(kerr.InvalidPartitions, "partition count %d must exceed %d and be at most %d", count, have, maxPartitions)
	}
	if assignment != nil && len(assignment) != int(count-have) {
		return cmdErr(kerr.InvalidReplicaAssignment, "%d assignments for %d new partitions", len(assignment), count-have)
	}
	placer := newPlacer(s)
	for i := have; i < count; i++ {
		var replicas []uint64
		var err error
		if assignment != nil {
			replicas, err = s.checkAssignment(assignment[i-have])
		} else {
			replicas, err = placer.place(rf)
		}
		if err != nil {
			return err
		}
		placer.count(replicas)
		t.Partitions = append(t.Partitions, Partition{Index: i, Group: s.NextGroup, Replicas: replicas})
		s.NextGroup++
	}
	return nil
}

const maxPartitions = 100_000

func (s *State) checkAssignment(replicas []uint64) ([]uint64, error) {
	if len(replicas) == 0 {
		return nil, cmdErr(kerr.InvalidReplicaAssignment, "empty replica list")
	}
	seen := map[uint64]bool{}
	for _, r := range replicas {
		if _, ok := s.Brokers[r]; !ok || seen[r] {
			return nil, cmdErr(kerr.InvalidReplicaAssignment, "replica %d is unknown or repeated", r)
		}
		seen[r] = true
	}
	return slices.Clone(replicas), nil
}

func (s *State) deleteTopic(c *DeleteTopic) Result {
	t, ok := s.Topics[c.Name]
	if !ok {
		return Result{Err: cmdErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", c.Name)}
	}
	if t.Internal {
		return Result{Err: cmdErr(kerr.TopicAuthorizationFailed, "topic %q is internal", c.Name)}
	}
	delete(s.Topics, c.Name)
	return Result{Topic: t}
}

func (s *State) createPartitions(c *CreatePartitions) Result {
	old, ok := s.Topics[c.Name]
	if !ok {
		return Result{Err: cmdErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", c.Name)}
	}
	if old.Internal {
		// More offsets partitions would move groups to other coordinators.
		return Result{Err: cmdErr(kerr.InvalidRequest, "topic %q is internal; its partition count is fixed", c.Name)}
	}
	t := old.copy()
	if err := s.addPartitions(t, c.Count, old.ReplicationFactor(), nil); err != nil {
		return Result{Err: err}
	}
	if t.IsISR() {
		if err := s.initISR(t, len(old.Partitions)); err != nil {
			return Result{Err: err}
		}
	}
	s.Topics[t.Name] = t
	return Result{Topic: t}
}

func (s *State) alterConfigs(c *AlterConfigs) Result {
	old, ok := s.Topics[c.Name]
	if !ok {
		return Result{Err: cmdErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", c.Name)}
	}
	t := old.copy()
	if t.Configs == nil || c.Replace {
		t.Configs = map[string]string{}
	}
	maps.Copy(t.Configs, c.Set)
	for _, k := range c.Delete {
		delete(t.Configs, k)
	}
	// An ISR topic keeps its mode, so its configs pass the reserved-mode
	// refusal; any other topic is refused the mode as before.
	if err := validateTopicConfigs(t.Configs, old.IsISR(), c.ConfigVersion); err != nil {
		return Result{Err: cmdErr(kerr.InvalidConfig, "%s", err)}
	}
	if err := modeChange(old, t.Config("replication.mode"), c.Set, c.Replace); err != nil {
		return Result{Err: err}
	}
	if t.IsISR() {
		// No entry written before ISR mode holds an ISR topic, so this
		// rule changes no old entry's outcome.
		if err := checkMinISR(t.Configs, t.ReplicationFactor()); err != nil {
			return Result{Err: err}
		}
		s.reelectISR(t)
	}
	s.Topics[t.Name] = t
	return Result{Topic: t}
}

func (s *State) allocateProducerIDs(a *AllocateProducerIDs) Result {
	if a.Count <= 0 || a.Count > 1<<20 {
		return Result{Err: cmdErr(kerr.InvalidRequest, "producer id block of %d", a.Count)}
	}
	start := s.NextProducerID
	s.NextProducerID += a.Count
	return Result{ProducerIDStart: start}
}

func (s *State) leaderHints(hints []LeaderHint) Result {
	for _, h := range hints {
		ref, ok := s.PartitionByGroup(h.Group)
		if !ok || h.Term <= ref.Partition.LeaderTerm || !ref.Partition.HasReplica(h.Leader) {
			continue // stale, or the topic is gone
		}
		if ref.Topic.IsISR() {
			continue // group 0 elects ISR leaders; a hint must not move one
		}
		t := ref.Topic.copy()
		p := &t.Partitions[ref.Partition.Index]
		p.Leader, p.LeaderTerm = h.Leader, h.Term
		s.Topics[t.Name] = t
	}
	return Result{}
}

// copy returns a copy of t that may be changed without touching t.
func (t *Topic) copy() *Topic {
	c := *t
	c.Configs = maps.Clone(t.Configs)
	c.Partitions = slices.Clone(t.Partitions)
	return &c
}

// collidesWith returns an existing topic whose name differs from name
// only by '.' against '_'.
func (s *State) collidesWith(name string) (string, bool) {
	key := strings.ReplaceAll(name, ".", "_")
	for other := range s.Topics {
		if strings.ReplaceAll(other, ".", "_") == key {
			return other, true
		}
	}
	return "", false
}

// ValidateTopicName applies Kafka's topic naming rules.
func ValidateTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return cmdErr(kerr.InvalidTopicException, "topic name %q is empty, '.', '..' or longer than 249", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return cmdErr(kerr.InvalidTopicException, "topic name %q has %q; use [a-zA-Z0-9._-]", name, r)
		}
	}
	return nil
}
