package coordinator

import (
	"slices"
	"sort"

	"github.com/raftq/raftq/auth"
)

// MetadataGroup is the raft group id of the cluster metadata group.
const MetadataGroup uint64 = 0

// Broker is one registered node.
type Broker struct {
	ID        uint64 `json:"id"`
	KafkaAddr string `json:"kafka_addr"` // advertised host:port for Kafka clients
	PeerAddr  string `json:"peer_addr"`
	AdminAddr string `json:"admin_addr"`
	Rack      string `json:"rack,omitempty"`
	// Incarnation names the data directory the broker registered from. A
	// registration of the same id from another one is refused: that node
	// lost the raft logs this one acknowledged.
	Incarnation string `json:"incarnation,omitempty"`
	// Alive is decided by the metadata leader from raft liveness and
	// replicated, so every node agrees on whom to place replicas on. In
	// ISR mode a broker that is not alive is fenced: it leaves every ISR
	// and may not lead.
	Alive bool `json:"alive"`
	// Epoch is the raft index of the broker's latest registration, set at
	// apply (Kafka's broker epoch, KIP-903). An AlterPartition names each
	// ISR member with the epoch it last saw, so a replica that restarted
	// since cannot be added back on the strength of its old fetch state.
	Epoch uint64 `json:"epoch,omitempty"`
	// StartID names one start of the broker's process (random per start).
	// A registration with a new one is a restart: the broker is fenced,
	// then unfenced, so that it leaves every ISR and must catch up again.
	StartID string `json:"start_id,omitempty"`
	// ShuttingDown marks a broker in controlled shutdown (KIP-841), set
	// by ControlledShutdown: it has left every ISR as fencing leaves
	// them (an ISR's last member stays with ELR off), leads no ISR
	// partition, and may neither join an ISR nor lead nor be handed a
	// raft partition's leadership by leader balance, alive or not, until
	// it registers with a new StartID. Only that command sets it, so no
	// entry written before it applies differently.
	ShuttingDown bool `json:"shutting_down,omitempty"`
	// ControlledShutdown says the broker's binary applies
	// ControlledShutdown commands; every broker of this version
	// registers with it. A drain proposes one only when every registered
	// broker does: a node of an older version would refuse the command
	// at apply (an empty command to it) while the others applied it, and
	// their metadata, ISR leaders included, would diverge.
	ControlledShutdown bool `json:"controlled_shutdown,omitempty"`
	// Decommissioned marks a broker being emptied (Decommission): no new
	// replica is placed on it, and the metadata leader moves every
	// replica it holds to other brokers. RemoveBroker may then delete it.
	Decommissioned bool `json:"decommissioned,omitempty"`
	// InMaintenance marks the broker in maintenance mode (Redpanda's),
	// set and cleared by SetMaintenance only, so no entry written before
	// it applies differently: it stays in every ISR and replicates, but
	// ISR elections pick it only when no other ISR member may lead,
	// leader balance hands it nothing, and the node hands every raft
	// leadership it holds, group 0's too, to other replicas. At most
	// one broker is in maintenance. A registration keeps it, so it
	// survives the node's restarts.
	InMaintenance bool `json:"in_maintenance,omitempty"`
	// SetMaintenance and ElectUnclean say, as ControlledShutdown does,
	// that the broker's binary applies SetMaintenance commands and
	// ElectLeaders.Unclean; they are proposed only when every registered
	// broker does.
	SetMaintenance bool `json:"set_maintenance,omitempty"`
	ElectUnclean   bool `json:"elect_unclean,omitempty"`
	// ResignLostData says the binary applies AlterPartitionItem.LostData
	// and LogEnd; they are proposed only when every registered broker
	// does.
	ResignLostData bool `json:"resign_lost_data,omitempty"`
	// ACLs says the binary applies CreateACLs and DeleteACLs (acl.go);
	// they are proposed only when every registered broker does.
	ACLs bool `json:"acls,omitempty"`
	// Scram says the binary applies AlterScramCredentials (scram.go); it
	// is proposed only when every registered broker does.
	Scram bool `json:"scram,omitempty"`
	// RestartForgetsLeader asks that this registration, when it is a
	// restart, also end the broker's place as any partition's last
	// known leader: a disk can lose synced records at a log's end in a
	// way no check finds, so a restarted last leader is not trusted to
	// hold every committed record, and a partition with no ISR or ELR
	// left goes to unclean recovery instead. Registrations without it
	// (logs of earlier binaries) replay as before.
	RestartForgetsLeader bool `json:"restart_forgets_leader,omitempty"`
	// Listeners are the advertised addresses of the broker's Kafka
	// listeners by name (Kafka's advertised.listeners), so that a
	// client is answered with the addresses of the listener it came in
	// on. KafkaAddr is the inter-broker listener's, and every address
	// of a registration without Listeners.
	Listeners map[string]string `json:"listeners,omitempty"`
}

// AddrFor is b's advertised address on the named listener: KafkaAddr
// when b has no such listener.
func (b *Broker) AddrFor(listener string) string {
	if a, ok := b.Listeners[listener]; ok {
		return a
	}
	return b.KafkaAddr
}

