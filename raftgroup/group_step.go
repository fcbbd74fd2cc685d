package raftgroup

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// maxPropBatch bounds one MsgProp, so that raft's uncommitted-size limit
// refuses a tail of the queue rather than all of it.
const maxPropBatch = 1 << 20

// process is one turn of the owner: it ticks, runs queued operations,
// steps inbound messages and queued proposals, then handles every Ready
// raft has. The production goroutine (run) and the simulator (through
// Host.Process) both call it. It reports false once the group has halted.
func (g *Group) process() bool {
	if g.halted {
		return false
	}
	in := g.takeInbox()
	active := false
	for n := min(int(g.pendingTicks.Swap(0)), g.cfg.ElectionTicks); n > 0; n-- {
		g.tick()
	}
	for _, id := range in.unreachable {
		g.raw.ReportUnreachable(id)
	}
	for _, op := range in.ops {
		op()
		active = true
	}
	for _, m := range in.msgs {
		if g.halted {
			break // a step found the log lost (stepRaft)
		}
		active = g.step(m) || active
	}
	if len(in.props) > 0 {
		if len(g.held) == 0 {
			g.held = in.props // the usual case: nothing held, no copy
		} else {
			g.held = append(g.held, in.props...)
		}
		active = true
	}
	if g.halted {
		g.failHeld()
		return false
	}
	if active {
		g.markActive()
	}
	for g.finishAppends() {
		if len(g.held) > 0 && len(g.appending) == 0 {
			props := g.held
			g.held = nil
			g.propose(props)
		}
		if !g.raw.HasReady() {
			break
		}
		if g.cfg.AsyncStorageWrites {
			g.handleReadyAsync(g.raw.Ready())
		} else {
			g.handleReady(g.raw.Ready())
		}
	}
	g.failUnindexed()
	if g.halted {
		g.failHeld() // queued behind an append, or taken in after a halt
		return false
	}
	g.publishStatus()
	return true
}

// tick advances raft's clock by one tick and decides about quiescence.
func (g *Group) tick() {
	if g.holdTicks > 0 && g.lastSoft.Lead == raft.None {
		g.holdTicks-- // a new group's election clock waits for its first leader
	} else {
		g.holdTicks = 0
		g.raw.Tick()
	}
	if len(g.forwarded) > 0 {
		g.ageForwarded()
	}
	g.metrics.ticks.Add(1)
	g.idleTicks++
	if g.cfg.QuiesceAfterTicks > 0 && !g.quiescing && !g.quiesced.Load() &&
		g.idleTicks >= g.cfg.QuiesceAfterTicks && g.canQuiesce() {
		g.quiescing = true
	}
}

// step hands one inbound message to raft and reports whether it counts
// as activity (anything but heartbeat traffic of an idle group).
func (g *Group) step(m *raftpb.Message) bool {
	notice := m.GetType() == raftpb.MsgHeartbeat && bytes.Equal(m.GetContext(), quiesceContext)
	if notice {
		m.Context = nil // a plain heartbeat to raft; the tag is ours
	}
	if err := g.stepRaft(m); err != nil {
		g.log.Debug("step", "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
	}
	switch {
	case notice:
		g.onQuiesceNotice(m)
		return false
	case m.GetType() == raftpb.MsgHeartbeatResp:
		return false
	}
	return true
}

// stepRaft steps m into raft. etcd raft panics when a message shows this
// replica's log lost entries it had acknowledged (its leader commits up
// to an index past its last, "tocommit out of range"): the WAL lost its
// tail, which a power loss under FsyncNever does. The panic becomes the
// group's fatal error, saying so, instead of a goroutine dump.
func (g *Group) stepRaft(m *raftpb.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			g.fatal("step "+m.GetType().String(), fmt.Errorf("%w: %v", ErrLogLost, r))
			err = nil
		}
	}()
	return g.raw.Step(m)
}

