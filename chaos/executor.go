package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Env is what a schedule acts on. *Cluster implements it; tests of the
// executor use a fake.
type Env interface {
	NodeIDs() []int
	Kill(ctx context.Context, ids ...int) error
	EnsureRunning(ctx context.Context, ids ...int) error
	Pause(ctx context.Context, ids ...int) error
	Resume(ctx context.Context, ids ...int) error
	Partition(ctx context.Context, g Grudge) error
	Heal(ctx context.Context) error
	LoseUnsyncedNodes(ctx context.Context, ids ...int) (map[int]LossReport, error)
	Leader(ctx context.Context) (int, error)
	// Roles names the nodes of each role of a partition (see Script):
	// a partition number, or PartitionAwayFromMetadataLeader.
	Roles(ctx context.Context, partition string) (RoleMap, error)
}

var _ Env = (*Cluster)(nil)

// Event reports one step an Executor took. Begin and End carry Go's
// monotonic clock reading, so Offset is monotonic.
type Event struct {
	Fault  int // index in Schedule.Faults; -1 for the final heal
	Kind   Kind
	Phase  Phase
	Nodes  []int  // nodes acted on
	Detail string // what was done, for people
	Begin  time.Time
	End    time.Time
	Offset time.Duration // Begin minus the executor's start
	Err    string        // empty when the step succeeded
	// Stats, on the membership nemesis' final-heal event, counts what it
	// did in the whole run.
	Stats *MemberStats `json:",omitempty"`
}

// Observer is told about every step an Executor takes, on the goroutine
// that called Play or Heal: Begin just before the step acts (the event
// has Fault, Kind, Phase, Begin and Offset), End when it is done (the
// whole event). Nil fields are skipped. They must not block for long.
type Observer struct {
	Begin func(Event)
	End   func(Event)
}

// FinalHealTimeout bounds Executor.Heal.
const FinalHealTimeout = 2 * time.Minute

// Executor performs a Schedule on an Env in real time and undoes it. It
// is the only code that turns planned faults into actions. Play and Heal
// are called from one goroutine at a time, Heal after Play has returned.
type Executor struct {
	env    Env
	s      Schedule
	obs    Observer
	start  time.Time
	acted  map[int][]int // fault id -> nodes its start acted on
	active []int         // faults started and not yet stopped successfully, in start order
	roles  *RoleMap      // a script's roles, bound at the first fault that names one

	// The membership nemesis' state (membership_exec.go).
	members map[int]*memberRun // fault id -> what its start did
	// decommissioned are the nodes a membership fault decommissioned and
	// no stop recommissioned yet, with when.
	decommissioned map[int]time.Time
	open           []*moveRun // moves started whose end no look has seen yet
	mstats         MemberStats
	// The corrupt nemesis' (corrupt.go): fault id -> what its start did.
	corrupts map[int]*corruptRun
	grace    time.Duration   // refusalGrace; tests shorten it
	next     time.Time       // when Play's next step is due; zero after the last
	playCtx  context.Context // Play's; done once the workload has ended
	healing  bool            // Heal runs
	// poll and settle are memberPoll and finalSettle; tests shorten them.
	poll, settle time.Duration
}

// NewExecutor returns an executor of s on env whose step offsets count
// from start.
func NewExecutor(env Env, s Schedule, start time.Time, obs Observer) *Executor {
	return &Executor{env: env, s: s, obs: obs, start: start, acted: map[int][]int{}, members: map[int]*memberRun{}, decommissioned: map[int]time.Time{},
		corrupts: map[int]*corruptRun{}, grace: refusalGrace, poll: memberPoll, settle: finalSettle}
}