// Eligible reports whether b may lead partitions and join ISRs: alive
// (not fenced) and not in controlled shutdown.
func (b *Broker) Eligible() bool { return b.Alive && !b.ShuttingDown }

// TakesLeadership reports whether leadership may be handed to b by
// choice (leader balance, a preferred election, a drain's hand-over):
// eligible and not in maintenance.
func (b *Broker) TakesLeadership() bool { return b.Eligible() && !b.InMaintenance }

// Partition is one partition of a topic and the raft group that replicates it.
type Partition struct {
	Index    int32    `json:"index"`
	Group    uint64   `json:"group"`
	Replicas []uint64 `json:"replicas"` // the first is the preferred leader
	// Target and Original are a reassignment's (reassign.go): the list
	// the partition moves to and the one it moved from, both empty unless
	// a move is under way. Replicas is then Target followed by every other
	// broker that may hold a copy, so that none drops it too soon.
	Target   []uint64 `json:"target,omitempty"`
	Original []uint64 `json:"original,omitempty"`
	// Moved says a reassignment has changed the partition's raft group
	// since the group was created: a replica opened empty then joins the
	// group instead of founding it with Replicas as its first voters.
	Moved bool `json:"moved,omitempty"`
	// Leader and LeaderTerm are, in raft mode, the newest leadership
	// hint: the node that last reported winning an election for Group,
	// and its raft term. In ISR mode they are authoritative: the leader
	// group 0 elected (0: none) and its leader epoch.
	Leader     uint64 `json:"leader,omitempty"`
	LeaderTerm uint64 `json:"leader_term,omitempty"`

	// The fields below are ISR mode's only, and empty in raft mode.

	// ISR is the in-sync replica set, in replica order. Only group 0
	// changes it (AlterPartition, fencing, elections).
	ISR []uint64 `json:"isr,omitempty"`
	// ELR holds the eligible leader replicas (KIP-966): replicas that left
	// the ISR while it was below min.insync.replicas, so that they still
	// hold every committed record. Empty unless the cluster enables ELR.
	ELR []uint64 `json:"elr,omitempty"`
	// LastKnownLeader is the leader when the ISR became empty with ELR
	// on: the replica of last resort when ISR and ELR are both empty.
	LastKnownLeader uint64 `json:"last_known_leader,omitempty"`
	// PartitionEpoch grows with every change of the ISR mode fields; an
	// AlterPartition must name the current one (compare-and-set).
	PartitionEpoch int32 `json:"partition_epoch,omitempty"`
	// Recovering marks a leader chosen by an unclean election, until it
	// reports itself recovered through AlterPartition.
	Recovering bool `json:"recovering,omitempty"`
	// LogEnds are the replicas' reports of their logs while the partition
	// is offline, with no leader, ISR, ELR or last known leader (KIP-966's
	// unclean recovery, recover.go): once every replica has reported, the
	// one whose log ends at the newest epoch, furthest, leads.
	LogEnds []ReplicaLogEnd `json:"log_ends,omitempty"`
}

// ReplicaLogEnd is where a replica's log ends: its last leader epoch and
// its end offset.
type ReplicaLogEnd struct {
	Broker    uint64 `json:"broker"`
	LastEpoch int32  `json:"last_epoch"`
	End       int64  `json:"end"`
	// LostData says the replica's log lost durable records (it would
	// resign if elected): its report counts as made, so that it does
	// not hold the others up, but it is never chosen. Reports of
	// earlier binaries lack it and are chosen as they were.
	LostData bool `json:"lost_data,omitempty"`
}

// HasReplica reports whether node hosts a replica of p.
func (p *Partition) HasReplica(node uint64) bool {
	return slices.Contains(p.Replicas, node)
}

// Topic is a topic's placement and configuration. A *Topic reachable from a
// published State is never modified; changes copy it.
type Topic struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Internal   bool              `json:"internal,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"` // only values set explicitly
	Partitions []Partition       `json:"partitions"`
	// defaults are the cluster's topic defaults (State.TopicDefaults) of
	// the state that holds t, for Config; not encoded. Every topic of a
	// published State has its State's (linkDefaults; state_check.go).
	defaults TopicDefaults
}

// Config returns the topic's value for a config key: its own, else the
// cluster's default from broker configs (ClusterDefault), else Kafka's
// default in TopicConfigDefs.
func (t *Topic) Config(key string) string {
	if v, ok := t.Configs[key]; ok {
		return v
	}
	if d, ok := t.defaults[key]; ok {
		return d.Value
	}
	if d, ok := topicConfigDefs[key]; ok {
		return d.Default
	}
	return ""
}

// ClusterDefault returns the cluster's default of config key, which t
// takes unless it sets its own: the broker configs that set it
// (log.retention.hours for retention.ms), as group 0 holds them.
func (t *Topic) ClusterDefault(key string) (TopicDefault, bool) {
	d, ok := t.defaults[key]
	return d, ok
}

