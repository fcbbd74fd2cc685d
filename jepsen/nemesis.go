package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Nemesis injects named faults. chaos/ implements it for real clusters;
// the names are whatever that implementation understands ("kill",
// "partition", ...). Start and Stop are called from one goroutine, never
// concurrently.
type Nemesis interface {
	Start(ctx context.Context, name string) error
	Stop(ctx context.Context, name string) error
}

// NemesisStep starts or stops one fault At a time since the run began.
type NemesisStep struct {
	At   time.Duration
	F    F // FStart or FStop
	Name string
}

// Schedule is a run's faults in time order.
type Schedule []NemesisStep

// Validate checks that steps are in order, start before they stop, and
// never start a fault that is already running.
func (s Schedule) Validate() error {
	active := map[string]bool{}
	for i, st := range s {
		switch {
		case st.Name == "":
			return fmt.Errorf("schedule step %d has no name: %w", i, ErrBadConfig)
		case i > 0 && st.At < s[i-1].At:
			return fmt.Errorf("schedule step %d at %s goes back in time: %w", i, st.At, ErrBadConfig)
		case st.F == FStart && active[st.Name]:
			return fmt.Errorf("schedule step %d starts %s twice: %w", i, st.Name, ErrBadConfig)
		case st.F == FStop && !active[st.Name]:
			return fmt.Errorf("schedule step %d stops %s, which is not running: %w", i, st.Name, ErrBadConfig)
		case st.F != FStart && st.F != FStop:
			return fmt.Errorf("schedule step %d: f %q: %w", i, st.F, ErrBadConfig)
		}
		active[st.Name] = st.F == FStart
	}
	return nil
}

// StaggeredSchedule alternates faults as Jepsen's nemesis generators do:
// after a quiet interval one fault (chosen from names by the seed) starts,
// runs for an interval, stops, and the next follows. Each interval is drawn
// uniformly from [interval/2, 3*interval/2). Nothing starts after total.
func StaggeredSchedule(names []string, total, interval time.Duration, seed uint64) Schedule {
	if len(names) == 0 || interval <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65))
	jitter := func() time.Duration {
		return interval/2 + time.Duration(rng.Int64N(int64(interval)))
	}
	var s Schedule
	for at := jitter(); at < total; at += jitter() {
		name := names[rng.IntN(len(names))]
		s = append(s, NemesisStep{At: at, F: FStart, Name: name})
		at += jitter()
		s = append(s, NemesisStep{At: min(at, total), F: FStop, Name: name})
	}
	return s
}

// nemesisRunner performs a schedule and records each step. It keeps the
// faults that are running so Heal can stop them.
type nemesisRunner struct {
	n      Nemesis
	rec    *Recorder
	active []string
}

// run performs the steps until the schedule ends or ctx is done.
func (r *nemesisRunner) run(ctx context.Context, s Schedule) {
	for _, st := range s {
		if !sleepUntil(ctx, r.rec, st.At) {
			return
		}
		r.step(ctx, st.F, st.Name)
	}
}

func sleepUntil(ctx context.Context, rec *Recorder, at time.Duration) bool {
	t := time.NewTimer(max(0, at-rec.Since()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// step starts or stops one fault and records it on the nemesis process:
// ok when the call succeeded, info when it failed (the fault may be half
// applied).
func (r *nemesisRunner) step(ctx context.Context, f F, name string) error {
	inv := r.rec.Invoke(Op{Process: NemesisProcess, F: f, Nemesis: name})
	var err error
	if f == FStart {
		err = r.n.Start(ctx, name)
		r.active = append(r.active, name) // a failed start may still have taken effect
	} else {
		err = r.n.Stop(ctx, name)
		if err == nil {
			r.active = slices.DeleteFunc(r.active, func(n string) bool { return n == name })
		}
	}
	c := inv.Completion(OK)
	if err != nil {
		c.Type, c.Error = Info, err.Error()
	}
	r.rec.Complete(c)
	if err != nil {
		return fmt.Errorf("nemesis %s %s: %w", f, name, err)
	}
	return nil
}

// heal stops every fault still running, most recent first.
func (r *nemesisRunner) heal(ctx context.Context) error {
	var names []string
	for i := len(r.active) - 1; i >= 0; i-- {
		if !slices.Contains(names, r.active[i]) {
			names = append(names, r.active[i])
		}
	}
	var first error
	for _, name := range names {
		if err := r.step(ctx, FStop, name); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("heal: %w", first)
	}
	return nil
}
