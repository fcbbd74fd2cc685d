package raftgroup

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/raftq/raftq/internal/logging"
)

// Group is one raft group replica on this node. Its RawNode, storage and
// state machine belong to one owner: the group's goroutine, or the caller
// of Host.Process in manual mode. Other goroutines use the exported
// methods, which queue work for the owner and never touch raft state.
type Group struct {
	id, node uint64
	host     *Host
	cfg      *Config
	sm       StateMachine
	storage  Storage
	mem      *raft.MemoryStorage
	raw      *raft.RawNode
	log      *slog.Logger

	// Owner-only state.
	confState *raftpb.ConfState
	conf      confView
	applied   uint64 // last entry applied, conf changes included
	// memberAddedAt is the index of the latest applied conf change that
	// added a member (snapshotGate).
	memberAddedAt uint64
	smApplied     uint64 // the state machine held entries up to here at open
	snapIndex     uint64 // last snapshot index
	// bytesSinceSnap counts entry bytes applied since the last snapshot.
	bytesSinceSnap uint64
	snapping       *snapJob // a snapshot being written in the background
	slow           slowLog
	waiters        map[uint64]*Proposal
	results        []applied         // scratch for applyNormal
	saved          *raftpb.HardState // the last hard state handed to storage
	appending      []*pendingAppend  // AsyncStorageWrites: saves not yet finished, in order
	held           []*Proposal       // proposals waiting for appending to drain
	byIndex        []*Proposal       // appended, not yet applied, ascending index
	unindexed      []*Proposal       // stepped this cycle, not yet seen in a Ready
	forward        bool              // GroupConfig.ForwardProposals
	failOnStepDown bool              // GroupConfig.FailOnStepDown
	forwarded      []forwardedProposal
	reads          map[uint64]*readRequest
	readWait       []*readRequest // index known, waiting for apply
	nextRead       uint64
	idleTicks      int
	holdTicks      int  // GroupConfig.HoldElectionTicks left to wait
	quiescing      bool // tag the next heartbeats as the quiesce notice
	halted         bool
	lastSoft       raft.SoftState
	// progressTargets pairs with progress (progress.go).
	progressTargets []progressTarget

	// Shared with other goroutines.
	nextID       atomic.Uint64
	pendingTicks atomic.Int32
	quiesced     atomic.Bool
	notifyc      chan struct{}
	stopc        chan struct{}
	donec        chan struct{}
	metrics      groupMetrics

	mu    sync.Mutex // guards the inbox below; a leaf lock
	inbox inbox
	space chan struct{} // closed when the proposal queue drains

	// progress is the leader's view of its voters' logs (nil when not
	// leading), stored by the owner (progress.go).
	progress atomic.Pointer[progressView]

	status   atomic.Pointer[Status]
	statusMu sync.Mutex // guards statusCh; a leaf lock
	statusCh chan struct{}
}

type confView struct {
	Voters, VotersOutgoing, Learners, LearnersNext []uint64
}

type inbox struct {
	msgs        []*raftpb.Message
	props       []*Proposal
	ops         []func()
	unreachable []uint64
	closed      bool
}

type readRequest struct {
	index uint64
	done  chan struct{}
	err   error
}

func newGroup(h *Host, gc GroupConfig, st Storage) (*Group, error) {
	g := &Group{
		id: gc.ID, node: h.cfg.NodeID, host: h, cfg: &h.cfg, sm: gc.StateMachine, storage: st,
		forward:        gc.ForwardProposals,
		failOnStepDown: gc.FailOnStepDown,
		mem:            raft.NewMemoryStorage(),
		log:            h.log.With("group", gc.ID),
		waiters:        map[uint64]*Proposal{},
		reads:          map[uint64]*readRequest{},
		notifyc:        make(chan struct{}, 1),
		stopc:          make(chan struct{}),
		donec:          make(chan struct{}),
		space:          make(chan struct{}),
		statusCh:       make(chan struct{}),
	}
	g.nextID.Store(randomIDBase())
	state, err := st.Load()
	if err != nil {
		return nil, fmt.Errorf("load group %d: %w", gc.ID, err)
	}
	if err := g.restoreStorage(state); err != nil {
		return nil, err
	}
	if err := g.openRaft(gc, state); err != nil {
		return nil, err
	}
	g.publishStatus()
	return g, nil
}

// randomIDBase starts proposal ids at a random point so that ids from an
// earlier incarnation of this node, still in the log, never match a new
// waiter. crypto/rand is the source so that the simulator's seeded
// randomness (cryptotest.SetGlobalRandom) makes it deterministic.
func randomIDBase() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("raftgroup: crypto/rand: %s", err))
	}
	return binary.BigEndian.Uint64(b[:]) >> 2 // room to count up
}