// IsISR reports whether t replicates in ISR mode (replication.mode=isr):
// group 0 then elects its partitions' leaders and owns their ISR.
func (t *Topic) IsISR() bool { return t.Config("replication.mode") == ModeISR }

// ReplicationFactor is the number of replicas of the topic's partitions.
func (t *Topic) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// State is the whole cluster metadata at one applied index. A published
// *State is immutable; Apply produces a new one.
type State struct {
	// Index is the raft index of the last applied entry that changed state.
	Index          uint64             `json:"index"`
	Brokers        map[uint64]*Broker `json:"brokers"`
	Topics         map[string]*Topic  `json:"topics"`
	NextGroup      uint64             `json:"next_group"`
	NextProducerID int64              `json:"next_producer_id"`
	// EligibleLeaderReplicas turns on KIP-966 for every ISR partition. It
	// is cluster-wide, as Kafka's eligible.leader.replicas.version
	// feature is, and lives in the replicated state because elections run
	// at apply: a per-node flag could make replicas of group 0 disagree.
	// UpdateFeatures sets it.
	EligibleLeaderReplicas bool `json:"eligible_leader_replicas,omitempty"`
	// TopicDefaults are the cluster's defaults of topic configs, from the
	// broker configs (log.retention.ms, log.cleanup.policy, ...) of the
	// metadata leader that last proposed SetTopicDefaults. They live here,
	// not in each node's flags, because every replica of a partition must
	// resolve a default the same way (retention and compaction remove
	// records on every replica), and so must apply (min.insync.replicas
	// and unclean election of ISR topics).
	TopicDefaults TopicDefaults `json:"topic_defaults,omitempty"`
	// RemovedIncarnations are the data directories of removed brokers
	// (RemoveBroker): none may register again.
	RemovedIncarnations []string `json:"removed_incarnations,omitempty"`
	// Removed are the ids of removed brokers, until a node is admitted
	// under the id again: group 0 drops them from its configuration.
	// Sorted; replaced on write.
	Removed []uint64 `json:"removed,omitempty"`
	// Admitted are the nodes that joined a running cluster (AdmitNode,
	// admit.go), by id. Replaced on write, never modified in place.
	Admitted map[uint64]*Admission `json:"admitted,omitempty"`
	// ScramUsers are the SASL/SCRAM users by name (scram.go). Replaced
	// on write, never modified in place.
	ScramUsers map[string]*ScramUser `json:"scram_users,omitempty"`
	// ScramDecoyKey seeds the decoy credentials of unknown SASL users
	// (auth.Lookup.DecoyKey): drawn by the proposer of the first
	// AlterScramCredentials, never sent to a client. Empty until then.
	ScramDecoyKey []byte `json:"scram_decoy_key,omitempty"`
	// ACLs are Kafka's ACL bindings, each once, in the order created
	// (acl.go). Replaced on write, never modified in place.
	ACLs []auth.ACL `json:"acls,omitempty"`
}

func newState() *State {
	return &State{
		Brokers:   map[uint64]*Broker{},
		Topics:    map[string]*Topic{},
		NextGroup: MetadataGroup + 1,
	}
}

// clone copies the maps of s; the values they point to are shared and
// treated as immutable.
func (s *State) clone() *State {
	c := *s
	c.Brokers = make(map[uint64]*Broker, len(s.Brokers))
	for k, v := range s.Brokers {
		c.Brokers[k] = v
	}
	c.Topics = make(map[string]*Topic, len(s.Topics))
	for k, v := range s.Topics {
		c.Topics[k] = v
	}
	return &c
}

// InMaintenance returns the broker in maintenance mode, 0 if none.
func (s *State) InMaintenance() uint64 {
	for id, b := range s.Brokers {
		if b.InMaintenance {
			return id
		}
	}
	return 0
}

// BrokerIDs returns the ids of all registered brokers, sorted.
func (s *State) BrokerIDs() []uint64 {
	ids := make([]uint64, 0, len(s.Brokers))
	for id := range s.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TopicNames returns all topic names, sorted.
func (s *State) TopicNames() []string {
	names := make([]string, 0, len(s.Topics))
	for n := range s.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PartitionRef names one partition in State.
type PartitionRef struct {
	Topic     *Topic
	Partition *Partition
}

// PartitionsOf returns every partition with a replica on node, in topic and
// index order.
func (s *State) PartitionsOf(node uint64) []PartitionRef {
	var out []PartitionRef
	for _, name := range s.TopicNames() {
		t := s.Topics[name]
		for i := range t.Partitions {
			if t.Partitions[i].HasReplica(node) {
				out = append(out, PartitionRef{t, &t.Partitions[i]})
			}
		}
	}
	return out
}

// TopicByID finds a topic by its id.
func (s *State) TopicByID(id [16]byte) (*Topic, bool) {
	for _, t := range s.Topics {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}

// PartitionByGroup finds the partition replicated by raft group g.
func (s *State) PartitionByGroup(g uint64) (PartitionRef, bool) {
	for _, t := range s.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Group == g {
				return PartitionRef{t, &t.Partitions[i]}, true
			}
		}
	}
	return PartitionRef{}, false
}
