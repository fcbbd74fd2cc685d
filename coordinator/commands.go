package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/raftq/raftq/auth"
)

// Command is one change to the metadata, proposed to group 0. Exactly one
// field is set.
type Command struct {
	RegisterBroker       *Broker               `json:"register_broker,omitempty"`
	SetAlive             *SetAlive             `json:"set_alive,omitempty"`
	CreateTopic          *CreateTopic          `json:"create_topic,omitempty"`
	DeleteTopic          *DeleteTopic          `json:"delete_topic,omitempty"`
	CreatePartitions     *CreatePartitions     `json:"create_partitions,omitempty"`
	AlterConfigs         *AlterConfigs         `json:"alter_configs,omitempty"`
	AllocateProducerIDs  *AllocateProducerIDs  `json:"allocate_producer_ids,omitempty"`
	LeaderHints          []LeaderHint          `json:"leader_hints,omitempty"`
	AlterPartition       *AlterPartition       `json:"alter_partition,omitempty"`
	ElectLeaders         *ElectLeaders         `json:"elect_leaders,omitempty"`
	UpdateFeatures       *UpdateFeatures       `json:"update_features,omitempty"`
	SetTopicDefaults     *SetTopicDefaults     `json:"set_topic_defaults,omitempty"`
	ControlledShutdown   *ControlledShutdown   `json:"controlled_shutdown,omitempty"`
	ReassignPartitions   *ReassignPartitions   `json:"reassign_partitions,omitempty"`
	CompleteReassignment *CompleteReassignment `json:"complete_reassignment,omitempty"`
	Decommission         *Decommission         `json:"decommission,omitempty"`
	RemoveBroker         *RemoveBroker         `json:"remove_broker,omitempty"`
	AdmitNode            *AdmitNode            `json:"admit_node,omitempty"`      // admit.go
	SetMaintenance       *SetMaintenance       `json:"set_maintenance,omitempty"` // maintenance.go
	// AlterScramCredentials changes a user's SASL/SCRAM credentials
	// (scram.go).
	AlterScramCredentials *AlterScramCredentials `json:"alter_scram_credentials,omitempty"`
	// CreateACLs and DeleteACLs change the ACLs (acl.go).
	CreateACLs *CreateACLs `json:"create_acls,omitempty"`
	DeleteACLs *DeleteACLs `json:"delete_acls,omitempty"`
}

// SetAlive marks a broker alive or not.
type SetAlive struct {
	ID    uint64 `json:"id"`
	Alive bool   `json:"alive"`
}

