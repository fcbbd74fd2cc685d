package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// How the executor carries out membership faults.
const (
	// memberCallTimeout bounds one admin call, so that a cluster without
	// a metadata quorum holds up the schedule for that long at most.
	memberCallTimeout = 5 * time.Second
	// memberPoll is how often a wait for moves looks again.
	memberPoll = 250 * time.Millisecond
	// finalSettle bounds the final heal's wait for every move to end;
	// moves still under way at half of it are cancelled.
	finalSettle = 60 * time.Second
	// unseenGrace is how long an accepted move may go unseen (a new
	// controller that has not applied it yet) before a look that finds
	// the partition on its old replicas counts as its end.
	unseenGrace = 2 * time.Second
	// minCall is the least time an admin call gets when the schedule's
	// next step is nearer: a cluster that cannot answer then holds the
	// schedule up by about that much per call, not memberCallTimeout.
	minCall = time.Second
)

// MemberStats counts what the membership nemesis did in a run. A move
// ends completed, cancelled or elsewhere, or is still in flight when the
// final heal gives up (Unfinished).
type MemberStats struct {
	Moves      int `json:"moves"`      // moves the cluster took (reorders aside)
	Completed  int `json:"completed"`  // moves that ended on their target
	Cancelled  int `json:"cancelled"`  // moves that ended back on their replicas after a cancel
	Elsewhere  int `json:"elsewhere"`  // moves that ended on neither (no cancel and back, or a third set): suspicious
	Unfinished int `json:"unfinished"` // moves still under way after the final heal
	Cancels    int `json:"cancels"`    // cancels the cluster took
	// StopCancels are the cancels of moves that had not ended by their
	// fault's stop, or by the middle of the final heal's wait.
	StopCancels   int `json:"stop_cancels"`
	KilledMidMove int `json:"killed_mid_move"` // nodes killed while their partition moved
	Reorders      int `json:"reorders"`        // preferred-leader changes the cluster took
	LeaderMoved   int `json:"leader_moved"`    // reorders whose preferred replica led by the fault's stop
	Refused       int `json:"refused"`         // moves, reorders and cancels the cluster refused
	Skipped       int `json:"skipped"`         // faults that found nothing to do
	// Decommissions are the nodes decommissioned (and recommissioned at
	// their fault's stop); Emptied those that held no replica by then.
	Decommissions int `json:"decommissions"`
	Emptied       int `json:"emptied"`
}

// String reads "moves=5 completed=3 cancelled=2 ...", every count.
func (s MemberStats) String() string {
	return fmt.Sprintf("moves=%d completed=%d cancelled=%d elsewhere=%d unfinished=%d cancels=%d stop-cancels=%d "+
		"killed-mid-move=%d reorders=%d leader-moved=%d refused=%d skipped=%d decommissions=%d emptied=%d",
		s.Moves, s.Completed, s.Cancelled, s.Elsewhere, s.Unfinished, s.Cancels, s.StopCancels,
		s.KilledMidMove, s.Reorders, s.LeaderMoved, s.Refused, s.Skipped, s.Decommissions, s.Emptied)
}

// memberRun is one membership fault under way: what it chose, the moves
// it started and the nodes it killed, for its stop.
type memberRun struct {
	x      *Executor
	env    MembershipEnv
	action MemberAction
	rng    *rand.Rand
	plan   memberPlan
	moves  []*moveRun
	killed []int
	leader int // reorder: the partition's leader when it began
	// by is when the stop stops waiting; final says the stop runs in the
	// final heal (or after the workload ended), which leaves moves still
	// under way to the final settle instead of cancelling them.
	by    time.Time
	final bool
}

// moveRun is one move the nemesis started (or may have: accepted is
// false when the request's answer was lost).
type moveRun struct {
	Reassignment
	begun      time.Time
	accepted   bool
	seen       bool // seen moving, or counted in MemberStats.Moves
	cancelSent bool
	done       bool // its end was seen and counted
}

// membership returns the env's membership side, or an error.
func (x *Executor) membership() (MembershipEnv, error) {
	env, ok := x.env.(MembershipEnv)
	if !ok {
		return nil, fmt.Errorf("%w: membership on an env without an admin API (%T)", ErrUnsupported, x.env)
	}
	return env, nil
}