// restoreStorage loads the persisted state into raft's MemoryStorage and
// brings a state machine that is behind the snapshot up to it (a crash
// between saving a received snapshot and Restore leaves it there).
func (g *Group) restoreStorage(s State) error {
	g.confState = &raftpb.ConfState{}
	if snap := s.Snapshot; !raft.IsEmptySnap(snap) {
		if err := g.mem.ApplySnapshot(snap); err != nil {
			return fmt.Errorf("group %d: apply snapshot: %w", g.id, err)
		}
		g.snapIndex = snap.GetMetadata().GetIndex()
		g.applied = g.snapIndex
		g.confState = raftpb.EnsureConfState(snap.GetMetadata().GetConfState())
	}
	if s.HardState != nil {
		if err := g.mem.SetHardState(s.HardState); err != nil {
			return fmt.Errorf("group %d: set hard state: %w", g.id, err)
		}
		g.saved = s.HardState
	}
	if err := g.mem.Append(s.Entries); err != nil {
		return fmt.Errorf("group %d: append entries: %w", g.id, err)
	}
	g.setConf(g.confState)
	g.smApplied = g.sm.Applied()
	if g.smApplied < g.snapIndex {
		if err := g.sm.Restore(s.Snapshot); err != nil {
			return fmt.Errorf("group %d: restore state machine: %w", g.id, err)
		}
		g.smApplied = g.snapIndex
	}
	return nil
}

// openRaft creates the RawNode. Its Applied is the snapshot index, not
// StateMachine.Applied(): raft re-delivers every committed entry after the
// snapshot so that conf changes in them reach raft's configuration again;
// the group passes to the state machine only those after its Applied().
func (g *Group) openRaft(gc GroupConfig, s State) error {
	rc := &raft.Config{
		ID:                        g.node,
		ElectionTick:              g.cfg.ElectionTicks,
		HeartbeatTick:             g.cfg.HeartbeatTicks,
		Storage:                   snapshotGate{g.mem, g},
		Applied:                   g.snapIndex,
		MaxSizePerMsg:             g.cfg.MaxSizePerMsg,
		MaxCommittedSizePerReady:  g.cfg.MaxCommittedSizePerReady,
		MaxUncommittedEntriesSize: g.cfg.MaxUncommittedEntriesSize,
		MaxInflightMsgs:           g.cfg.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: !gc.ForwardProposals,
		StepDownOnRemoval:         true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		AsyncStorageWrites:        g.cfg.AsyncStorageWrites,
		Logger:                    logging.Raft(g.log),
	}
	raw, err := raft.NewRawNode(rc)
	if err != nil {
		return fmt.Errorf("group %d: new raft node: %w", g.id, err)
	}
	g.raw = raw
	if s.IsNew() && !gc.Join {
		peers := make([]raft.Peer, len(gc.Peers))
		for i, id := range gc.Peers {
			peers[i] = raft.Peer{ID: id}
		}
		if err := raw.Bootstrap(peers); err != nil {
			return fmt.Errorf("group %d: bootstrap: %w", g.id, err)
		}
		g.holdTicks = gc.HoldElectionTicks
	}
	g.lastSoft = raw.BasicStatus().SoftState
	return nil
}

// ID returns the group id.
func (g *Group) ID() uint64 { return g.id }

