package raftgroup

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLeader is what every *NotLeaderError unwraps to.
	ErrNotLeader = errors.New("raftgroup: not leader")

	// ErrStopped is returned for work submitted to, or pending in, a group
	// that has been closed or halted by a fatal error.
	ErrStopped = errors.New("raftgroup: group stopped")

	// ErrProposalDropped means raft refused the proposal (for instance, the
	// uncommitted log is over MaxUncommittedEntriesSize, or a leadership
	// transfer is under way). The entry is not in any log; retry later.
	ErrProposalDropped = errors.New("raftgroup: proposal dropped")

	// ErrProposalLost means the entry reached this node's log but a later
	// leader overwrote it at its index: it will never commit.
	ErrProposalLost = errors.New("raftgroup: proposal lost to a new leader")

	// ErrLeadershipLost means this replica stopped leading while the entry
	// sat in its log unapplied (GroupConfig.FailOnStepDown). The entry
	// may still commit under the next leader, or be overwritten: its
	// outcome is unknown. A NotLeaderError joins it.
	ErrLeadershipLost = errors.New("raftgroup: leadership lost before the proposal was applied; it may still commit")

	// ErrLogLost is the fatal error of a replica whose log lacks entries
	// it acknowledged to its leader: its WAL lost them (a power loss with
	// FsyncNever), and raft cannot go on with it. The replica must be
	// rebuilt from the others; the WAL must be fsynced to prevent it.
	ErrLogLost = errors.New("raftgroup: this replica's log lost entries it had acknowledged (a power loss with fsync never?); raft cannot go on with it: rebuild the replica from the others, and run with fsync always to prevent it")

	// ErrEmptyProposal refuses empty data, which the state machine could not
	// tell apart from a leader's no-op entry.
	ErrEmptyProposal = errors.New("raftgroup: empty proposal")

	// ErrGroupExists and ErrGroupNotFound come from Host.CreateGroup and
	// Host.RemoveGroup.
	ErrGroupExists   = errors.New("raftgroup: group exists")
	ErrGroupNotFound = errors.New("raftgroup: group not found")

	// ErrTransferFailed means a leadership transfer ended with another node
	// (or no node) leading.
	ErrTransferFailed = errors.New("raftgroup: leadership transfer failed")
)

// NotLeaderError tells a caller which node leads the group instead (0 when
// none is known) and in which term, so that a Kafka client can be pointed at
// the leader. Proposals are never forwarded.
type NotLeaderError struct {
	Leader uint64
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return fmt.Sprintf("raftgroup: not leader (no leader known, term %d)", e.Term)
	}
	return fmt.Sprintf("raftgroup: not leader (leader %d, term %d)", e.Leader, e.Term)
}

// Unwrap lets errors.Is(err, ErrNotLeader) match.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// FatalError is what a Host hands its fatal handler: a storage or
// state-machine failure after which the node must not carry on.
type FatalError struct {
	Group uint64
	Op    string // "save entries", "save snapshot", "apply", ...
	Err   error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("raftgroup: group %d: %s: ", e.Group, e.Op) + e.Err.Error()
}

func (e *FatalError) Unwrap() error { return e.Err }
