package groups

import (
	"encoding/json"
	"errors"
	"fmt"
)

// commandMagic starts every group command, so that a stray entry of
// another kind (a produce batch sent to an offsets partition) is refused
// on every replica alike instead of being misread.
const commandMagic = 'G'

// ErrNotCommand is returned by DecodeCommand for data that is no group
// command.
var ErrNotCommand = errors.New("groups: not a group command")

// Command is one change to an offsets partition's state, proposed by the
// partition's leader (the groups' coordinator). Exactly one field is set.
// Every time that apply needs travels in the command (NowMs), set from
// the proposer's clock, so replicas agree whatever their clocks say.
type Command struct {
	Barrier       *Barrier       `json:"barrier,omitempty"`
	NewGeneration *NewGeneration `json:"new_generation,omitempty"`
	Assign        *Assign        `json:"assign,omitempty"`
	Remove        *Remove        `json:"remove,omitempty"`
	ReplaceStatic *ReplaceStatic `json:"replace_static,omitempty"`
	Commit        *Commit        `json:"commit,omitempty"`
	DeleteOffsets *DeleteOffsets `json:"delete_offsets,omitempty"`
	DeleteGroups  *DeleteGroups  `json:"delete_groups,omitempty"`
	Expire        *Expire        `json:"expire,omitempty"`
	TxnCommit     *TxnCommit     `json:"txn_commit,omitempty"`
	TxnMarker     *TxnMarker     `json:"txn_marker,omitempty"`
}

// Barrier is what a new leader proposes before it serves: once it is
// applied, every entry of earlier terms is applied too.
type Barrier struct {
	Term uint64 `json:"term"`
}

// NewGeneration ends a join phase: the group moves from PrevGeneration to
// Generation with these members (none: the group is empty).
type NewGeneration struct {
	Group          string    `json:"group"`
	PrevGeneration int32     `json:"prev_generation"`
	Generation     int32     `json:"generation"`
	ProtocolType   string    `json:"protocol_type"`
	Protocol       string    `json:"protocol,omitempty"`
	Leader         string    `json:"leader,omitempty"`
	Members        []*Member `json:"members,omitempty"`
	NowMs          int64     `json:"now_ms"`
}

// Assign stores the leader's assignment and makes the group stable.
type Assign struct {
	Group       string            `json:"group"`
	Generation  int32             `json:"generation"`
	Assignments map[string][]byte `json:"assignments"`
}

// Remove takes members out of the group (leave, session expiry, a member
// that never synced). The rest must rejoin: the group prepares a
// rebalance, or becomes empty when nobody is left.
type Remove struct {
	Group   string   `json:"group"`
	Members []string `json:"members"`
	NowMs   int64    `json:"now_ms"`
}

// ReplaceStatic gives a static member's instance a new member id, keeping
// its assignment (KIP-345): the old id is fenced.
type ReplaceStatic struct {
	Group  string  `json:"group"`
	OldID  string  `json:"old_id"`
	Member *Member `json:"member"`
}

// Commit stores offsets for a group, checked against the group's
// generation and membership at apply.
type Commit struct {
	Group      string         `json:"group"`
	Generation int32          `json:"generation"`
	MemberID   string         `json:"member_id,omitempty"`
	InstanceID string         `json:"instance_id,omitempty"`
	Offsets    []CommitOffset `json:"offsets"`
	NowMs      int64          `json:"now_ms"`
}

// CommitOffset is one partition's offset in a Commit.
type CommitOffset struct {
	TopicPartition
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// DeleteOffsets removes committed offsets (OffsetDelete).
type DeleteOffsets struct {
	Group      string           `json:"group"`
	Partitions []TopicPartition `json:"partitions"`
}

// DeleteGroups deletes empty groups with their offsets.
type DeleteGroups struct {
	Groups []string `json:"groups"`
}

// Expire removes the offsets of empty groups that have been empty, and
// uncommitted to, for RetentionMs as of NowMs.
type Expire struct {
	NowMs       int64 `json:"now_ms"`
	RetentionMs int64 `json:"retention_ms"`
}

// TxnCommit is a TxnOffsetCommit: the offsets wait, pending for (Group,
// ProducerID), until a TxnMarker of the producer commits or aborts them.
// Generation, MemberID and InstanceID are KIP-447's checks (v3; -1 and
// "" before).
type TxnCommit struct {
	TransactionalID string         `json:"transactional_id"`
	ProducerID      int64          `json:"producer_id"`
	ProducerEpoch   int16          `json:"producer_epoch"`
	Group           string         `json:"group"`
	Generation      int32          `json:"generation"`
	MemberID        string         `json:"member_id,omitempty"`
	InstanceID      string         `json:"instance_id,omitempty"`
	Offsets         []CommitOffset `json:"offsets"`
	NowMs           int64          `json:"now_ms"`
}

// TxnMarker ends a producer's transaction on this offsets partition: the
// pending offsets of ProducerID in every group here become committed
// offsets (Commit) or are dropped. As in Kafka, the marker names the
// partition, not the groups: WriteTxnMarkers carries no group names.
type TxnMarker struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	Commit        bool  `json:"commit"`
	NowMs         int64 `json:"now_ms"`
}

// Result is what applying a command returns to its proposer. Code is a
// Kafka error code (0: success); Codes carries per-group codes for
// DeleteGroups.
type Result struct {
	Code  int16            `json:"code"`
	Codes map[string]int16 `json:"codes,omitempty"`
}

// Encode frames c for a raft proposal.
func (c *Command) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("groups: encode command: %w", err)
	}
	return append([]byte{commandMagic}, b...), nil
}

// DecodeCommand parses a proposal. It refuses data without the group
// command prefix, undecodable JSON, and commands with other than exactly
// one field set.
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
	for _, set := range []bool{c.Barrier != nil, c.NewGeneration != nil, c.Assign != nil, c.Remove != nil,
		c.ReplaceStatic != nil, c.Commit != nil, c.DeleteOffsets != nil, c.DeleteGroups != nil, c.Expire != nil,
		c.TxnCommit != nil, c.TxnMarker != nil} {
		if set {
			n++
		}
	}
	return n
}