// propose steps the queued proposals into raft in queue order, in
// batches of at most maxPropBatch bytes. Once raft refuses a batch, every
// later proposal fails too, so a caller's accepted entries are always a
// prefix of its submissions.
func (g *Group) propose(props []*Proposal) {
	g.metrics.proposals.Add(uint64(len(props)))
	bs := g.raw.BasicStatus()
	var fail error
	leader := bs.RaftState == raft.StateLeader
	if !leader && !(g.forward && bs.Lead != raft.None) {
		fail = &NotLeaderError{Leader: bs.Lead, Term: bs.HardState.GetTerm()}
	}
	for len(props) > 0 {
		n, size := 0, 0
		for n < len(props) && (n == 0 || size+props[n].size <= maxPropBatch) {
			size += props[n].size
			n++
		}
		batch := props[:n]
		props = props[n:]
		if fail == nil {
			fail = g.stepProposals(batch, leader)
		}
		if fail != nil {
			for _, p := range batch {
				p.finish(nil, fail)
			}
		}
	}
}

func (g *Group) stepProposals(batch []*Proposal, leader bool) error {
	ents, err := entriesFor(batch)
	if err != nil {
		return err
	}
	err = g.raw.Step(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(g.node), Entries: ents})
	if errors.Is(err, raft.ErrProposalDropped) {
		return ErrProposalDropped
	}
	if err != nil {
		return err
	}
	g.metrics.propBatches.Add(1)
	for _, p := range batch {
		g.waiters[p.origin.id] = p
		if leader {
			g.unindexed = append(g.unindexed, p)
		} else {
			g.forwarded = append(g.forwarded, forwardedProposal{p: p})
		}
	}
	return nil
}

// entriesFor turns queued proposals into raft entries: each run of small
// proposals becomes one coalesced entry, and large ones and conf changes
// an entry each, in queue order.
func entriesFor(batch []*Proposal) ([]*raftpb.Entry, error) {
	var ents []*raftpb.Entry
	run := 0 // start of the current run of small proposals
	flush := func(end int) {
		switch n := end - run; {
		case n == 1:
			p := batch[run]
			ents = append(ents, &raftpb.Entry{Data: frame(p.origin, p.parts...)})
		case n > 1:
			ents = append(ents, &raftpb.Entry{Data: frameBatch(batch[run:end])})
		}
	}
	for i, p := range batch {
		if p.parts != nil {
			continue
		}
		flush(i)
		run = i + 1
		if p.cc == nil {
			ents = append(ents, &raftpb.Entry{Data: p.data})
			continue
		}
		typ, data, err := raftpb.MarshalConfChange(p.cc)
		if err != nil {
			return nil, err
		}
		ents = append(ents, &raftpb.Entry{Type: typ.Enum(), Data: data})
	}
	flush(len(batch))
	return ents, nil
}

// forwardedProposal is a proposal a follower sent on to its leader; it
// resolves like any other once the entry shows up in this node's log.
type forwardedProposal struct {
	p     *Proposal
	ticks int
}

// ageForwarded fails forwarded proposals that have not reached this
// node's log within two election timeouts: the leader dropped them, or
// they are on their way and will commit unwatched.
func (g *Group) ageForwarded() {
	keep := g.forwarded[:0]
	for _, f := range g.forwarded {
		f.ticks++
		switch {
		case f.p.index != 0 || g.waiters[f.p.origin.id] != f.p:
			// Appended (now tracked by index) or already finished.
		case f.ticks > 2*g.cfg.ElectionTicks:
			delete(g.waiters, f.p.origin.id)
			f.p.finish(nil, ErrOutcomeUnknown)
		default:
			keep = append(keep, f)
		}
	}
	clear(g.forwarded[len(keep):])
	g.forwarded = keep
}