// Propose submits one entry, whose payload is the parts joined (so a
// caller can add a header without copying its data first), and returns at
// once; the Proposal reports the local durable append and the apply. The
// group keeps the parts (small proposals are packed together later, and
// copied only then), so the caller must not change them afterwards. Entries proposed by one
// caller enter the log in call order (a proposal that fails takes its
// later ones in the same batch with it, so order is never broken). It
// blocks only while the group's proposal queue is full, until ctx ends.
// On a non-leader it fails fast with *NotLeaderError.
func (g *Group) Propose(ctx context.Context, parts ...[]byte) (*Proposal, error) {
	if partsLen(parts) == 0 {
		return nil, ErrEmptyProposal
	}
	if err := g.proposeCheck(); err != nil {
		return nil, err
	}
	p := newProposal(origin{node: g.node, id: g.nextID.Add(1)})
	if n := partsLen(parts); n <= coalesceMax {
		p.parts, p.size = parts, n+frameHeader+binary.MaxVarintLen32
	} else {
		p.data = frame(p.origin, parts...)
		p.size = len(p.data)
	}
	if err := g.enqueueProposal(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// ProposeConfChange submits a membership change (joint consensus and
// learners via ConfChangeV2). Its Result.Value is the new
// *raftpb.ConfState. raft refuses a second change while one is pending:
// that proposal fails with ErrProposalDropped.
func (g *Group) ProposeConfChange(ctx context.Context, cc *raftpb.ConfChangeV2) (*Proposal, error) {
	if err := g.leaderCheck(); err != nil {
		return nil, err
	}
	p := newProposal(origin{node: g.node, id: g.nextID.Add(1)})
	c := &raftpb.ConfChangeV2{Transition: cc.Transition, Changes: cc.Changes, Context: frame(p.origin, nil)}
	p.cc = c
	p.size = 64
	if err := g.enqueueProposal(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// proposeCheck is leaderCheck, relaxed for a forwarding group to "some
// leader is known".
func (g *Group) proposeCheck() error {
	if s := g.status.Load(); g.forward && !s.Stopped && s.Leader != 0 {
		return nil
	}
	return g.leaderCheck()
}

func (g *Group) leaderCheck() error {
	s := g.status.Load()
	if s.Stopped {
		return ErrStopped
	}
	if s.Role != RoleLeader {
		return &NotLeaderError{Leader: s.Leader, Term: s.Term}
	}
	return nil
}

func (g *Group) enqueueProposal(ctx context.Context, p *Proposal) error {
	for {
		g.mu.Lock()
		if g.inbox.closed {
			g.mu.Unlock()
			return ErrStopped
		}
		if len(g.inbox.props) < g.cfg.MaxQueuedProposals {
			g.inbox.props = append(g.inbox.props, p)
			g.mu.Unlock()
			g.notify()
			return nil
		}
		space := g.space
		g.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TransferLeadership asks the leader (this node) to hand leadership to
// node to, and waits until to leads or ctx ends.
func (g *Group) TransferLeadership(ctx context.Context, to uint64) error {
	if err := g.leaderCheck(); err != nil {
		return err
	}
	if err := g.submit(func() { g.raw.TransferLeader(to) }); err != nil {
		return err
	}
	term := g.Status().Term
	s, err := g.WaitStatus(ctx, func(s Status) bool {
		return s.Leader == to || s.Term > term && s.Leader != 0 && s.Leader != g.node
	})
	if err != nil {
		return err
	}
	if s.Leader != to {
		return fmt.Errorf("%w: node %d leads term %d", ErrTransferFailed, s.Leader, s.Term)
	}
	return nil
}

// Campaign makes this replica start an election (a pre-vote first).
func (g *Group) Campaign() error {
	return g.submit(func() {
		if err := g.raw.Campaign(); err != nil {
			g.log.Debug("campaign", "err", err)
		}
	})
}

// ReadIndex returns a commit index that is linearizable at the time of
// the call, once this replica has applied it: a read of the state machine
// after ReadIndex returns sees every write acknowledged before the call.
// Works on followers too (the leader is asked).
func (g *Group) ReadIndex(ctx context.Context) (uint64, error) {
	s := g.Status()
	if s.Stopped {
		return 0, ErrStopped
	}
	if s.Leader == 0 {
		return 0, &NotLeaderError{Term: s.Term}
	}
	r := &readRequest{done: make(chan struct{})}
	if err := g.submit(func() { g.startRead(r) }); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// submit queues op for the owner.
func (g *Group) submit(op func()) error {
	g.mu.Lock()
	if g.inbox.closed {
		g.mu.Unlock()
		return ErrStopped
	}
	g.inbox.ops = append(g.inbox.ops, op)
	g.mu.Unlock()
	g.notify()
	return nil
}

// deliver queues an inbound raft message; it reports false (and drops
// the message) when the queue is full: raft retransmits.
func (g *Group) deliver(m *raftpb.Message) bool {
	g.mu.Lock()
	if g.inbox.closed || len(g.inbox.msgs) >= g.cfg.MaxInboundMessages {
		g.mu.Unlock()
		g.metrics.droppedIn.Add(1)
		return false
	}
	g.inbox.msgs = append(g.inbox.msgs, m)
	g.mu.Unlock()
	g.notify()
	return true
}

// reportUnreachable tells raft, on the owner, that a message to node to
// was dropped, so that it probes instead of streaming.
func (g *Group) reportUnreachable(to uint64) {
	g.mu.Lock()
	if !containsID(g.inbox.unreachable, to) {
		g.inbox.unreachable = append(g.inbox.unreachable, to)
	}
	g.mu.Unlock()
	g.notify()
}

func (g *Group) reportSnapshot(to uint64, err error) {
	status := raft.SnapshotFinish
	if err != nil {
		g.log.Warn("snapshot send failed", "to", to, "err", err)
		status = raft.SnapshotFailure
	}
	_ = g.submit(func() { g.raw.ReportSnapshot(to, status) })
}

func (g *Group) notify() {
	select {
	case g.notifyc <- struct{}{}:
	default:
	}
}

// addTick is called by the Host's ticker.
func (g *Group) addTick() {
	g.pendingTicks.Add(1)
	g.notify()
}

func (g *Group) takeInbox() inbox {
	g.mu.Lock()
	in := g.inbox
	g.inbox = inbox{closed: in.closed}
	if len(in.props) >= g.cfg.MaxQueuedProposals {
		close(g.space)
		g.space = make(chan struct{})
	}
	g.mu.Unlock()
	return in
}

func (g *Group) lastIndex() uint64 {
	i, _ := g.mem.LastIndex()
	return i
}
