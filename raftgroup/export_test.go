package raftgroup

// Exports for the external test package (benchmarks over transport/peer,
// which imports raftgroup and so cannot be imported by package raftgroup's
// own tests).

// MemNet is the in-memory FAKE network of the cluster tests.
type MemNet = memNet

// NewMemNet returns a fake network.
func NewMemNet() *MemNet { return newMemNet() }

// Transport returns node from's endpoint.
func (n *memNet) Transport(from uint64) Transport { return n.transport(from) }

// Attach routes traffic for node id to r.
func (n *memNet) Attach(id uint64, r Receiver) { n.attach(id, r) }

// Close stops delivery.
func (n *memNet) Close() { n.close() }
