package raftgroup

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// ErrOutcomeUnknown means a snapshot from the leader replaced this
// node's log over the proposal's entry: it may or may not have committed.
var ErrOutcomeUnknown = errors.New("raftgroup: proposal outcome unknown (log replaced by a snapshot)")

// restore installs a snapshot received from the leader into the state
// machine (which staged its bulk data in ReceiveSnapshot), then lets the
// storage drop what the snapshot covers.
func (g *Group) restore(snap *raftpb.Snapshot) bool {
	md := snap.GetMetadata()
	if err := g.sm.Restore(snap); err != nil {
		g.fatal("restore snapshot", err)
		return false
	}
	g.failFrom(0, ErrOutcomeUnknown)
	g.applied, g.snapIndex = md.GetIndex(), md.GetIndex()
	g.smApplied = max(g.smApplied, md.GetIndex())
	g.setConf(raftpb.EnsureConfState(md.GetConfState()))
	if err := g.storage.Release(snap); err != nil {
		g.fatal("release storage", err)
		return false
	}
	g.resolveReads()
	return true
}

func (g *Group) applyCommitted(ents []*raftpb.Entry) bool {
	for _, e := range ents {
		if e.GetIndex() <= g.applied {
			continue
		}
		var ok bool
		switch e.GetType() {
		case raftpb.EntryNormal:
			ok = g.applyNormal(e)
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			ok = g.applyConfChange(e)
		default:
			g.fatal("apply", fmt.Errorf("entry %d: unknown type %d", e.GetIndex(), e.GetType()))
		}
		if !ok {
			return false
		}
		g.applied = e.GetIndex()
		g.bytesSinceSnap += uint64(len(e.GetData()))
	}
	g.metrics.applied.Add(uint64(len(ents)))
	g.resolveReads()
	return true
}

// applied is one payload's outcome, for its proposer's waiter.
type applied struct {
	o     origin
	value any
}

func (g *Group) applyNormal(e *raftpb.Entry) bool {
	g.results = g.results[:0]
	sub := 0
	err := eachPayload(e.GetData(), func(o origin, payload []byte) error {
		var value any
		if e.GetIndex() > g.smApplied {
			var err error
			value, err = g.sm.Apply(Entry{Index: e.GetIndex(), Term: e.GetTerm(), Sub: sub, Data: payload})
			if err != nil {
				return err
			}
			g.metrics.appliedBytes.Add(uint64(len(payload)))
		}
		sub++
		g.results = append(g.results, applied{o, value})
		return nil
	})
	if err != nil {
		g.fatal("apply", fmt.Errorf("entry %d: %w", e.GetIndex(), err))
		return false
	}
	g.resolve(e.GetIndex(), g.results)
	clear(g.results)
	return true
}

func (g *Group) applyConfChange(e *raftpb.Entry) bool {
	var cc raftpb.ConfChangeI
	var ctx []byte
	if e.GetType() == raftpb.EntryConfChange {
		var c raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			g.fatal("apply", fmt.Errorf("conf change %d: %w", e.GetIndex(), err))
			return false
		}
		cc = &c
	} else {
		var c raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			g.fatal("apply", fmt.Errorf("conf change %d: %w", e.GetIndex(), err))
			return false
		}
		cc, ctx = &c, c.GetContext()
	}
	before := g.conf
	cs := g.raw.ApplyConfChange(cc)
	g.setConf(cs)
	if ci, ok := g.sm.(ConfIndexer); ok && e.GetIndex() > g.smApplied {
		ci.SkipEntry(e.GetIndex())
	}
	// raft.Bootstrap writes a new group's first members at term 1;
	// only a change proposed since needs a fresh snapshot.
	if e.GetTerm() > 1 && addsMember(before, g.conf) {
		g.memberAddedAt = e.GetIndex()
	}
	g.log.Info("configuration changed", "index", e.GetIndex(), "conf", raft.DescribeConfState(cs))
	o, _, err := unframe(ctx)
	if err != nil {
		o = origin{}
	}
	g.resolve(e.GetIndex(), []applied{{o, cs}})
	return true
}

// resolve completes the waiters of our proposals in the entry at index,
// with the outcomes in results (in payload order), and fails any waiter
// that the log passed over. Our proposals sit in byIndex in log order, so
// one forward scan of results matches them.
func (g *Group) resolve(index uint64, results []applied) {
	next := 0
	for len(g.byIndex) > 0 && g.byIndex[0].index <= index {
		p := g.byIndex[0]
		g.byIndex[0] = nil
		g.byIndex = g.byIndex[1:]
		delete(g.waiters, p.origin.id)
		if p.index == index {
			for next < len(results) && results[next].o != p.origin {
				next++
			}
			if next < len(results) {
				p.finish(results[next].value, nil)
				next++
				continue
			}
		}
		p.finish(nil, ErrProposalLost)
	}
}

// startRead runs on the owner for ReadIndex.
func (g *Group) startRead(r *readRequest) {
	g.nextRead++
	id := g.nextRead
	g.reads[id] = r
	ctx := make([]byte, 8)
	binary.BigEndian.PutUint64(ctx, id)
	g.raw.ReadIndex(ctx)
}

func (g *Group) noteReadStates(states []raft.ReadState) {
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		if r := g.reads[id]; r != nil {
			delete(g.reads, id)
			r.index = rs.Index
			g.readWait = append(g.readWait, r)
		}
	}
	g.resolveReads()
}

func (g *Group) resolveReads() {
	kept := g.readWait[:0]
	for _, r := range g.readWait {
		if r.index <= g.applied {
			close(r.done)
			continue
		}
		kept = append(kept, r)
	}
	clear(g.readWait[len(kept):])
	g.readWait = kept
}

// failReadsWithoutIndex fails the reads raft forgot when leadership moved.
func (g *Group) failReadsWithoutIndex() {
	if len(g.reads) == 0 {
		return
	}
	bs := g.raw.BasicStatus()
	for id, r := range g.reads {
		delete(g.reads, id)
		r.err = &NotLeaderError{Leader: bs.Lead, Term: bs.HardState.GetTerm()}
		close(r.done)
	}
}
