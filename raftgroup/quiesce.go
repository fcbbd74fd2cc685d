package raftgroup

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// quiesceContext tags the last heartbeats of a leader that is about to
// stop ticking. Receivers strip it before raft sees the message.
var quiesceContext = []byte("raftq/quiesce")

// canQuiesce reports whether this leader has nothing left to do: all of
// its log is committed and applied, every member has all of it and is
// streaming (so a heartbeat response asks for nothing), no transfer or
// read is pending, and the Host has heard from every member recently.
func (g *Group) canQuiesce() bool {
	bs := g.raw.BasicStatus()
	last := g.lastIndex()
	if bs.RaftState != raft.StateLeader || bs.LeadTransferee != 0 || len(g.reads) > 0 || len(g.readWait) > 0 ||
		bs.HardState.GetCommit() != last || g.applied != last || len(g.waiters) > 0 {
		return false
	}
	ok := true
	g.raw.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id != g.node && (pr.Match != last || pr.State != tracker.StateReplicate) {
			ok = false
		}
	})
	return ok && g.host.membersAlive(g.conf)
}

// tagQuiesce marks this Ready's heartbeats as the quiesce notice. Once
// every member has been sent one, the leader stops ticking.
func (g *Group) tagQuiesce(msgs []*raftpb.Message) {
	tagged := 0
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgHeartbeat && len(m.GetContext()) == 0 {
			m.Context = quiesceContext
			tagged++
		}
	}
	if tagged == 0 {
		return
	}
	g.quiescing = false
	g.quiesced.Store(true)
	g.metrics.quiesces.Add(1)
}

// onQuiesceNotice quiesces a follower that the notice's sender leads in
// the notice's term, unless it has work of its own in flight.
func (g *Group) onQuiesceNotice(m *raftpb.Message) {
	bs := g.raw.BasicStatus()
	if bs.RaftState == raft.StateFollower && bs.Lead == m.GetFrom() && bs.HardState.GetTerm() == m.GetTerm() &&
		len(g.reads) == 0 && len(g.readWait) == 0 {
		g.quiesced.Store(true)
	}
}

// markActive resets the idle clock and wakes a quiesced group, which the
// Host then ticks again.
func (g *Group) markActive() {
	g.idleTicks = 0
	g.quiescing = false
	g.quiesced.Store(false)
}