// failUnindexed fails proposals that raft accepted but that never showed
// up in a Ready: raft replaced them (a refused conf change becomes an
// empty entry) or dropped them from its unstable log before we saw them.
func (g *Group) failUnindexed() {
	for _, p := range g.unindexed {
		if p.index == 0 && g.waiters[p.origin.id] == p {
			delete(g.waiters, p.origin.id)
			p.finish(nil, ErrProposalDropped)
		}
	}
	g.unindexed = g.unindexed[:0]
}

// handleReady persists, sends and applies one Ready, in this order:
//
//  1. The snapshot, if any, is saved first: the hard state and entries
//     that follow may point past the old log, and must never be durable
//     without the snapshot they build on.
//  2. The hard state and entries are saved, fsynced when raft says
//     MustSync: a vote or a log entry must survive a crash before any
//     peer learns of it through a message. With a snapshot the hard state
//     is fsynced too, so that its commit index is never behind it.
//  3. Messages go out only now, because they promise what step 2 made
//     durable (an MsgAppResp acknowledges persisted entries, a vote
//     response a persisted vote).
//  4. Committed entries are applied (after restoring a snapshot), since
//     commit is decided by a quorum's persisted logs, never ours alone.
//  5. Advance tells raft that all of this is done, so that it may hand out
//     the next Ready.
//
// A storage or state-machine error halts the group (no Advance, nothing
// more is written) and calls the Host's fatal handler.
func (g *Group) handleReady(rd raft.Ready) {
	t := g.beginReady(rd)
	defer t.report(g.log, &g.slow)
	hasSnap := !raft.IsEmptySnap(rd.Snapshot)
	early := g.canSendEarly(rd, hasSnap)
	if early {
		g.send(rd.Messages)
	}
	if !g.persist(rd.Snapshot, rd.HardState, rd.Entries, rd.MustSync) {
		return
	}
	t.mark(&t.save)
	if !g.updateMemory(rd.Snapshot, rd.HardState, rd.Entries) {
		return
	}
	g.noteAppended(rd.Entries)
	if !early {
		g.send(rd.Messages)
	}
	if hasSnap && !g.restore(rd.Snapshot) {
		return
	}
	if !g.applyCommitted(rd.CommittedEntries) {
		return
	}
	g.endReady(rd, &t)
	if g.halted {
		return
	}
	g.raw.Advance(rd)
}

// beginReady counts a Ready, notes whether it shows activity, and starts
// its timer.
func (g *Group) beginReady(rd raft.Ready) readyTimer {
	g.metrics.readys.Add(1)
	if g.readyIsActivity(rd) {
		g.markActive()
	}
	return startReadyTimer()
}

// endReady is the tail both Ready loops share, once the committed entries
// are applied: read states, leadership news, and a snapshot if one is due.
func (g *Group) endReady(rd raft.Ready, t *readyTimer) {
	t.mark(&t.apply)
	g.noteReadStates(rd.ReadStates)
	g.noteSoftState(rd.SoftState)
	g.maybeSnapshot()
	t.mark(&t.snapshot)
}

// persist makes a received snapshot, then hard state and entries
// durable, in that order: the hard state and entries may point past the
// old log and must never be durable without the snapshot they build on.
// With a snapshot the hard state is fsynced too, so that its commit index
// never trails the durable snapshot (etcd does the same).
func (g *Group) persist(snap *raftpb.Snapshot, hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) bool {
	if !raft.IsEmptySnap(snap) {
		// Our own snapshot must not race the leader's into storage.
		if err := g.waitSnapshot(); err != nil {
			g.fatal("snapshot", err)
			return false
		}
		if err := g.storage.SaveSnapshot(snap, true); err != nil {
			g.fatal("save snapshot", err)
			return false
		}
		sync = true
	}
	if err := g.save(hs, ents, sync); err != nil {
		g.fatal("save entries", err)
		return false
	}
	g.noteSaved(hs)
	return true
}

// noteSaved records hs as the last hard state handed to storage.
func (g *Group) noteSaved(hs *raftpb.HardState) {
	if hs != nil {
		g.saved = hs
	}
}

