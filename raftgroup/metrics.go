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
	c := h.retired
	for _, g := range *h.list.Load() {
		c.add(&g.metrics)
	}
	for g := range h.closing {
		c.add(&g.metrics)
	}
	h.countMu.Unlock()
	m := Metrics{
		Proposals:       c.proposals,
		ProposalBatches: c.propBatches,
		Readys:          c.readys,
		Syncs:           c.syncs,
		WALFsyncs:       c.fsyncs,
		EntriesAppended: c.appended,
		EntriesApplied:  c.applied,
		BytesApplied:    c.appliedBytes,
		Quiesces:        c.quiesces,
		Ticks:           c.ticks,
		DroppedInbound:  c.droppedIn,
		SnapshotsTaken:  c.snapshots,
		DroppedOutbound: h.metrics.droppedOut.Load(),
		UnknownGroup:    h.metrics.unknownGroup.Load(),
		Batches:         h.metrics.batches.Load(),
		MessagesSent:    h.metrics.sent.Load(),
		Keepalives:      h.metrics.keepalives.Load(),
		SnapshotsSent:   h.metrics.snapshotsSent.Load(),
	}
	if h.nodeLog != nil {
		m.WALFsyncs += h.nodeLog.fsyncs()
	}
	return m
}

// groupCounts is a sum of groups' counters.
type groupCounts struct {
	proposals, propBatches, readys, syncs, fsyncs, appended, applied, appliedBytes, quiesces, droppedIn, ticks, snapshots uint64
}

func (c *groupCounts) add(gm *groupMetrics) {
	c.proposals += gm.proposals.Load()
	c.propBatches += gm.propBatches.Load()
	c.readys += gm.readys.Load()
	c.syncs += gm.syncs.Load()
	c.fsyncs += gm.fsyncs.Load()
	c.appended += gm.appended.Load()
	c.applied += gm.applied.Load()
	c.appliedBytes += gm.appliedBytes.Load()
	c.quiesces += gm.quiesces.Load()
	c.droppedIn += gm.droppedIn.Load()
	c.ticks += gm.ticks.Load()
	c.snapshots += gm.snapshots.Load()
}