// startMembership chooses what fault f does, from the cluster as it is
// now, and starts it.
func (x *Executor) startMembership(ctx context.Context, f Fault) ([]int, string, error) {
	env, err := x.membership()
	if err != nil {
		return nil, string(f.Action), err
	}
	m := &memberRun{x: x, env: env, action: f.Action, rng: rand.New(rand.NewPCG(f.Seed, uint64(f.ID)))}
	x.members[f.ID] = m
	st, err := x.memberState(ctx, env)
	if err != nil {
		return nil, fmt.Sprintf("%s: no assignment", f.Action), err
	}
	earlier := x.observe(st)
	m.plan, err = chooseMembership(f.Action, m.rng, st, x.s.Config.Membership)
	if errors.Is(err, ErrNothingToMove) {
		x.mstats.Skipped++
		return nil, fmt.Sprintf("%s: nothing to do, every partition is moving", f.Action) + earlierNote(earlier), nil
	}
	if err != nil {
		return nil, string(f.Action), err
	}
	if f.Action == ActionReorder {
		m.leader = leaderOf(st, m.plan.moves[0].TopicPartition)
	}
	detail, err := memberTable[f.Action].start(ctx, m)
	return m.killed, detail + earlierNote(earlier), err
}

// observe counts the end of every open move st shows ended (also those
// of other faults: a later fault may move the partition on) and returns
// a note for each.
func (x *Executor) observe(st MemberState) []string {
	var notes []string
	x.open, notes = x.ended(st, x.open)
	return notes
}

func earlierNote(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return " (earlier moves: " + strings.Join(notes, "; ") + ")"
}

// stopMembership ends fault f: what its action's stop does, waiting
// until m.by at most.
func (x *Executor) stopMembership(ctx context.Context, f Fault) (string, error) {
	m := x.members[f.ID]
	if m == nil || m.env == nil {
		return "nothing to undo", nil
	}
	m.by, m.final = time.Now(), true
	if !x.healing {
		m.by, m.final = time.Now().Add(x.s.Config.Membership.Settle), false
		if !x.next.IsZero() && x.next.Before(m.by) {
			m.by = x.next
		}
	}
	if m.plan.moves == nil && m.plan.node == 0 {
		return "nothing to undo", nil
	}
	return memberTable[m.action].stop(ctx, m)
}

func (x *Executor) memberState(ctx context.Context, env MembershipEnv) (MemberState, error) {
	ctx, cancel := x.callCtx(ctx)
	defer cancel()
	parts, err := env.Assignment(ctx)
	return MemberState{Nodes: env.NodeIDs(), Partitions: parts}, err
}

func leaderOf(st MemberState, tp TopicPartition) int {
	if p, ok := st.find(tp); ok {
		return p.Leader
	}
	return 0
}

func (st MemberState) find(tp TopicPartition) (PartitionReplicas, bool) {
	for _, p := range st.Partitions {
		if p.TopicPartition == tp {
			return p, true
		}
	}
	return PartitionReplicas{}, false
}

// callCtx bounds one admin call: memberCallTimeout, or the time until
// the schedule's next step if that is nearer, but at least minCall. The
// final heal's calls get memberCallTimeout.
func (x *Executor) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := memberCallTimeout
	if !x.healing && !x.next.IsZero() {
		d = min(d, max(minCall, time.Until(x.next)))
	}
	return context.WithTimeout(ctx, d)
}

// reassign sends items, tracks the moves the cluster took (or may have)
// and counts the refusals. It returns the step's detail, "move a/1
// [1,2,3]->[4,5,2], a/2 ...", with any refusal, and the refusals and the
// request's error.
func (m *memberRun) reassign(ctx context.Context, verb string, items []Reassignment) (string, error) {
	cctx, cancel := m.x.callCtx(ctx)
	errs, err := m.env.Reassign(cctx, items)
	cancel()
	parts := make([]string, len(items))
	var refused []error
	for i, it := range items {
		parts[i] = it.String()
		var ierr error
		if err == nil && i < len(errs) {
			ierr = errs[i]
		}
		switch {
		case ierr != nil:
			m.x.mstats.Refused++
			refused = append(refused, fmt.Errorf("%s refused: %w", it.TopicPartition, ierr))
		case verb == "reorder":
			if err == nil {
				m.x.mstats.Reorders++
			}
		default:
			mv := &moveRun{Reassignment: it, begun: time.Now(), accepted: err == nil}
			if mv.accepted {
				mv.seen = true
				m.x.mstats.Moves++
			}
			m.moves = append(m.moves, mv)
			m.x.open = append(m.x.open, mv)
		}
	}
	detail := verb + " " + strings.Join(parts, ", ")
	if err != nil {
		err = fmt.Errorf("reassign (the cluster may have taken it): %w", err)
	}
	return detail, errors.Join(append(refused, err)...)
}

