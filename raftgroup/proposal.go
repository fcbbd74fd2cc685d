package raftgroup

import (
	"context"

	"go.etcd.io/raft/v3/raftpb"
)

// Proposal tracks one submitted entry from submission to apply. Its
// methods are safe for concurrent use.
//
// Every proposal ends exactly one way: applied (Wait returns the state
// machine's result), or failed with ErrNotLeader (as *NotLeaderError),
// ErrProposalDropped, ErrProposalLost, ErrOutcomeUnknown or ErrStopped.
// A context ending only stops the caller's wait: the entry may still
// commit.
type Proposal struct {
	origin origin
	data   []byte               // framed entry data (large normal entries)
	parts  [][]byte             // raw payload parts, coalesced by the group (small normal entries)
	cc     *raftpb.ConfChangeV2 // conf changes: Context holds the frame
	size   int

	appended chan struct{} // closed once durably appended locally, or failed
	done     chan struct{} // closed once applied, or failed

	// Written by the group's goroutine before the channel closes that
	// publishes them.
	index, term uint64
	local       bool // durable in this node's log (set before appended closes)
	value       any
	err         error
}

// Result is what an applied proposal yields.
type Result struct {
	Index, Term uint64
	// Value is what StateMachine.Apply returned (for a conf change, the
	// new *raftpb.ConfState).
	Value any
}

func newProposal(o origin) *Proposal {
	return &Proposal{origin: o, appended: make(chan struct{}), done: make(chan struct{})}
}

// Appended is closed once the entry is durably in this node's log (the
// leader's own fsync; Kafka acks=1) or the proposal has failed.
func (p *Proposal) Appended() <-chan struct{} { return p.appended }

// Done is closed once the entry is applied or the proposal has failed.
func (p *Proposal) Done() <-chan struct{} { return p.done }

// WaitAppended waits for the local durable append and returns the entry's
// index and term.
func (p *Proposal) WaitAppended(ctx context.Context) (index, term uint64, err error) {
	select {
	case <-p.appended:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if !p.local {
		<-p.done // failed before append: err is published with done
		return 0, 0, p.err
	}
	return p.index, p.term, nil
}

// Wait waits until the entry is applied and returns the state machine's
// result.
func (p *Proposal) Wait(ctx context.Context) (Result, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	if p.err != nil {
		return Result{}, p.err
	}
	return Result{Index: p.index, Term: p.term, Value: p.value}, nil
}

// isClosed is only called by the group goroutine, the channels' only
// closer, so it cannot race with a close.
//
// markIndexed runs on the group goroutine when raft puts the entry in
// the log, markAppended once it is durable there (at once in the
// synchronous Ready loop, later with AsyncStorageWrites).
func (p *Proposal) markIndexed(index, term uint64) {
	p.index, p.term = index, term
}

func (p *Proposal) markAppended() {
	if !isClosed(p.appended) { // not failed meanwhile
		p.local = true
		close(p.appended)
	}
}

// finish runs on the group goroutine.
func (p *Proposal) finish(value any, err error) {
	p.value, p.err = value, err
	if !isClosed(p.appended) {
		close(p.appended)
	}
	close(p.done)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
