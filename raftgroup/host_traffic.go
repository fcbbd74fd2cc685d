package raftgroup

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

var errInboundFull = errors.New("raftgroup: inbound queue full")

// Receive routes an inbound batch to its groups. It never blocks: a
// message for a full queue or an unknown group is dropped (raft
// retransmits), and node keepalives only refresh the sender's liveness.
func (h *Host) Receive(from uint64, batch []Envelope) {
	h.noteHeard(from)
	list := *h.list.Load()
	for _, env := range batch {
		if env.Group == HostGroupID || env.Msg == nil {
			continue
		}
		if g := findGroup(list, env.Group); g != nil {
			g.deliver(env.Msg)
		} else {
			h.metrics.unknownGroup.Add(1)
		}
	}
}

// findGroup binary-searches the sorted group list, which avoids taking the
// Host's lock on the hot inbound path.
func findGroup(list []*Group, id uint64) *Group {
	i, ok := slices.BinarySearchFunc(list, id, func(g *Group, id uint64) int {
		switch {
		case g.id < id:
			return -1
		case g.id > id:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return list[i]
}

// ReceiveSnapshot stages a snapshot's bulk data in the group's state
// machine, then queues the MsgSnap for the group. body is drained before
// returning, whatever happens.
func (h *Host) ReceiveSnapshot(from uint64, env Envelope, body io.Reader) (err error) {
	h.noteHeard(from)
	defer func() {
		if body != nil {
			_, _ = io.Copy(io.Discard, body)
		}
	}()
	if env.Msg.GetType() != raftpb.MsgSnap {
		return fmt.Errorf("raftgroup: snapshot stream carried %s, not MsgSnap", env.Msg.GetType())
	}
	g := findGroup(*h.list.Load(), env.Group)
	if g == nil {
		return fmt.Errorf("%w: %d", ErrGroupNotFound, env.Group)
	}
	if body == nil {
		body = eofReader{}
	}
	if err := g.sm.ReceiveSnapshot(env.Msg.GetSnapshot(), body); err != nil {
		return fmt.Errorf("stage snapshot for group %d: %w", env.Group, err)
	}
	if !g.deliver(env.Msg) {
		return fmt.Errorf("group %d: %w", env.Group, errInboundFull)
	}
	return nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// enqueue queues a group's outbound messages per destination node. A full
// queue drops the message and reports the peer unreachable to the group,
// which then probes instead of streaming. Snapshots take their own stream.
func (h *Host) enqueue(g *Group, msgs []*raftpb.Message) {
	var dropped, snaps []*raftpb.Message
	h.outMu.Lock()
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgSnap {
			snaps = append(snaps, m)
			continue
		}
		q := h.out[m.GetTo()]
		if len(q) >= h.cfg.MaxOutboundMessages {
			dropped = append(dropped, m)
			continue
		}
		h.out[m.GetTo()] = append(q, Envelope{Group: g.id, Msg: m})
	}
	h.outMu.Unlock()
	for _, m := range dropped {
		h.metrics.droppedOut.Add(1)
		g.reportUnreachable(m.GetTo())
	}
	for _, m := range snaps {
		h.sendSnapshot(g, m)
	}
	select {
	case h.flushc <- struct{}{}:
	default:
	}
}

// sendSnapshot hands a MsgSnap and the state machine's bulk data to the
// transport's snapshot stream; raft learns the outcome through
// ReportSnapshot.
func (h *Host) sendSnapshot(g *Group, m *raftpb.Message) {
	to := m.GetTo()
	h.metrics.snapshotsSent.Add(1)
	body, err := g.sm.SnapshotBody(m.GetSnapshot())
	if err != nil {
		g.reportSnapshot(to, fmt.Errorf("snapshot body: %w", err))
		return
	}
	if h.learnerSnaps != nil && slices.Contains(g.Status().Learners, to) {
		body = &throttledBody{ReadCloser: body, lim: h.learnerSnaps}
	}
	h.transport.SendSnapshot(to, Envelope{Group: g.id, Msg: m}, body, func(err error) {
		g.reportSnapshot(to, err)
	})
}

type outBatch struct {
	to    uint64
	batch []Envelope
}

// flush sends every destination's queue as one batch, in destination
// order. A batch the transport refuses is reported unreachable to each
// group in it.
func (h *Host) flush() {
	h.outMu.Lock()
	var batches []outBatch
	for to, q := range h.out {
		if len(q) > 0 {
			batches = append(batches, outBatch{to, q})
			h.out[to] = nil
		}
	}
	h.outMu.Unlock()
	slices.SortFunc(batches, func(a, b outBatch) int {
		if a.to < b.to {
			return -1
		}
		return 1
	})
	for _, b := range batches {
		h.metrics.batches.Add(1)
		h.metrics.sent.Add(uint64(len(b.batch)))
		groups := groupIDs(b.batch)
		if !h.transport.Send(b.to, b.batch) {
			h.metrics.droppedOut.Add(uint64(len(b.batch)))
			h.reportUnreachable(b.to, groups)
		}
	}
}

func groupIDs(batch []Envelope) []uint64 {
	var ids []uint64
	for _, e := range batch {
		if e.Group != HostGroupID && (len(ids) == 0 || ids[len(ids)-1] != e.Group) {
			ids = append(ids, e.Group)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func (h *Host) reportUnreachable(to uint64, groups []uint64) {
	list := *h.list.Load()
	for _, id := range groups {
		if g := findGroup(list, id); g != nil {
			g.reportUnreachable(to)
		}
	}
}

func (h *Host) noteHeard(from uint64) {
	now := h.ticks.Load()
	h.heardMu.Lock()
	h.heard[from] = now
	h.heardMu.Unlock()
}

// membersAlive reports whether the Host has heard from every other member
// of c within PeerTimeoutTicks.
func (h *Host) membersAlive(c confView) bool {
	now := h.ticks.Load()
	h.heardMu.Lock()
	defer h.heardMu.Unlock()
	for _, ids := range [][]uint64{c.Voters, c.VotersOutgoing, c.Learners, c.LearnersNext} {
		for _, id := range ids {
			if id == h.cfg.NodeID {
				continue
			}
			at, ok := h.heard[id]
			if !ok || now-at > int64(h.cfg.PeerTimeoutTicks) {
				return false
			}
		}
	}
	return true
}

// sendKeepalives sends every node that shares a group with this one a
// node-level keepalive, so that quiesced groups can tell a silent leader
// from a dead one without per-group heartbeats.
func (h *Host) sendKeepalives() {
	peers := map[uint64]struct{}{}
	for _, g := range *h.list.Load() {
		s := g.status.Load()
		for _, ids := range [][]uint64{s.Voters, s.VotersOutgoing, s.Learners, s.LearnersNext} {
			for _, id := range ids {
				if id != h.cfg.NodeID {
					peers[id] = struct{}{}
				}
			}
		}
	}
	h.outMu.Lock()
	for id := range peers {
		m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(h.cfg.NodeID), To: new(id)}
		h.out[id] = append(h.out[id], Envelope{Group: HostGroupID, Msg: m})
	}
	h.outMu.Unlock()
	h.metrics.keepalives.Add(uint64(len(peers)))
	select {
	case h.flushc <- struct{}{}:
	default:
	}
}
