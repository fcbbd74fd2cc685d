package peer

import (
	"sync/atomic"
	"time"
)

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
	CorruptFrames   uint64 // raft and fetch streams closed for a corrupt or oversized frame
	// TLSRefusedInbound counts accepted connections refused at the TLS
	// handshake (no certificate, one that does not chain to the CA, not
	// TLS at all), before any hello is read; not in RefusedInbound.
	TLSRefusedInbound uint64
	// TLSFailedOutbound counts dials whose TLS handshake failed or whose
	// certificate the peer refused; not in RefusedOutbound.
	TLSFailedOutbound uint64

	SnapshotsSent         uint64 // acknowledged by the receiver
	SnapshotsFailed       uint64 // outbound streams that ended in error
	SnapshotsReceived     uint64
	SnapshotsRejected     uint64 // inbound streams that ended in error
	SnapshotBytesSent     uint64
	SnapshotBytesReceived uint64

	// Fetch streams, fetching side (Fetch).
	FetchRequests      uint64 // requests written
	FetchErrors        uint64 // Fetch calls that returned an error
	FetchDials         uint64 // fetch streams dialled and handshaken
	FetchDialErrors    uint64
	FetchBytesSent     uint64 // frame bytes written by Fetch
	FetchBytesReceived uint64 // frame bytes of responses read by Fetch
	// Fetch streams, serving side (FetchHandler).
	FetchesServed       uint64 // requests answered by FetchHandler
	FetchServeErrors    uint64 // requests refused as too large, responses too large, failed writes
	FetchServedBytesIn  uint64 // frame bytes of requests read
	FetchServedBytesOut uint64 // frame bytes of responses written

	Peers map[uint64]PeerStats
}

// PeerStats are the counters of the relation with one peer.
type PeerStats struct {
	Addr      string
	Connected bool
	// LastHeard is when the raft stream last delivered a frame from the
	// peer, also after the stream was lost; zero if it never did since
	// this transport started.
	LastHeard     time.Time
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
	tlsRefusedInbound, tlsFailedOutbound                        atomic.Uint64
	snapshotsSent, snapshotsFailed, snapshotsReceived           atomic.Uint64
	snapshotsRejected, snapshotBytesSent, snapshotBytesReceived atomic.Uint64
	fetchRequests, fetchErrors, fetchDials, fetchDialErrors     atomic.Uint64
	fetchBytesSent, fetchBytesReceived                          atomic.Uint64
	fetchesServed, fetchServeErrors                             atomic.Uint64
	fetchServedBytesIn, fetchServedBytesOut                     atomic.Uint64
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
		CorruptFrames:     c.corruptFrames.Load(),
		TLSRefusedInbound: c.tlsRefusedInbound.Load(), TLSFailedOutbound: c.tlsFailedOutbound.Load(),
		SnapshotsSent: c.snapshotsSent.Load(), SnapshotsFailed: c.snapshotsFailed.Load(),
		SnapshotsReceived: c.snapshotsReceived.Load(), SnapshotsRejected: c.snapshotsRejected.Load(),
		SnapshotBytesSent: c.snapshotBytesSent.Load(), SnapshotBytesReceived: c.snapshotBytesReceived.Load(),
		FetchRequests: c.fetchRequests.Load(), FetchErrors: c.fetchErrors.Load(),
		FetchDials: c.fetchDials.Load(), FetchDialErrors: c.fetchDialErrors.Load(),
		FetchBytesSent: c.fetchBytesSent.Load(), FetchBytesReceived: c.fetchBytesReceived.Load(),
		FetchesServed: c.fetchesServed.Load(), FetchServeErrors: c.fetchServeErrors.Load(),
		FetchServedBytesIn: c.fetchServedBytesIn.Load(), FetchServedBytesOut: c.fetchServedBytesOut.Load(),
		Peers: map[uint64]PeerStats{},
	}
	for id, p := range *t.peers.Load() {
		s.Peers[id] = p.snapshotStats()
	}
	return s
}

// PeerStats returns peer id's counters alone (false for an unknown id):
// what Stats().Peers[id] holds, without gathering every peer's and the
// transport's, for a caller that asks about one peer often (liveness).
func (t *Transport) PeerStats(id uint64) (PeerStats, bool) {
	p := t.peer(id)
	if p == nil {
		return PeerStats{}, false
	}
	return p.snapshotStats(), true
}

func (p *peer) snapshotStats() PeerStats {
	c := &p.stats
	return PeerStats{
		Addr: p.address(), Connected: p.connected.Load(), LastHeard: unixNanoTime(p.lastFrame.Load()), Queued: len(p.queue),
		BatchesSent: c.batchesSent.Load(), BytesSent: c.bytesSent.Load(), BytesReceived: c.bytesReceived.Load(),
		Dropped: c.dropped.Load(), Connects: c.connects.Load(), Disconnects: c.disconnects.Load(),
		DialErrors: c.dialErrors.Load(),
	}
}

// unixNanoTime is t, or the zero time for 0.
func unixNanoTime(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t)
}
