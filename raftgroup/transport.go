package raftgroup

import (
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// Envelope is one raft message of one group, as it travels between nodes.
type Envelope struct {
	Group uint64
	Msg   *raftpb.Message
}

// Transport carries a node's raft traffic to its peers. The Host calls it
// from its own goroutines and relies on it never blocking.
//
// This contract belongs to raftgroup, its consumer; transport/peer
// implements it over TCP and sim/ implements it in virtual time.
type Transport interface {
	// Send queues batch for node to. It never blocks: when the queue towards
	// that node is full it drops the whole batch and returns false, and the
	// Host reports the peer unreachable to the groups concerned. A true
	// result means queued, not delivered. The transport owns batch after the
	// call.
	Send(to uint64, batch []Envelope) bool

	// SendSnapshot carries env (a MsgSnap) and body, the state machine's bulk
	// snapshot data, on a stream separate from Send's so that it never delays
	// heartbeats. It returns at once; done is called exactly once, from any
	// goroutine, with the outcome, and body is closed by then. body may be nil.
	SendSnapshot(to uint64, env Envelope, body io.ReadCloser, done func(error))
}

// Receiver is where a Transport delivers inbound traffic: the Host.
type Receiver interface {
	// Receive hands over a batch from node from. It must not block for long:
	// the Host enqueues and returns, dropping what does not fit.
	Receive(from uint64, batch []Envelope)

	// ReceiveSnapshot is called on the snapshot stream with a MsgSnap and its
	// body. It consumes body before returning; a nil error means the state
	// machine has staged the data and the message was stepped into the group.
	ReceiveSnapshot(from uint64, env Envelope, body io.Reader) error
}
