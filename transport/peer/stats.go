package peer

import "sync/atomic"

// Stats is a snapshot of the transport's counters, for metrics. Counters
// only grow; a removed peer's per-peer counters disappear with it, its share
// of the totals stays.
type Stats struct {
	BatchesSent      uint64 // batches taken off the queues and encoded
	FramesSent       uint64 // kindBatch frames written
	MessagesSent     uint64 // raft messages encoded
	BytesSent        uint64 // bytes written on raft streams
	Writes           uint64 // write calls on raft streams; BatchesSent/Writes is the batching factor
	FramesReceived   uint64
	MessagesReceived uint64
	BytesReceived    uint64

	Dropped         uint64 // batches Send refused: queue full, unknown peer, closed
	MessagesDropped uint64 // messages too large or unencodable, dropped by the writer

	Connects        uint64 // raft stream sessions established
	Disconnects     uint64
	DialErrors      uint64 // failed dials and handshakes of raft streams
	RefusedInbound  uint64 // handshakes this node refused
	RefusedOutbound uint64 // handshakes a peer refused
	CorruptFrames   uint64 // raft streams closed for a corrupt or oversized frame

	SnapshotsSent         uint64 // acknowledged by the receiver
	SnapshotsFailed       uint64 // outbound streams that ended in error
	SnapshotsReceived     uint64
	SnapshotsRejected     uint64 // inbound streams that ended in error
	SnapshotBytesSent     uint64
	SnapshotBytesReceived uint64

	Peers map[uint64]PeerStats
}

// PeerStats are the counters of the relation with one peer.
type PeerStats struct {
	Addr          string
	Connected     bool
	Queued        int // batches waiting in the queue
	BatchesSent   uint64
	BytesSent     uint64
	BytesReceived uint64
	Dropped       uint64
	Connects      uint64
	Disconnects   uint64
	DialErrors    uint64
}

type counters struct {
	batchesSent, framesSent, messagesSent, bytesSent, writes    atomic.Uint64
	framesReceived, messagesReceived, bytesReceived             atomic.Uint64
	dropped, messagesDropped                                    atomic.Uint64
	connects, disconnects, dialErrors                           atomic.Uint64
	refusedInbound, refusedOutbound, corruptFrames              atomic.Uint64
	snapshotsSent, snapshotsFailed, snapshotsReceived           atomic.Uint64
	snapshotsRejected, snapshotBytesSent, snapshotBytesReceived atomic.Uint64
}

type peerCounters struct {
	batchesSent, bytesSent, bytesReceived, dropped atomic.Uint64
	connects, disconnects, dialErrors              atomic.Uint64
}

// Stats returns the current counters.
func (t *Transport) Stats() Stats {
	c := &t.stats
	s := Stats{
		BatchesSent: c.batchesSent.Load(), FramesSent: c.framesSent.Load(),
		MessagesSent: c.messagesSent.Load(), BytesSent: c.bytesSent.Load(), Writes: c.writes.Load(),
		FramesReceived: c.framesReceived.Load(), MessagesReceived: c.messagesReceived.Load(),
		BytesReceived: c.bytesReceived.Load(),
		Dropped:       c.dropped.Load(), MessagesDropped: c.messagesDropped.Load(),
		Connects: c.connects.Load(), Disconnects: c.disconnects.Load(), DialErrors: c.dialErrors.Load(),
		RefusedInbound: c.refusedInbound.Load(), RefusedOutbound: c.refusedOutbound.Load(),
		CorruptFrames: c.corruptFrames.Load(),
		SnapshotsSent: c.snapshotsSent.Load(), SnapshotsFailed: c.snapshotsFailed.Load(),
		SnapshotsReceived: c.snapshotsReceived.Load(), SnapshotsRejected: c.snapshotsRejected.Load(),
		SnapshotBytesSent: c.snapshotBytesSent.Load(), SnapshotBytesReceived: c.snapshotBytesReceived.Load(),
		Peers: map[uint64]PeerStats{},
	}
	for id, p := range *t.peers.Load() {
		s.Peers[id] = p.snapshotStats()
	}
	return s
}

func (p *peer) snapshotStats() PeerStats {
	c := &p.stats
	return PeerStats{
		Addr: p.address(), Connected: p.connected.Load(), Queued: len(p.queue),
		BatchesSent: c.batchesSent.Load(), BytesSent: c.bytesSent.Load(), BytesReceived: c.bytesReceived.Load(),
		Dropped: c.dropped.Load(), Connects: c.connects.Load(), Disconnects: c.disconnects.Load(),
		DialErrors: c.dialErrors.Load(),
	}
}
