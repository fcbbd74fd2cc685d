package txns

import (
	"encoding/json"
	"errors"
	"fmt"
)

// commandMagic starts every transaction command, so that a stray entry
// of another kind (a produce batch sent to a transaction partition, or a
// group command) is refused on every replica alike instead of misread.
const commandMagic = 'T'

// ErrNotCommand is returned by DecodeCommand for data that is no
// transaction command.
var ErrNotCommand = errors.New("txns: not a transaction command")

// Command is one change to a transaction partition's state, proposed by
// the partition's leader (the transaction coordinator). Exactly one field
// is set. Every time apply needs (NowMs) and every limit it checks
// (MaxTimeoutMs, ExpirationMs) travel in the command, set by the
// proposer, so replicas agree whatever their clocks and configs say.
type Command struct {
	Barrier          *Barrier          `json:"barrier,omitempty"`
	GrantProducerIDs *GrantProducerIDs `json:"grant_producer_ids,omitempty"`
	InitProducerID   *InitProducerID   `json:"init_producer_id,omitempty"`
	AddPartitions    *AddPartitions    `json:"add_partitions,omitempty"`
	AddOffsets       *AddOffsets       `json:"add_offsets,omitempty"`
	EndTxn           *EndTxn           `json:"end_txn,omitempty"`
	MarkersWritten   *MarkersWritten   `json:"markers_written,omitempty"`
	Tick             *Tick             `json:"tick,omitempty"`
}

// Barrier is what a new leader proposes before it serves: once applied,
// every entry of earlier terms is applied too. Its term becomes the
// coordinator epoch that the leader's WriteTxnMarkers carry.
type Barrier struct {
	Term uint64 `json:"term"`
}

// GrantProducerIDs gives the partition a block of producer ids that the
// leader reserved in the metadata group (AllocateProducerIDs). A block
// that starts below the end of an earlier one is refused, so a grant
// proposed twice (a retried proposal) never hands out an id twice.
type GrantProducerIDs struct {
	ProducerIDBlock
}

// InitProducerID is InitProducerId with a transactional id. ProducerID
// and ProducerEpoch are the request's (KIP-360): both -1 for a new
// producer, both set for one recovering its epoch.
type InitProducerID struct {
	TransactionalID string `json:"transactional_id"`
	TimeoutMs       int32  `json:"timeout_ms"`
	// MaxTimeoutMs is the proposer's transaction.max.timeout.ms.
	MaxTimeoutMs  int32 `json:"max_timeout_ms"`
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	NowMs         int64 `json:"now_ms"`
}

// AddPartitions is AddPartitionsToTxn: one transaction for a v3- client
// request, any number for a v4+ broker batch (KIP-890), each of which may
// be verify-only (checked, nothing added).
type AddPartitions struct {
	Txns  []AddTxn `json:"txns"`
	NowMs int64    `json:"now_ms"`
}

// AddTxn is one transaction of an AddPartitions.
type AddTxn struct {
	TransactionalID string     `json:"transactional_id"`
	ProducerID      int64      `json:"producer_id"`
	ProducerEpoch   int16      `json:"producer_epoch"`
	VerifyOnly      bool       `json:"verify_only,omitempty"`
	Partitions      Partitions `json:"partitions"`
}

// AddOffsets is AddOffsetsToTxn: the group's offsets (TxnOffsetCommit)
// become part of the transaction.
type AddOffsets struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	Group           string `json:"group"`
	NowMs           int64  `json:"now_ms"`
}

// EndTxn is EndTxn from the client: commit or abort.
type EndTxn struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	Commit          bool   `json:"commit"`
	NowMs           int64  `json:"now_ms"`
}

// MarkersWritten reports that the leader wrote the transaction's markers
// to Partitions and told Groups' coordinators: they leave the pending
// set, and when none is left the transaction completes. ProducerID,
// ProducerEpoch and Commit are the PendingTxn's, so that a report about
// an earlier transaction of the id changes nothing.
type MarkersWritten struct {
	TransactionalID string     `json:"transactional_id"`
	ProducerID      int64      `json:"producer_id"`
	ProducerEpoch   int16      `json:"producer_epoch"`
	Commit          bool       `json:"commit"`
	Partitions      Partitions `json:"partitions,omitempty"`
	Groups          []string   `json:"groups,omitempty"`
	NowMs           int64      `json:"now_ms"`
}

// Tick runs the clocks as of NowMs: transactions Ongoing longer than
// their timeout are aborted (epoch bumped), and ids idle for ExpirationMs
// (transactional.id.expiration.ms; 0 disables it) with no open
// transaction are forgotten.
type Tick struct {
	NowMs        int64 `json:"now_ms"`
	ExpirationMs int64 `json:"expiration_ms"`
}

// Result is what applying a command returns to its proposer. Code is a
// Kafka error code (0: success).
type Result struct {
	Code int16 `json:"code"`
	// ProducerID and ProducerEpoch answer InitProducerId (-1 on error).
	ProducerID    int64 `json:"producer_id,omitempty"`
	ProducerEpoch int16 `json:"producer_epoch,omitempty"`
	// NeedProducerIDs is set (with COORDINATOR_LOAD_IN_PROGRESS, which
	// clients retry) when InitProducerId needed a new id and the
	// partition had none left: the leader grants a block and retries.
	NeedProducerIDs bool `json:"need_producer_ids,omitempty"`
	// Txns answers AddPartitions, one per transaction in order.
	Txns []TxnResult `json:"txns,omitempty"`
	// Aborted and Expired are the ids a Tick aborted and forgot, sorted.
	Aborted []string `json:"aborted,omitempty"`
	Expired []string `json:"expired,omitempty"`
}

// TxnResult is one transaction's answer in an AddPartitions. Code is the
// transaction's; Partitions has a code for each partition asked about:
// Code itself, or for a verify-only check that passed, NONE for a
// partition in the transaction and TRANSACTION_ABORTABLE for one that is
// not (Kafka's handleVerifyPartitionsInTransaction).
type TxnResult struct {
	TransactionalID string                     `json:"transactional_id"`
	Code            int16                      `json:"code"`
	Partitions      map[string]map[int32]int16 `json:"partitions,omitempty"`
}

// Encode frames c for a raft proposal.
func (c *Command) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("txns: encode command: %w", err)
	}
	return append([]byte{commandMagic}, b...), nil
}

// DecodeCommand parses a proposal. It refuses data without the command
// prefix, undecodable JSON, and commands with other than exactly one
// field set.
func DecodeCommand(b []byte) (*Command, error) {
	if len(b) == 0 || b[0] != commandMagic {
		return nil, ErrNotCommand
	}
	var c Command
	if err := json.Unmarshal(b[1:], &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCommand, err)
	}
	if n := c.fields(); n != 1 {
		return nil, fmt.Errorf("%w: %d fields set", ErrNotCommand, n)
	}
	return &c, nil
}

func (c *Command) fields() int {
	n := 0
	for _, set := range []bool{c.Barrier != nil, c.GrantProducerIDs != nil, c.InitProducerID != nil,
		c.AddPartitions != nil, c.AddOffsets != nil, c.EndTxn != nil, c.MarkersWritten != nil, c.Tick != nil} {
		if set {
			n++
		}
	}
	return n
}