// startDecommission decommissions the chosen node, unless another
// fault's decommission is still under way (one at a time: the cluster
// would refuse a second that left too few nodes).
func startDecommission(ctx context.Context, m *memberRun) (string, error) {
	id := m.plan.node
	if len(m.x.decommissioned) > 0 {
		m.x.mstats.Skipped++
		m.plan.node = 0
		return fmt.Sprintf("decommission %d: skipped, node %v is being decommissioned", id, slices.Sorted(maps.Keys(m.x.decommissioned))), nil
	}
	cctx, cancel := m.x.callCtx(ctx)
	err := m.env.Decommission(cctx, id, true)
	cancel()
	if err != nil {
		m.x.mstats.Refused++
		m.plan.node = 0
		return fmt.Sprintf("decommission %d: refused", id), err
	}
	m.x.decommissioned[id] = time.Now()
	m.x.mstats.Decommissions++
	return fmt.Sprintf("decommission %d (its replicas and vote move off)", id), nil
}

// recommission waits, until the stop must end, for the node to hold no
// replica of the topic, then recommissions it.
func recommission(ctx context.Context, m *memberRun) (string, error) {
	id := m.plan.node
	if id == 0 {
		return "decommission: nothing to undo", nil
	}
	held := -1
	for {
		if st, err := m.x.memberState(ctx, m.env); err == nil {
			held = 0
			for _, p := range st.Partitions {
				if slices.Contains(p.Replicas, id) {
					held++
				}
			}
		}
		if held == 0 || !m.x.waitPoll(ctx, m.by, true) {
			break
		}
	}
	return m.x.recommission(ctx, id, held)
}

// recommission ends node id's decommission, held being how many of the
// topic's partitions it still held (-1: unknown).
func (x *Executor) recommission(ctx context.Context, id, held int) (string, error) {
	cctx, cancel := x.callCtx(ctx)
	err := x.mustMembership().Decommission(cctx, id, false)
	cancel()
	if err != nil {
		return fmt.Sprintf("recommission %d: failed", id), err
	}
	took := round(time.Since(x.decommissioned[id]))
	delete(x.decommissioned, id)
	if held == 0 {
		x.mstats.Emptied++
		return fmt.Sprintf("recommission %d: emptied in %s", id, took), nil
	}
	return fmt.Sprintf("recommission %d after %s, %d partitions still on it (their moves cancelled)", id, took, held), nil
}

// mustMembership is membership for a run that has started a membership
// fault, so has one.
func (x *Executor) mustMembership() MembershipEnv {
	env, _ := x.membership()
	return env
}

func startMoves(ctx context.Context, m *memberRun) (string, error) {
	return m.reassign(ctx, "move", m.plan.moves)
}

func startReorder(ctx context.Context, m *memberRun) (string, error) {
	detail, err := m.reassign(ctx, "reorder", m.plan.moves)
	return fmt.Sprintf("%s (leader %d)", detail, m.leader), err
}

// moveThenWait starts the plan's moves and waits the chosen delay; ok is
// false when no move started or ctx ended first (detail and err say so).
func (m *memberRun) moveThenWait(ctx context.Context) (detail string, ok bool, err error) {
	detail, err = m.reassign(ctx, "move", m.plan.moves)
	if len(m.moves) == 0 {
		return detail, false, err
	}
	if !sleep(ctx, m.plan.delay) {
		return detail, false, errors.Join(err, ctx.Err())
	}
	return detail, true, err
}

// startThenCancel starts a move and cancels it after the chosen delay.
func startThenCancel(ctx context.Context, m *memberRun) (string, error) {
	detail, ok, err := m.moveThenWait(ctx)
	if !ok {
		return detail, err
	}
	mv := m.moves[0]
	notes, cerr := m.cancel(ctx, m.moves[:1], false)
	return fmt.Sprintf("%s; cancel %s after %s%s", detail, mv.TopicPartition, round(m.plan.delay), notes[0]), errors.Join(err, cerr)
}

