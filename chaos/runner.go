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
// runner use a fake.
type Env interface {
	NodeIDs() []int
	Kill(ctx context.Context, ids ...int) error
	EnsureRunning(ctx context.Context, ids ...int) error
	Pause(ctx context.Context, ids ...int) error
	Resume(ctx context.Context, ids ...int) error
	Partition(ctx context.Context, g Grudge) error
	Heal(ctx context.Context) error
	LoseUnsynced(ctx context.Context) (map[int]LossReport, error)
	Leader(ctx context.Context) (int, error)
}

var _ Env = (*Cluster)(nil)

// Event reports one executed step, for the history. Begin and End carry
// Go's monotonic clock reading, so End.Sub(runStart) is monotonic.
type Event struct {
	Fault  int // index in Schedule.Faults; -1 for the final heal
	Kind   Kind
	Phase  Phase
	Nodes  []int  // nodes acted on
	Detail string // what was done, for people
	Begin  time.Time
	End    time.Time
	Offset time.Duration // Begin minus the run's start
	Err    string        // empty when the step succeeded
}

// FinalHealTimeout bounds the final heal when the run's context is
// already done.
const FinalHealTimeout = 2 * time.Minute

// Run executes the schedule against env in real time, calling onEvent
// (from Run's goroutine; it must not block for long) after each step, and
// always ends with a final heal: heal partitions, resume paused nodes,
// start every node that is down. It returns when the final heal is done.
// A failed step is reported in its event and does not stop the run; Run
// returns every step error joined, and ctx's error if it was cut short.
func Run(ctx context.Context, env Env, s Schedule, onEvent func(Event)) error {
	if onEvent == nil {
		onEvent = func(Event) {}
	}
	r := &run{env: env, s: s, emit: onEvent, start: time.Now(), acted: map[int][]int{}}
	var errs []error
	for _, st := range s.Steps() {
		if err := sleepUntil(ctx, r.start.Add(st.At)); err != nil {
			errs = append(errs, err)
			break
		}
		errs = append(errs, r.step(ctx, st))
	}
	errs = append(errs, r.finalHeal(ctx))
	return errors.Join(errs...)
}

type run struct {
	env   Env
	s     Schedule
	emit  func(Event)
	start time.Time
	acted map[int][]int // fault id -> nodes its start acted on
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// step runs one start or stop and reports it.
func (r *run) step(ctx context.Context, st Step) error {
	f := r.s.Faults[st.Fault]
	ev := Event{Fault: f.ID, Kind: f.Kind, Phase: st.Phase, Begin: time.Now()}
	var err error
	if st.Phase == PhaseStart {
		ev.Nodes, ev.Detail, err = r.begin(ctx, f)
		r.acted[f.ID] = ev.Nodes
	} else {
		ev.Nodes = r.acted[f.ID]
		ev.Detail, err = r.end(ctx, f, ev.Nodes)
	}
	return r.report(ev, err)
}

func (r *run) report(ev Event, err error) error {
	ev.End = time.Now()
	ev.Offset = ev.Begin.Sub(r.start)
	if err != nil {
		ev.Err = err.Error()
		err = fmt.Errorf("chaos: %s %s of fault %d: %w", ev.Kind, ev.Phase, ev.Fault, err)
	}
	r.emit(ev)
	return err
}

// begin starts fault f and returns the nodes it acted on.
func (r *run) begin(ctx context.Context, f Fault) ([]int, string, error) {
	switch f.Kind {
	case KindKill, KindPause:
		nodes, err := r.targets(ctx, f)
		if err != nil {
			return nil, fmt.Sprintf("%s %s: no target", f.Kind, f.Target), err
		}
		detail := fmt.Sprintf("%s %s %v", f.Kind, f.Target, nodes)
		if f.Kind == KindKill {
			return nodes, detail, r.env.Kill(ctx, nodes...)
		}
		return nodes, detail, r.env.Pause(ctx, nodes...)
	case KindPartition:
		g, err := r.grudge(ctx, f)
		if err != nil {
			return nil, fmt.Sprintf("partition %s: no grudge", f.Shape), err
		}
		return grudgeNodes(g), fmt.Sprintf("partition %s %s", f.Shape, g), r.env.Partition(ctx, g)
	case KindLoseUnfsynced:
		lost, err := r.env.LoseUnsynced(ctx)
		return r.env.NodeIDs(), "kill all, lose unsynced writes: " + lossDetail(lost), err
	}
	return nil, string(f.Kind), fmt.Errorf("%w: %s", ErrUnsupported, f.Kind)
}

// end stops fault f, whose start acted on nodes.
func (r *run) end(ctx context.Context, f Fault, nodes []int) (string, error) {
	switch f.Kind {
	case KindKill:
		return fmt.Sprintf("restart %v", nodes), r.env.EnsureRunning(ctx, nodes...)
	case KindPause:
		return fmt.Sprintf("resume %v", nodes), r.env.Resume(ctx, nodes...)
	case KindPartition:
		return "heal", r.env.Heal(ctx)
	case KindLoseUnfsynced:
		return "restart all", r.env.EnsureRunning(ctx, r.env.NodeIDs()...)
	}
	return string(f.Kind), fmt.Errorf("%w: %s", ErrUnsupported, f.Kind)
}

func (r *run) targets(ctx context.Context, f Fault) ([]int, error) {
	if f.Target != TargetLeader {
		return f.Nodes, nil
	}
	id, err := r.env.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return []int{id}, nil
}

func (r *run) grudge(ctx context.Context, f Fault) (Grudge, error) {
	if f.Shape != ShapeIsolateLeader {
		return f.Grudge, nil
	}
	id, err := r.env.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return Isolate(id, r.env.NodeIDs()), nil
}

// finalHeal undoes every fault so the final reads see a whole cluster.
func (r *run) finalHeal(ctx context.Context) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), FinalHealTimeout)
		defer cancel()
	}
	all := r.env.NodeIDs()
	ev := Event{Fault: -1, Phase: PhaseHeal, Nodes: all, Begin: time.Now(),
		Detail: "heal partitions, resume all, start all"}
	err := errors.Join(r.env.Heal(ctx), r.env.Resume(ctx, all...), r.env.EnsureRunning(ctx, all...))
	return r.report(ev, err)
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
