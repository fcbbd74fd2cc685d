package raftgroup

import "sync/atomic"

// Metrics are counters since the Host started, summed over its groups.
type Metrics struct {
	Proposals       uint64 // proposals taken from queues
	ProposalBatches uint64 // MsgProp steps (proposals/batches: batching factor)
	Readys          uint64 // Readys handled
	Syncs           uint64 // Readys that required an fsync
	WALFsyncs       uint64 // fsyncs made for them: one per Ready on a group's own WAL, one per batch on the shared WAL
	EntriesAppended uint64
	EntriesApplied  uint64
	BytesApplied    uint64 // payload bytes passed to StateMachine.Apply
	Quiesces        uint64 // times a leader quiesced a group
	Ticks           uint64 // raft ticks (quiesced groups are not ticked)
	DroppedInbound  uint64
	DroppedOutbound uint64
	UnknownGroup    uint64 // inbound messages for groups not on this node
	Batches         uint64 // outbound batches handed to the transport
	MessagesSent    uint64
	Keepalives      uint64
	SnapshotsSent   uint64
	SnapshotsTaken  uint64 // state machine snapshots this node's groups took
}

type groupMetrics struct {
	proposals, propBatches, readys, syncs, fsyncs, appended, applied, appliedBytes, quiesces, droppedIn, ticks, snapshots atomic.Uint64
}

type hostMetrics struct {
	droppedOut, unknownGroup, batches, sent, keepalives, snapshotsSent atomic.Uint64
}

// Metrics sums the counters of the host and its groups, removed ones
// included.
func (h *Host) Metrics() Metrics {
	h.countMu.Lock()
	m := h.retired
	for _, g := range *h.list.Load() {
		m.addGroup(&g.metrics)
	}
	for g := range h.closing {
		m.addGroup(&g.metrics)
	}
	h.countMu.Unlock()
	m.DroppedOutbound = h.metrics.droppedOut.Load()
	m.UnknownGroup = h.metrics.unknownGroup.Load()
	m.Batches = h.metrics.batches.Load()
	m.MessagesSent = h.metrics.sent.Load()
	m.Keepalives = h.metrics.keepalives.Load()
	m.SnapshotsSent = h.metrics.snapshotsSent.Load()
	if h.nodeLog != nil {
		m.WALFsyncs += h.nodeLog.fsyncs()
	}
	return m
}

// addGroup adds one group's counters to m.
func (m *Metrics) addGroup(gm *groupMetrics) {
	m.Proposals += gm.proposals.Load()
	m.ProposalBatches += gm.propBatches.Load()
	m.Readys += gm.readys.Load()
	m.Syncs += gm.syncs.Load()
	m.WALFsyncs += gm.fsyncs.Load()
	m.EntriesAppended += gm.appended.Load()
	m.EntriesApplied += gm.applied.Load()
	m.BytesApplied += gm.appliedBytes.Load()
	m.Quiesces += gm.quiesces.Load()
	m.Ticks += gm.ticks.Load()
	m.DroppedInbound += gm.droppedIn.Load()
	m.SnapshotsTaken += gm.snapshots.Load()
}
