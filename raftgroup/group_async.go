package raftgroup

import (
	"slices"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// With Config.AsyncStorageWrites raft hands the group its storage work as
// messages (raft's doc.go, "Usage with Asynchronous Storage Writes"): an
// append (entries, hard state, snapshot) whose responses may be delivered
// only once it is durable, and an apply of committed entries that are
// already durable here. The group queues the append through AsyncStorage
// and goes on stepping raft while the disk works: a leader counts its
// followers' acknowledgements, commits and applies during its own fsync,
// and a follower accepts the next append while the last one syncs. The
// node log's flusher then writes the saves of many groups and many Readys
// in one fdatasync.

// pendingAppend is one append message on its way to disk. Appends finish
// in the order raft issued them, whatever order their saves complete in,
// because a response may promise every earlier append too.
type pendingAppend struct {
	m     *raftpb.Message
	props []*Proposal // our proposals it holds, to resolve as appended
	done  atomic.Bool // set by the storage once err is written
	err   error
}

// handleReadyAsync is handleReady for AsyncStorageWrites:
//
//  1. Messages to peers go out at once: raft holds back those that
//     promise durable state (acknowledgements, votes) as responses of the
//     append, and a leader may replicate while it writes its own log.
//  2. The append is queued. One that carries a received snapshot is
//     saved at once instead, snapshot first (it is rare, and a crash must
//     not leave the snapshot durable without the commit index after it).
//  3. Appends whose saves are complete finish in order: raft's
//     MemoryStorage learns their entries, the state machine a snapshot,
//     and the held-back responses are stepped or sent.
//  4. Committed entries are applied; raft hands out only entries that are
//     durable here, so the state machine never runs ahead of the log.
//
// There is no Advance: raft learns what is done from the responses.
func (g *Group) handleReadyAsync(rd raft.Ready) {
	t := g.beginReady(rd)
	defer t.report(g.log, &g.slow)
	var appendMsg, applyMsg *raftpb.Message
	out := rd.Messages[:0]
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			appendMsg = m
		case raft.LocalApplyThread:
			applyMsg = m
		default:
			out = append(out, m)
		}
	}
	g.send(out)
	if appendMsg != nil && !g.queueAppend(appendMsg) {
		return
	}
	t.mark(&t.save)
	if !g.finishAppends() {
		return
	}
	if applyMsg != nil && !g.applyMessage(applyMsg) {
		return
	}
	g.endReady(rd, &t)
}

// queueAppend starts the save of an append message.
func (g *Group) queueAppend(m *raftpb.Message) bool {
	snap, hs, ents := m.GetSnapshot(), appendHardState(m), m.GetEntries()
	sync := len(ents) > 0 || hs != nil && raft.MustSync(hs, g.saved, 0)
	pa := &pendingAppend{m: m, props: slices.Clone(g.indexProposals(ents))}
	g.appending = append(g.appending, pa)
	as, ok := g.storage.(AsyncStorage)
	if !ok || !raft.IsEmptySnap(snap) {
		// Written inline, as handleReady does; always so with a snapshot:
		// a crash must not find it durable with a commit index from
		// before it.
		pa.done.Store(true)
		return g.persist(snap, hs, ents, sync)
	}
	g.noteSaved(hs)
	if sync {
		g.metrics.syncs.Add(1)
	}
	as.SaveAsync(hs, ents, sync, func(err error) {
		pa.err = err
		pa.done.Store(true)
		g.notify()
	})
	return true
}

// appendHardState rebuilds the hard state an append message carries
// (raft sets all three fields or none).
func appendHardState(m *raftpb.Message) *raftpb.HardState {
	if m.Term == nil {
		return nil
	}
	return &raftpb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
}

// finishAppends finishes the appends at the head of the queue whose saves
// are complete. It reports false once the group has halted.
func (g *Group) finishAppends() bool {
	if g.halted {
		return false
	}
	for len(g.appending) > 0 && g.appending[0].done.Load() {
		pa := g.appending[0]
		g.appending[0] = nil
		g.appending = g.appending[1:]
		if pa.err != nil {
			g.fatal("save entries", pa.err)
			return false
		}
		if !g.finishAppend(pa) {
			return false
		}
	}
	if len(g.appending) == 0 {
		g.appending = nil // let the backing array go
	}
	return true
}

// finishAppend mirrors a durable append into MemoryStorage (and a
// snapshot into the state machine), then delivers its responses.
func (g *Group) finishAppend(pa *pendingAppend) bool {
	m := pa.m
	snap := m.GetSnapshot()
	if !g.updateMemory(snap, appendHardState(m), m.GetEntries()) {
		return false
	}
	if !raft.IsEmptySnap(snap) && !g.restore(snap) {
		return false
	}
	for _, p := range pa.props {
		p.markAppended()
	}
	return g.respond(m.GetResponses())
}

// applyMessage applies committed entries, then tells raft.
func (g *Group) applyMessage(m *raftpb.Message) bool {
	if !g.applyCommitted(m.GetEntries()) {
		return false
	}
	return g.respond(m.GetResponses())
}

// respond steps the responses addressed to this replica and sends the
// rest.
func (g *Group) respond(msgs []*raftpb.Message) bool {
	var out []*raftpb.Message
	for _, r := range msgs {
		if r.GetTo() != g.node {
			out = append(out, r)
			continue
		}
		if err := g.raw.Step(r); err != nil {
			g.fatal("step local response", err)
			return false
		}
	}
	g.send(out)
	return true
}