// Play performs every start and stop of the schedule at its offset,
// until the last is done or ctx is done; a step whose time has passed
// runs at once. A failed step is reported to the observer (Event.Err)
// and does not stop the schedule: faults can fail for reasons of the
// moment (no leader to kill during a partition), and Heal undoes
// whatever a failed step did. A stop under way when ctx ends runs to
// its end (bounded by FinalHealTimeout), as Heal would: cutting a heal
// short only leaves Heal to do it again, with an error recorded for a
// stop that did nothing wrong.
func (x *Executor) Play(ctx context.Context) {
	x.playCtx = ctx
	steps := x.s.Steps()
	for i, st := range steps {
		if !sleepUntil(ctx, x.start.Add(st.At)) {
			return
		}
		x.next = time.Time{}
		if i+1 < len(steps) {
			x.next = x.start.Add(steps[i+1].At)
		}
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if st.Phase == PhaseStop {
			sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), FinalHealTimeout)
		}
		x.step(sctx, st.Fault, st.Phase)
		cancel()
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	tm := time.NewTimer(max(0, time.Until(t)))
	defer tm.Stop()
	select {
	case <-tm.C:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// Heal is the final heal: it stops every fault still active (started,
// even if its start failed, and not stopped successfully), most recent
// first, then heals partitions, resumes every node and starts every node
// that is down; when the schedule has membership faults, it then waits
// for every partition move to end (cancelling those still under way
// half way through), reported as a membership event of its own. It runs
// on ctx's values but not its cancellation, so it heals after a canceled
// run too, bounded by FinalHealTimeout. It returns every error of the
// heal: what it may have failed to undo.
func (x *Executor) Heal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FinalHealTimeout)
	defer cancel()
	x.healing = true
	var errs []error
	for _, id := range slices.Backward(slices.Clone(x.active)) {
		errs = append(errs, x.step(ctx, id, PhaseStop))
	}
	all := x.env.NodeIDs()
	ev := x.begin(Event{Fault: -1, Phase: PhaseHeal, Nodes: all})
	ev.Detail = "heal partitions, resume all, start all"
	err := errors.Join(x.env.Heal(ctx), x.env.Resume(ctx, all...), x.env.EnsureRunning(ctx, all...))
	errs = append(errs, x.end(ev, err))
	if x.hasMembership() {
		errs = append(errs, x.settleMembership(ctx))
	}
	return errors.Join(errs...)
}

// hasMembership reports whether the schedule has a membership fault.
func (x *Executor) hasMembership() bool {
	return slices.ContainsFunc(x.s.Faults, func(f Fault) bool { return f.Kind == KindMembership })
}

// step runs the start or stop of fault id and reports it.
func (x *Executor) step(ctx context.Context, id int, ph Phase) error {
	f := x.s.Faults[id]
	ev := Event{Fault: f.ID, Kind: f.Kind, Phase: ph}
	var err error
	if ph == PhaseStart {
		ev = x.begin(ev)
		ev.Nodes, ev.Detail, err = x.startFault(ctx, f)
		x.acted[f.ID] = ev.Nodes
		x.active = append(x.active, f.ID) // a failed start may still have taken effect
	} else {
		ev.Nodes = x.acted[f.ID]
		ev = x.begin(ev)
		ev.Detail, err = x.stopFault(ctx, f, ev.Nodes)
		if err == nil {
			x.active = slices.DeleteFunc(x.active, func(a int) bool { return a == f.ID })
		}
	}
	return x.end(ev, err)
}

func (x *Executor) begin(ev Event) Event {
	ev.Begin = time.Now()
	ev.Offset = ev.Begin.Sub(x.start)
	if x.obs.Begin != nil {
		x.obs.Begin(ev)
	}
	return ev
}

func (x *Executor) end(ev Event, err error) error {
	ev.End = time.Now()
	if err != nil {
		ev.Err = err.Error()
		if ev.Phase == PhaseHeal {
			err = fmt.Errorf("chaos: final heal: %w", err)
		} else {
			err = fmt.Errorf("chaos: %s %s of fault %d: %w", ev.Kind, ev.Phase, ev.Fault, err)
		}
	}
	if x.obs.End != nil {
		x.obs.End(ev)
	}
	return err
}

// startFault starts fault f and returns the nodes it acted on, resolving
// a leader target or an isolate-leader grudge now.
func (x *Executor) startFault(ctx context.Context, f Fault) ([]int, string, error) {
	switch f.Kind {
	case KindKill, KindPause:
		nodes, err := x.targets(ctx, f)
		if err != nil {
			return nil, fmt.Sprintf("%s %s: no target", f.Kind, f.Target), err
		}
		detail := fmt.Sprintf("%s %s %v", f.Kind, f.Target, nodes)
		if len(f.Select) > 0 {
			detail = fmt.Sprintf("%s %v = %v%s", f.Kind, f.Select, nodes, x.rolesNote())
		}
		if f.Kind == KindKill {
			return nodes, detail, x.env.Kill(ctx, nodes...)
		}
		return nodes, detail, x.env.Pause(ctx, nodes...)
	case KindPartition:
		g, err := x.grudge(ctx, f)
		if err != nil {
			return nil, fmt.Sprintf("partition %s: no grudge", f.Shape), err
		}
		detail := fmt.Sprintf("partition %s %s", f.Shape, g)
		if len(f.Cuts) > 0 {
			detail += x.rolesNote()
		}
		return grudgeNodes(g), detail, x.env.Partition(ctx, g)
	case KindLoseUnfsynced:
		nodes, err := x.powerTargets(ctx, f)
		if err != nil {
			return nil, fmt.Sprintf("power loss of %s: no target", f.powerTarget()), err
		}
		lost, err := x.env.LoseUnsyncedNodes(ctx, nodes...)
		what, note := string(f.powerTarget()), ""
		if len(f.Select) > 0 {
			what, note = fmt.Sprint(f.Select), x.rolesNote()
		}
		return nodes, fmt.Sprintf("power loss of %s %v: ", what, nodes) + lossDetail(lost) + note, err
	case KindMembership:
		return x.startMembership(ctx, f)
	case KindCorrupt:
		return x.startCorrupt(ctx, f)
	}
	return nil, string(f.Kind), fmt.Errorf("%w: %s", ErrUnsupported, f.Kind)
}