// cancel cancels the moves of mvs in one request, and returns a note
// for each (empty, or why the cluster refused it). A refusal because
// the move has ended already is no error.
func (m *memberRun) cancel(ctx context.Context, mvs []*moveRun, atStop bool) ([]string, error) {
	items := make([]Reassignment, len(mvs))
	for i, mv := range mvs {
		items[i] = Reassignment{TopicPartition: mv.TopicPartition}
	}
	notes := make([]string, len(mvs))
	cctx, cancel := m.x.callCtx(ctx)
	errs, err := m.env.Reassign(cctx, items)
	cancel()
	if err != nil {
		for _, mv := range mvs {
			mv.cancelSent = true // it may have been taken
		}
		return notes, fmt.Errorf("cancel %s (the cluster may have taken it): %w", moveNames(mvs), err)
	}
	var refused []error
	var st *MemberState
	for i, mv := range mvs {
		if i < len(errs) && errs[i] != nil {
			if st == nil {
				if s, serr := m.x.memberState(ctx, m.env); serr == nil {
					st = &s
				}
			}
			if st != nil {
				if p, ok := st.find(mv.TopicPartition); ok && !p.Moving {
					notes[i] = fmt.Sprintf(" (refused, the move had ended: %v)", errs[i])
					continue
				}
			}
			m.x.mstats.Refused++
			refused = append(refused, fmt.Errorf("cancel %s refused: %w", mv.TopicPartition, errs[i]))
			continue
		}
		mv.cancelSent = true
		if !mv.seen { // the cluster cancels only a move under way
			mv.seen = true
			m.x.mstats.Moves++
		}
		m.x.mstats.Cancels++
		if atStop {
			m.x.mstats.StopCancels++
		}
	}
	return notes, errors.Join(refused...)
}

// startThenKill starts a move and, after the chosen delay, kills the
// partition's leader or an adding replica if the move is still under
// way.
func startThenKill(ctx context.Context, m *memberRun) (string, error) {
	detail, ok, err := m.moveThenWait(ctx)
	if !ok {
		return detail, err
	}
	mv := m.moves[0]
	st, serr := m.x.memberState(ctx, m.env)
	if serr != nil {
		return detail + "; no kill", errors.Join(err, serr)
	}
	p, ok := st.find(mv.TopicPartition)
	if !ok || !p.Moving {
		return fmt.Sprintf("%s; the move ended within %s: no kill", detail, round(m.plan.delay)), err
	}
	victim, role := m.victim(p, mv)
	if victim == 0 {
		return fmt.Sprintf("%s; no live leader or adding replica to kill", detail), err
	}
	m.killed = []int{victim}
	kerr := m.env.Kill(ctx, victim)
	if kerr == nil {
		m.x.mstats.KilledMidMove++
	}
	return fmt.Sprintf("kill %d (%s) mid-move of %s, %s in", victim, role, mv.Reassignment, round(m.plan.delay)), errors.Join(err, kerr)
}

// victim is the node to kill: the chosen role's, else the other's; 0
// when neither has a live node.
func (m *memberRun) victim(p PartitionReplicas, mv *moveRun) (int, string) {
	adding := p.Adding
	if len(adding) == 0 {
		adding = minusInts(mv.To, mv.From)
	}
	adding = slices.DeleteFunc(slices.Clone(adding), func(id int) bool { return !m.env.Running(id) })
	leader := p.Leader
	if leader != 0 && !m.env.Running(leader) {
		leader = 0
	}
	pickAdding := func() int { return adding[m.rng.IntN(len(adding))] }
	switch {
	case m.plan.victim == victimAdding && len(adding) > 0:
		return pickAdding(), victimAdding
	case leader != 0:
		return leader, victimLeader
	case len(adding) > 0:
		return pickAdding(), victimAdding
	}
	return 0, ""
}

// settleMoves waits until m.by for the fault's moves to end and cancels
// those that did not (unless m.final, which leaves them to the final
// settle); moves still under way stay open for later looks.
func settleMoves(ctx context.Context, m *memberRun) (string, error) {
	left, notes, err := m.x.awaitMoves(ctx, m.env, m.moves, m.by, !m.final)
	if m.x.played() {
		m.final = true
	}
	var toCancel []*moveRun
	for _, mv := range left {
		switch {
		case mv.cancelSent:
			notes = append(notes, fmt.Sprintf("%s still moving back after %s", mv.TopicPartition, round(time.Since(mv.begun))))
		case m.final:
			notes = append(notes, fmt.Sprintf("%s still moving after %s: left to the final heal", mv.TopicPartition, round(time.Since(mv.begun))))
		default:
			toCancel = append(toCancel, mv)
		}
	}
	if len(toCancel) > 0 {
		cnotes, cerr := m.cancel(ctx, toCancel, true)
		for i, mv := range toCancel {
			notes = append(notes, fmt.Sprintf("%s still moving after %s: cancel%s", mv.TopicPartition, round(time.Since(mv.begun)), cnotes[i]))
		}
		err = errors.Join(err, cerr)
	}
	if len(notes) == 0 {
		notes = append(notes, "no move to wait for")
	}
	return strings.Join(notes, "; "), err
}

