package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Command is one change to the metadata, proposed to group 0. Exactly one
// field is set.
type Command struct {
	RegisterBroker      *Broker              `json:"register_broker,omitempty"`
	SetAlive            *SetAlive            `json:"set_alive,omitempty"`
	CreateTopic         *CreateTopic         `json:"create_topic,omitempty"`
	DeleteTopic         *DeleteTopic         `json:"delete_topic,omitempty"`
	CreatePartitions    *CreatePartitions    `json:"create_partitions,omitempty"`
	AlterConfigs        *AlterConfigs        `json:"alter_configs,omitempty"`
	AllocateProducerIDs *AllocateProducerIDs `json:"allocate_producer_ids,omitempty"`
	LeaderHints         []LeaderHint         `json:"leader_hints,omitempty"`
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

// Result is what applying a command returns to its proposer.
type Result struct {
	Err             error
	Topic           *Topic
	ProducerIDStart int64
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