// save persists a Ready's hard state and entries. On its own WAL a group
// counts and times its fsyncs; on the shared node WAL the node log does,
// since one of its fsyncs serves many groups.
func (g *Group) save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	began := time.Now()
	if err := g.storage.Save(hs, ents, sync); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	g.metrics.syncs.Add(1)
	if _, shared := g.storage.(*nodeStorage); shared {
		return nil
	}
	g.metrics.fsyncs.Add(1)
	if g.cfg.ObserveSync != nil {
		g.cfg.ObserveSync(time.Since(began))
	}
	return nil
}

// canSendEarly reports whether a Ready's messages may go out before its
// entries are durable: a leader that stays leader may replicate while it
// writes its own log (raft thesis 10.2.1; etcd's server does the same),
// which takes one fsync off the commit path. It stays safe because raft
// counts the leader's own copy toward a commit only when its self-ack is
// stepped at Advance, after the entries are durable. The messages must still not
// promise a term or vote that is not yet durable, so a Ready that changes
// either, or carries a snapshot, sends after persisting as usual.
func (g *Group) canSendEarly(rd raft.Ready, hasSnap bool) bool {
	if hasSnap || g.lastSoft.RaftState != raft.StateLeader {
		return false
	}
	if rd.SoftState != nil && rd.SoftState.RaftState != raft.StateLeader {
		return false
	}
	return rd.HardState == nil || !raft.MustSync(rd.HardState, g.saved, 0)
}

// updateMemory mirrors a now-durable snapshot, hard state and entries
// into raft's MemoryStorage.
func (g *Group) updateMemory(snap *raftpb.Snapshot, hs *raftpb.HardState, ents []*raftpb.Entry) bool {
	if !raft.IsEmptySnap(snap) {
		if err := g.mem.ApplySnapshot(snap); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
			g.fatal("apply snapshot to memory", err)
			return false
		}
	}
	if hs != nil {
		if err := g.mem.SetHardState(hs); err != nil {
			g.fatal("set hard state", err)
			return false
		}
	}
	if err := g.mem.Append(ents); err != nil {
		g.fatal("append to memory", err)
		return false
	}
	g.metrics.appended.Add(uint64(len(ents)))
	return true
}

// readyIsActivity reports whether a Ready shows the group doing more
// than heartbeating. Only a leader's Readys count: a follower wakes on
// the leader's messages (step), so that the commit index a quiesce notice
// carries does not wake it right back up.
func (g *Group) readyIsActivity(rd raft.Ready) bool {
	if rd.SoftState != nil && *rd.SoftState != g.lastSoft {
		return true
	}
	if g.lastSoft.RaftState != raft.StateLeader {
		return false
	}
	if len(rd.Entries) > 0 || len(rd.CommittedEntries) > 0 || !raft.IsEmptySnap(rd.Snapshot) || len(rd.ReadStates) > 0 {
		return true
	}
	for _, m := range rd.Messages {
		if t := m.GetType(); t != raftpb.MsgHeartbeat && t != raftpb.MsgHeartbeatResp {
			return true
		}
	}
	return false
}

// noteAppended resolves the local append of our own proposals, and fails
// those whose log position the new entries overwrite.
func (g *Group) noteAppended(ents []*raftpb.Entry) {
	for _, p := range g.indexProposals(ents) {
		p.markAppended()
	}
}

// indexProposals gives our own proposals in ents their log position and
// returns them, after failing those whose position ents overwrite.
func (g *Group) indexProposals(ents []*raftpb.Entry) []*Proposal {
	if len(ents) == 0 {
		return nil
	}
	g.failFrom(ents[0].GetIndex(), ErrProposalLost)
	first := len(g.byIndex)
	for _, e := range ents {
		g.eachOrigin(e, func(o origin) {
			if p := g.waiters[o.id]; o.node == g.node && p != nil && p.index == 0 {
				p.markIndexed(e.GetIndex(), e.GetTerm())
				g.byIndex = append(g.byIndex, p)
			}
		})
	}
	return g.byIndex[first:len(g.byIndex):len(g.byIndex)]
}