// restartThenSettle restarts the node kill-mid-move killed, then
// settles the move.
func restartThenSettle(ctx context.Context, m *memberRun) (string, error) {
	var detail string
	var err error
	if len(m.killed) > 0 {
		detail = fmt.Sprintf("restart %v; ", m.killed)
		err = m.env.EnsureRunning(ctx, m.killed...)
	}
	more, serr := settleMoves(ctx, m)
	return detail + more, errors.Join(err, serr)
}

// awaitLeader waits until m.by for the reordered partition's preferred
// replica to lead it.
func awaitLeader(ctx context.Context, m *memberRun) (string, error) {
	r := m.plan.moves[0]
	want, last := r.To[0], 0
	var lastErr error
	for {
		st, err := m.x.memberState(ctx, m.env)
		if lastErr = err; err == nil {
			last = leaderOf(st, r.TopicPartition)
			if last == want {
				m.x.mstats.LeaderMoved++
				return fmt.Sprintf("%s led by its preferred replica %d (was %d)", r.TopicPartition, want, m.leader), nil
			}
		}
		if !m.x.waitPoll(ctx, m.by, true) {
			break
		}
	}
	detail := fmt.Sprintf("%s still led by %d, preferred %d", r.TopicPartition, last, want)
	if lastErr != nil {
		detail += fmt.Sprintf(" (last look: %v)", lastErr)
	}
	return detail, nil
}

// awaitMoves polls the assignment until every move of mvs has ended or
// by has passed (or, when cut, the workload has ended), and returns the
// moves still under way and a note for each that ended.
func (x *Executor) awaitMoves(ctx context.Context, env MembershipEnv, mvs []*moveRun, by time.Time, cut bool) ([]*moveRun, []string, error) {
	notDone := func() []*moveRun {
		return slices.DeleteFunc(slices.Clone(mvs), func(mv *moveRun) bool { return mv.done })
	}
	left := notDone()
	var notes []string
	var lastErr error
	for len(left) > 0 {
		st, err := x.memberState(ctx, env)
		if lastErr = err; err == nil {
			notes = append(notes, x.observe(st)...)
			left = notDone()
		}
		if len(left) == 0 || !x.waitPoll(ctx, by, cut) {
			break
		}
	}
	if len(left) > 0 && lastErr != nil {
		return left, notes, fmt.Errorf("moves of %s: %w", moveNames(left), lastErr)
	}
	return left, notes, nil
}

// waitPoll sleeps one poll interval unless by comes first, ctx ends or,
// when cut, the workload has ended; it reports whether to look again.
func (x *Executor) waitPoll(ctx context.Context, by time.Time, cut bool) bool {
	d := min(x.poll, time.Until(by))
	if d <= 0 || (cut && x.played()) {
		return false
	}
	var done <-chan struct{}
	if cut && x.playCtx != nil {
		done = x.playCtx.Done()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-done:
		return false
	}
}

// played reports whether Play's context has ended: the workload is over
// and the final heal will settle what is left.
func (x *Executor) played() bool { return x.playCtx != nil && x.playCtx.Err() != nil }