// CreateTopic creates a topic. Assignment, if given, fixes each partition's
// replicas; otherwise placement spreads them over live brokers.
type CreateTopic struct {
	Name              string            `json:"name"`
	ID                [16]byte          `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
	Internal          bool              `json:"internal,omitempty"`
	Assignment        [][]uint64        `json:"assignment,omitempty"`
	// RefuseCollision refuses a name that differs from an existing
	// topic's only by '.' against '_', as Kafka does. It is a field that
	// every proposer sets, rather than a rule of apply, so that entries
	// written without it replay as they were applied (coordinator/doc.go,
	// "Versions").
	RefuseCollision bool `json:"refuse_collision,omitempty"`
	// AllowISR lets replication.mode=isr through. Without it the mode is
	// refused as reserved, as every entry written before ISR mode was
	// refused, so that such an entry replays as it was applied. The
	// broker's CreateTopics sets it, as it sets RefuseCollision.
	AllowISR bool `json:"allow_isr,omitempty"`
	// ConfigVersion is the topic config version (CurrentConfigVersion)
	// the proposer validated against; 0 in entries written before it.
	ConfigVersion int `json:"config_version,omitempty"`
}

// DeleteTopic deletes a topic and, on every node, its partitions' data.
type DeleteTopic struct {
	Name string `json:"name"`
}

// CreatePartitions raises a topic's partition count to Count.
type CreatePartitions struct {
	Name  string `json:"name"`
	Count int32  `json:"count"`
}

// AlterConfigs sets (Set) and removes (Delete) explicit topic configs.
// With Replace, Set becomes the topic's whole set of explicit configs
// (the older, non-incremental AlterConfigs API).
type AlterConfigs struct {
	Name    string            `json:"name"`
	Set     map[string]string `json:"set,omitempty"`
	Delete  []string          `json:"delete,omitempty"`
	Replace bool              `json:"replace,omitempty"`
	// ConfigVersion is as in CreateTopic.
	ConfigVersion int `json:"config_version,omitempty"`
}

// AllocateProducerIDs reserves Count producer ids for a node.
type AllocateProducerIDs struct {
	Node  uint64 `json:"node"`
	Count int64  `json:"count"`
}

// LeaderHint reports that Leader won the election of Group in Term.
type LeaderHint struct {
	Group  uint64 `json:"group"`
	Leader uint64 `json:"leader"`
	Term   uint64 `json:"term"`
}

// AlterPartition asks for new ISRs, one item per partition, as Kafka's
// AlterPartition (KIP-497) does. Each item is a compare-and-set: it
// applies only if Leader, LeaderEpoch and PartitionEpoch are the
// partition's current ones, and fails alone otherwise.
type AlterPartition struct {
	Items []AlterPartitionItem `json:"items"`
}

// AlterPartitionItem is one partition's requested ISR.
type AlterPartitionItem struct {
	Group          uint64      `json:"group"`
	Leader         uint64      `json:"leader"` // the proposer, which must lead the partition
	LeaderEpoch    int32       `json:"leader_epoch"`
	PartitionEpoch int32       `json:"partition_epoch"`
	ISR            []ISRMember `json:"isr"`
	// LeaderRecovering keeps the partition marked Recovering (Kafka's
	// LeaderRecoveryState); false reports the leader recovered.
	LeaderRecovering bool `json:"leader_recovering,omitempty"`
	// LostData is the leader resigning because its log's recovery cut
	// records known durable (partition.ISRLog.LostData): it leaves the
	// ISR even as its last member, the ELR and the last known leader,
	// and another replica is elected, or none. ISR is ignored. Entries
	// written before it replay as they were.
	LostData bool `json:"lost_data,omitempty"`
	// LogEnd is a replica's report of where its log ends, for an offline
	// partition's unclean recovery (Partition.LogEnds): Leader names the
	// reporter, not the leader, and ISR holds it alone with its broker
	// epoch. Entries written before it replay as they were.
	LogEnd *ReplicaLogEnd `json:"log_end,omitempty"`
}

// ISRMember names an ISR member with the broker epoch its leader knows
// (KIP-903): a member that re-registered since is ineligible.
type ISRMember struct {
	ID          uint64 `json:"id"`
	BrokerEpoch uint64 `json:"broker_epoch"`
}

// ElectLeaders runs elections on ISR partitions, for operators and leader
// balance. Preferred elects each partition's first replica if it is in the
// ISR and alive; otherwise the partition's usual election runs (which is
// unclean only where the topic enables it).
type ElectLeaders struct {
	Groups    []uint64 `json:"groups"`
	Preferred bool     `json:"preferred,omitempty"`
	// Unclean is Kafka's unclean ElectLeaders: a leaderless partition
	// with no ISR (or ELR) member able to lead elects any eligible
	// replica, whether or not its topic enables
	// unclean.leader.election.enable. Entries written before it replay
	// as they were; only brokers with Broker.ElectUnclean apply it.
	Unclean bool `json:"unclean,omitempty"`
}

// UpdateFeatures sets cluster-wide replication features.
type UpdateFeatures struct {
	EligibleLeaderReplicas bool `json:"eligible_leader_replicas"`
}

// SetTopicDefaults replaces the cluster's topic config defaults
// (State.TopicDefaults) with Defaults. The metadata leader proposes its
// node's whenever they differ from the state's (Controller), so the
// metadata leader's broker configs win.
type SetTopicDefaults struct {
	Defaults TopicDefaults `json:"defaults,omitempty"`
	// ConfigVersion is as in CreateTopic.
	ConfigVersion int `json:"config_version,omitempty"`
}

// ControlledShutdown puts broker ID, in the process start StartID, into
// controlled shutdown (Kafka's KIP-841): at apply it leaves every ISR and
// ISR partitions it led elect new leaders, as when it is fenced, while it
// still serves; it stays ineligible (Broker.ShuttingDown) until it
// registers with a new StartID. A StartID other than the registered one
// is refused, so that a late proposal of a process that has since
// restarted cannot fence the new one.
type ControlledShutdown struct {
	ID      uint64 `json:"id"`
	StartID string `json:"start_id"`
}

// SetMaintenance turns maintenance mode of broker ID on or off
// (Broker.InMaintenance). Turning it on is refused while another broker
// is in maintenance, and elects away from the broker the ISR partitions
// it leads where another ISR member may lead.
type SetMaintenance struct {
	ID uint64 `json:"id"`
	On bool   `json:"on"`
}

// Result is what applying a command returns to its proposer.
type Result struct {
	Err             error
	Topic           *Topic
	ProducerIDStart int64
	// Items has one entry per item of an AlterPartition or a
	// ReassignPartitions, or per group of an ElectLeaders, in order; the
	// command itself succeeds.
	Items []ItemResult
	// ACLs has, per filter of a DeleteACLs, the ACLs it matched.
	ACLs [][]auth.ACL
}

// ItemResult is one partition's outcome: its error, or the partition as it
// is after the command.
type ItemResult struct {
	Group     uint64
	Err       error
	Partition Partition
}

// Error is a metadata command's failure, carrying the Kafka error code that
// the broker answers with.
type Error struct {
	Code *kerr.Error
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code.Message, e.Msg) }

// Unwrap lets errors.Is match the kerr code.
func (e *Error) Unwrap() error { return e.Code }

func cmdErr(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// KafkaError returns the Kafka error code and message for err, for
// responses: 0 and nil for nil. A command's Error gives its own detail as
// the message, since the response carries the code beside it.
func KafkaError(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	var ce *Error
	if errors.As(err, &ce) {
		msg = ce.Msg
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code, &msg
	}
	return kerr.UnknownServerError.Code, &msg
}

// Encode marshals c for a raft proposal.
func (c *Command) Encode() ([]byte, error) {
	return json.Marshal(c)
}

// DecodeCommand unmarshals a proposal.
func DecodeCommand(b []byte) (*Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("coordinator: decode command: %w", err)
	}
	return &c, nil
}