// eachOrigin calls fn with the origin of every proposal in a normal entry
// (several for a coalesced one) or a ConfChangeV2's context.
func (g *Group) eachOrigin(e *raftpb.Entry, fn func(origin)) {
	data := e.GetData()
	if e.GetType() == raftpb.EntryConfChangeV2 {
		var cc raftpb.ConfChangeV2
		if proto.Unmarshal(data, &cc) != nil {
			return
		}
		data = cc.GetContext()
	} else if e.GetType() != raftpb.EntryNormal {
		return
	}
	_ = eachPayload(data, func(o origin, _ []byte) error {
		if o.node != 0 {
			fn(o)
		}
		return nil
	})
}

// failFrom fails every appended proposal at index >= from with err (a
// NotLeaderError joins it so that callers can find the new leader).
func (g *Group) failFrom(from uint64, err error) {
	i := len(g.byIndex)
	for i > 0 && g.byIndex[i-1].index >= from {
		i--
	}
	if i == len(g.byIndex) {
		return
	}
	bs := g.raw.BasicStatus()
	nl := &NotLeaderError{Leader: bs.Lead, Term: bs.HardState.GetTerm()}
	for _, p := range g.byIndex[i:] {
		delete(g.waiters, p.origin.id)
		p.finish(nil, errors.Join(err, nl))
	}
	clear(g.byIndex[i:])
	g.byIndex = g.byIndex[:i]
}

func (g *Group) send(msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	if g.quiescing {
		g.tagQuiesce(msgs)
	}
	g.host.enqueue(g, msgs)
}

func (g *Group) noteSoftState(ss *raft.SoftState) {
	if ss == nil {
		return
	}
	if ss.Lead != g.lastSoft.Lead || ss.RaftState != g.lastSoft.RaftState {
		g.failReadsWithoutIndex()
		if ss.RaftState != raft.StateLeader {
			g.quiescing = false
		}
		if g.failOnStepDown && g.lastSoft.RaftState == raft.StateLeader && ss.RaftState != raft.StateLeader {
			g.failFrom(0, ErrLeadershipLost)
		}
	}
	g.lastSoft = *ss
}

// failHeld fails the proposals waiting to be stepped.
func (g *Group) failHeld() {
	for _, p := range g.held {
		p.finish(nil, ErrStopped)
	}
	g.held = nil
}

// fatal halts the group: nothing more is persisted, sent or applied, every
// waiter fails with ErrStopped, and the Host's fatal handler runs.
func (g *Group) fatal(op string, err error) {
	g.halted = true
	fe := &FatalError{Group: g.id, Op: op, Err: err}
	g.log.Error("raft group halted: the node must not carry on", "op", op, "err", err)
	g.shutdown()
	g.host.fatal(fe)
}

// shutdown runs on the owner when the group halts or closes.
func (g *Group) shutdown() {
	if err := g.waitSnapshot(); err != nil {
		g.log.Error("background snapshot failed during shutdown", "err", err)
	}
	g.mu.Lock()
	g.inbox.closed = true
	in := g.inbox
	g.inbox = inbox{closed: true}
	close(g.space)
	g.space = make(chan struct{})
	g.mu.Unlock()
	for _, p := range in.props {
		p.finish(nil, ErrStopped)
	}
	g.failHeld()
	for id, p := range g.waiters {
		delete(g.waiters, id)
		p.finish(nil, ErrStopped)
	}
	g.byIndex, g.unindexed, g.forwarded = nil, nil, nil
	for id, r := range g.reads {
		delete(g.reads, id)
		r.err = ErrStopped
		close(r.done)
	}
	for _, r := range g.readWait {
		r.err = ErrStopped
		close(r.done)
	}
	g.readWait = nil
	g.halted = true
	g.publishStatus()
}