// ended sorts mvs into those st shows still under way and notes on
// those that ended, counting their outcomes.
func (x *Executor) ended(st MemberState, mvs []*moveRun) (left []*moveRun, notes []string) {
	for _, mv := range mvs {
		if mv.done {
			continue // counted already, by another look
		}
		p, ok := st.find(mv.TopicPartition)
		switch {
		case !ok:
			left = append(left, mv)
			continue
		case p.Moving:
			if !mv.seen {
				mv.seen = true
				x.mstats.Moves++
			}
			left = append(left, mv)
			continue
		case mv.accepted && !mv.cancelSent && sameSet(p.Replicas, mv.From) && time.Since(mv.begun) < unseenGrace:
			left = append(left, mv) // a controller that has not applied it yet
			continue
		}
		took := round(time.Since(mv.begun))
		mv.done = true
		switch {
		case sameSet(p.Replicas, mv.To):
			if !mv.seen {
				mv.seen = true
				x.mstats.Moves++
			}
			x.mstats.Completed++
			notes = append(notes, fmt.Sprintf("%s on %s after %s", mv.TopicPartition, ids(p.Replicas), took))
		case sameSet(p.Replicas, mv.From) && mv.cancelSent:
			x.mstats.Cancelled++
			notes = append(notes, fmt.Sprintf("%s back on %s after %s", mv.TopicPartition, ids(p.Replicas), took))
		case sameSet(p.Replicas, mv.From) && !mv.seen:
			notes = append(notes, fmt.Sprintf("%s still on %s: the move was not taken", mv.TopicPartition, ids(p.Replicas)))
		default:
			x.mstats.Elsewhere++
			notes = append(notes, fmt.Sprintf("%s ended on %s, neither its target %s nor, after a cancel, %s (after %s)",
				mv.TopicPartition, ids(p.Replicas), ids(mv.To), ids(mv.From), took))
		}
	}
	return left, notes
}

// settleMembership is the final heal's share of the membership nemesis,
// after every node is up and every partition healed: it waits until no
// partition moves, resolving the moves that stops left under way, and
// cancels every move still under way half way through its wait. It
// reports as its own event, with the run's MemberStats.
func (x *Executor) settleMembership(ctx context.Context) error {
	env, err := x.membership()
	if err != nil {
		return nil // no membership fault could have started
	}
	ev := x.begin(Event{Fault: -1, Kind: KindMembership, Phase: PhaseHeal})
	start := time.Now()
	cancelAt, deadline := start.Add(x.settle/2), start.Add(x.settle)
	var notes []string
	var moving []TopicPartition
	cancelled := false
	for {
		st, serr := x.memberState(ctx, env)
		err = serr
		if serr == nil {
			notes = append(notes, x.observe(st)...)
			moving = moving[:0]
			for _, p := range st.Partitions {
				if p.Moving {
					moving = append(moving, p.TopicPartition)
				}
			}
			if len(moving) == 0 && len(x.open) == 0 {
				break
			}
			if !cancelled && time.Now().After(cancelAt) {
				cancelled = true
				notes = append(notes, x.cancelAll(ctx, env, moving))
			}
		}
		if !x.waitPoll(ctx, deadline, false) {
			x.mstats.Unfinished += len(x.open)
			err = errors.Join(err, fmt.Errorf("chaos: %d partitions still moving after %s: %v", len(moving), x.settle, moving))
			break
		}
	}
	for _, id := range slices.Sorted(maps.Keys(x.decommissioned)) {
		note, rerr := x.recommission(ctx, id, -1)
		notes, err = append(notes, note), errors.Join(err, rerr)
	}
	if len(notes) == 0 {
		notes = append(notes, "no move in flight")
	}
	ev.Detail = fmt.Sprintf("settle moves in %s: %s", round(time.Since(start)), strings.Join(notes, "; "))
	stats := x.mstats
	ev.Stats = &stats
	return x.end(ev, err)
}

// cancelAll cancels the moves of tps, for the final settle.
func (x *Executor) cancelAll(ctx context.Context, env MembershipEnv, tps []TopicPartition) string {
	items := make([]Reassignment, len(tps))
	for i, tp := range tps {
		items[i] = Reassignment{TopicPartition: tp}
	}
	cctx, cancel := x.callCtx(ctx)
	errs, err := env.Reassign(cctx, items)
	cancel()
	if err != nil {
		return fmt.Sprintf("cancel %v: %v", tps, err)
	}
	var out []string
	for i, tp := range tps {
		if i < len(errs) && errs[i] != nil {
			out = append(out, fmt.Sprintf("%s refused (%v)", tp, errs[i]))
			continue
		}
		x.mstats.Cancels++
		x.mstats.StopCancels++
		out = append(out, tp.String())
		for _, mv := range x.open {
			if mv.TopicPartition == tp {
				mv.cancelSent = true
			}
		}
	}
	return fmt.Sprintf("still moving after %s, cancel %s", x.settle/2, strings.Join(out, ", "))
}

// MemberStats returns what the membership nemesis has done so far.
func (x *Executor) MemberStats() MemberStats { return x.mstats }

func moveNames(mvs []*moveRun) string {
	names := make([]string, len(mvs))
	for i, mv := range mvs {
		names[i] = mv.TopicPartition.String()
	}
	return strings.Join(names, ", ")
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