// stopFault ends fault f, whose start acted on nodes: restart killed
// nodes, resume paused ones, heal partitions, restart the nodes a power
// loss hit, or end a membership change (stopMembership).
func (x *Executor) stopFault(ctx context.Context, f Fault, nodes []int) (string, error) {
	switch f.Kind {
	case KindKill:
		nodes, held := x.heldByCorrupt(nodes)
		return fmt.Sprintf("restart %v%s", nodes, held), x.env.EnsureRunning(ctx, nodes...)
	case KindPause:
		return fmt.Sprintf("resume %v", nodes), x.env.Resume(ctx, nodes...)
	case KindPartition:
		return "heal", x.env.Heal(ctx)
	case KindLoseUnfsynced:
		nodes, held := x.heldByCorrupt(nodes)
		return fmt.Sprintf("restart %v%s", nodes, held), x.env.EnsureRunning(ctx, nodes...)
	case KindMembership:
		return x.stopMembership(ctx, f)
	case KindCorrupt:
		return x.stopCorrupt(ctx, f, nodes)
	}
	return string(f.Kind), fmt.Errorf("%w: %s", ErrUnsupported, f.Kind)
}

func (x *Executor) targets(ctx context.Context, f Fault) ([]int, error) {
	if len(f.Select) > 0 {
		r, err := x.bind(ctx, f.Select)
		if err != nil {
			return nil, err
		}
		return r.resolve(f.Select)
	}
	if f.Target != TargetLeader {
		return f.Nodes, nil
	}
	id, err := x.env.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return []int{id}, nil
}

// powerTargets are the nodes a lose-unfsynced fault hits: its chosen
// nodes, the leader now, or every node (a fault without a target).
func (x *Executor) powerTargets(ctx context.Context, f Fault) ([]int, error) {
	if f.powerTarget() == TargetAll && len(f.Nodes) == 0 && len(f.Select) == 0 {
		return x.env.NodeIDs(), nil
	}
	return x.targets(ctx, f)
}

// bind returns the script's roles, asking the Env the first time a
// fault names one; ids alone need none.
func (x *Executor) bind(ctx context.Context, sel []string) (RoleMap, error) {
	if x.roles == nil && needsRoles(sel) {
		r, err := x.env.Roles(ctx, x.s.Partition)
		if err != nil {
			return RoleMap{}, fmt.Errorf("chaos: roles of partition %q: %w", x.s.Partition, err)
		}
		x.roles = &r
	}
	if x.roles == nil {
		return RoleMap{}, nil
	}
	return *x.roles, nil
}

// Roles returns the roles the script's faults were bound to, or false
// before any fault named one.
func (x *Executor) Roles() (RoleMap, bool) {
	if x.roles == nil {
		return RoleMap{}, false
	}
	return *x.roles, true
}

// rolesNote is " (roles)" once the script's roles are bound, for step
// details.
func (x *Executor) rolesNote() string {
	if x.roles == nil {
		return ""
	}
	return " (" + x.roles.String() + ")"
}

func (x *Executor) grudge(ctx context.Context, f Fault) (Grudge, error) {
	if len(f.Cuts) > 0 {
		var sel []string
		for _, c := range f.Cuts {
			sel = append(append(sel, c.From...), c.To...)
		}
		r, err := x.bind(ctx, sel)
		if err != nil {
			return nil, err
		}
		return r.grudge(f.Cuts)
	}
	if f.Shape != ShapeIsolateLeader {
		return f.Grudge, nil
	}
	id, err := x.env.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return Isolate(id, x.env.NodeIDs()), nil
}

func grudgeNodes(g Grudge) []int {
	var nodes []int
	for to, froms := range g {
		if len(froms) > 0 {
			nodes = append(nodes, to)
		}
	}
	slices.Sort(nodes)
	return nodes
}

func lossDetail(lost map[int]LossReport) string {
	ids := make([]int, 0, len(lost))
	for id := range lost {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("n%d %d files %d B", id, lost[id].Files, lost[id].Bytes)
	}
	return strings.Join(parts, ", ")
}
