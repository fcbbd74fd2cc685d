package chaos

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// Kind names a nemesis.
type Kind string

// The nemeses.
const (
	KindKill          Kind = "kill"           // kill -9 some nodes, restart them at stop
	KindPause         Kind = "pause"          // SIGSTOP some nodes, SIGCONT at stop
	KindPartition     Kind = "partition"      // iptables partition, heal at stop
	KindLoseUnfsynced Kind = "lose-unfsynced" // power loss: kill the targets, drop their unsynced writes; restart them at stop
	KindMembership    Kind = "membership"     // move partitions' replicas (membership.go); settle or cancel at stop
	KindCorrupt       Kind = "corrupt"        // kill one node, damage one of its files (corrupt.go); restart it at stop
)

// ErrUnsupported is returned for a nemesis this package cannot run yet.
var ErrUnsupported = errors.New("chaos: nemesis not supported")

// Target says which nodes a kill or pause hits.
type Target string

// The targets.
const (
	TargetOne      Target = "one"
	TargetMinority Target = "minority" // floor((n-1)/2) nodes, at least 1
	TargetMajority Target = "majority" // floor(n/2)+1 nodes
	TargetAll      Target = "all"
	TargetLeader   Target = "leader" // resolved when the fault starts
	// TargetScript marks a script's fault: its nodes are Fault.Select,
	// ids and roles resolved when it starts.
	TargetScript Target = "script"
)

var knownTargets = []Target{TargetOne, TargetMinority, TargetMajority, TargetAll, TargetLeader}

// Shape says how a partition cuts the cluster.
type Shape string

// The shapes.
const (
	ShapeMajorityMinority Shape = "majority-minority"
	ShapeIsolateOne       Shape = "isolate-one"
	ShapeIsolateLeader    Shape = "isolate-leader" // resolved when the fault starts
	ShapeBridge           Shape = "bridge"
	ShapeMajoritiesRing   Shape = "majorities-ring" // 5 nodes or more
)

var knownShapes = []Shape{ShapeMajorityMinority, ShapeIsolateOne, ShapeIsolateLeader, ShapeBridge, ShapeMajoritiesRing}

// ScheduleConfig describes a nemesis schedule.
type ScheduleConfig struct {
	Seed     uint64
	Duration time.Duration // every fault starts and stops within it
	// Interval is the mean time between faults of one kind and the mean
	// time a fault lasts (Jepsen's nemesis interval); both are drawn
	// uniformly from [0, 2*Interval), a fault lasting at least
	// Interval/10.
	Interval time.Duration
	Kinds    []Kind
	Nodes    []int    // node ids
	Targets  []Target // kill and pause targets to choose from
	Shapes   []Shape  // partition shapes to choose from
	// PowerTargets are the lose-unfsynced targets to choose from; empty
	// means all (a power loss of the whole cluster).
	PowerTargets []Target
	// Membership tunes the membership nemesis.
	Membership MembershipConfig
	// Corrupt narrows what the corrupt nemesis damages.
	Corrupt CorruptConfig `json:",omitempty"`
}

// DefaultScheduleConfig returns the defaults: a 10 s interval, every
// kill/pause target but the leader, every partition shape that needs no
// leader, power losses of the whole cluster, and every membership
// action.
func DefaultScheduleConfig() ScheduleConfig {
	return ScheduleConfig{
		Interval:     10 * time.Second,
		Targets:      []Target{TargetOne, TargetMinority, TargetMajority, TargetAll},
		Shapes:       []Shape{ShapeMajorityMinority, ShapeIsolateOne, ShapeBridge, ShapeMajoritiesRing},
		PowerTargets: []Target{TargetAll},
		Membership:   DefaultMembershipConfig(),
	}
}

// Validate checks the config.
func (c ScheduleConfig) Validate() error {
	switch {
	case c.Duration <= 0 || c.Interval <= 0:
		return errors.New("chaos: schedule needs a positive duration and interval")
	case len(c.Nodes) == 0:
		return errors.New("chaos: schedule needs nodes")
	case len(c.Targets) == 0 && (slices.Contains(c.Kinds, KindKill) || slices.Contains(c.Kinds, KindPause)):
		return errors.New("chaos: kill and pause need targets")
	case len(c.Shapes) == 0 && slices.Contains(c.Kinds, KindPartition):
		return errors.New("chaos: partition needs shapes")
	}
	for _, t := range c.Targets {
		if !slices.Contains(knownTargets, t) {
			return fmt.Errorf("chaos: unknown kill/pause target %q (want one of %v)", t, knownTargets)
		}
	}
	for _, t := range c.PowerTargets {
		if !slices.Contains(knownTargets, t) {
			return fmt.Errorf("chaos: unknown lose-unfsynced target %q (want one of %v)", t, knownTargets)
		}
	}
	for _, s := range c.Shapes {
		if !slices.Contains(knownShapes, s) {
			return fmt.Errorf("chaos: unknown partition shape %q (want one of %v)", s, knownShapes)
		}
	}
	for _, k := range c.Kinds {
		switch k {
		case KindKill, KindPause, KindPartition, KindLoseUnfsynced:
		case KindCorrupt:
			if err := c.Corrupt.Validate(); err != nil {
				return err
			}
		case KindMembership:
			if err := c.Membership.Validate(len(c.Nodes)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("chaos: unknown nemesis %q", k)
		}
	}
	return nil
}

// Fault is one planned fault: what, when, and (unless it targets the
// leader) on which nodes.
type Fault struct {
	ID     int // index in Schedule.Faults
	Kind   Kind
	Start  time.Duration // offset from the run's start
	Stop   time.Duration
	Target Target // kill, pause, lose-unfsynced (empty there means all)
	Nodes  []int  // kill, pause, lose-unfsynced: chosen nodes (empty for the leader)
	Shape  Shape  // partition
	Grudge Grudge // partition (nil for isolate-leader and cuts)
	// Select and Cuts are a script's targets and grudge: node ids and
	// roles (see Script), resolved when the fault starts.
	Select []string `json:",omitempty"`
	Cuts   []Cut    `json:",omitempty"`
	Note   string   `json:",omitempty"`
	// Action is a membership fault's action; Seed seeds its choices,
	// made when it starts from the cluster as it then is (and a corrupt
	// fault's choice of file and damage, from the files it then finds).
	Action MemberAction `json:",omitempty"`
	Seed   uint64       `json:",omitempty"`
}

// String describes the fault for logs and histories.
func (f Fault) String() string {
	switch {
	case len(f.Select) > 0:
		return fmt.Sprintf("%s %v", f.Kind, f.Select)
	case len(f.Cuts) > 0:
		return fmt.Sprintf("%s cuts %v", f.Kind, f.Cuts)
	}
	switch f.Kind {
	case KindKill, KindPause:
		return fmt.Sprintf("%s %s %v", f.Kind, f.Target, f.Nodes)
	case KindLoseUnfsynced:
		return fmt.Sprintf("%s %s %v", f.Kind, f.powerTarget(), f.Nodes)
	case KindPartition:
		return fmt.Sprintf("%s %s %s", f.Kind, f.Shape, f.Grudge)
	case KindMembership:
		return fmt.Sprintf("%s %s", f.Kind, f.Action)
	case KindCorrupt:
		return fmt.Sprintf("%s %v", f.Kind, f.Nodes)
	}
	return string(f.Kind)
}

// Schedule is a planned run: faults ordered by start.
type Schedule struct {
	Config ScheduleConfig
	Faults []Fault
	// Script names the script the schedule came from, if any; Partition
	// is the partition whose roles its faults name (see Script).
	Script    string `json:",omitempty"`
	Partition string `json:",omitempty"`
}

// Validate checks what Plan guarantees, for schedules made by hand:
// each fault's ID is its index, faults are ordered by start, each stops
// after it starts, and faults of one kind never overlap (a history names
// a running fault by its kind).
func (s Schedule) Validate() error {
	stops := map[Kind]time.Duration{} // kind -> stop of its latest fault
	for i, f := range s.Faults {
		switch {
		case f.ID != i:
			return fmt.Errorf("chaos: fault %d has id %d", i, f.ID)
		case i > 0 && f.Start < s.Faults[i-1].Start:
			return fmt.Errorf("chaos: fault %d starts at %s, before fault %d", i, f.Start, i-1)
		case f.Start < 0 || f.Stop <= f.Start:
			return fmt.Errorf("chaos: fault %d runs from %s to %s", i, f.Start, f.Stop)
		}
		if stop, ok := stops[f.Kind]; ok && f.Start < stop {
			return fmt.Errorf("chaos: fault %d (%s) starts at %s, before the previous %s stops", i, f.Kind, f.Start, f.Kind)
		}
		stops[f.Kind] = f.Stop
	}
	return nil
}

// Phase is the side of a fault a step or event is about.
type Phase string

// The phases.
const (
	PhaseStart Phase = "start"
	PhaseStop  Phase = "stop"
	PhaseHeal  Phase = "final-heal"
)

// Step is one action of a schedule.
type Step struct {
	At    time.Duration
	Fault int
	Phase Phase
}

// Plan draws a schedule from cfg.Seed: the same config gives the same
// schedule. Each kind has its own timeline (its own random stream, so
// adding a kind leaves the others unchanged); faults of one kind never
// overlap, faults of different kinds may.
func Plan(cfg ScheduleConfig) (Schedule, error) {
	if err := cfg.Validate(); err != nil {
		return Schedule{}, err
	}
	var faults []Fault
	for _, k := range cfg.Kinds {
		rng := rand.New(rand.NewPCG(cfg.Seed, kindStream(k)))
		fs, err := timeline(cfg, k, rng)
		if err != nil {
			return Schedule{}, err
		}
		faults = append(faults, fs...)
	}
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].Start < faults[j].Start })
	for i := range faults {
		faults[i].ID = i
	}
	return Schedule{Config: cfg, Faults: faults}, nil
}

func kindStream(k Kind) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k))
	return h.Sum64()
}

// timeline lays out the faults of one kind: gap, fault, gap, fault...
func timeline(cfg ScheduleConfig, k Kind, rng *rand.Rand) ([]Fault, error) {
	var out []Fault
	minHold := cfg.Interval / 10
	t := stagger(cfg.Interval, rng)
	for t+minHold <= cfg.Duration {
		hold := max(minHold, stagger(cfg.Interval, rng))
		f := Fault{Kind: k, Start: t, Stop: min(t+hold, cfg.Duration)}
		if err := choose(&f, cfg, rng); err != nil {
			return nil, err
		}
		out = append(out, f)
		t = f.Stop + stagger(cfg.Interval, rng)
	}
	return out, nil
}

// stagger draws uniformly from [0, 2*d), like Jepsen's gen/stagger.
func stagger(d time.Duration, rng *rand.Rand) time.Duration {
	return time.Duration(rng.Int64N(int64(2 * d)))
}

// choose fills in the fault's targets or partition shape.
func choose(f *Fault, cfg ScheduleConfig, rng *rand.Rand) error {
	switch f.Kind {
	case KindKill, KindPause:
		f.Target = cfg.Targets[rng.IntN(len(cfg.Targets))]
		f.Nodes = Pick(f.Target, cfg.Nodes, rng)
	case KindPartition:
		return choosePartition(f, cfg, rng)
	case KindLoseUnfsynced:
		f.Target, f.Nodes = TargetAll, sorted(cfg.Nodes)
		// No draw with one choice, so that a seed gives the schedule it
		// gave before lose-unfsynced had targets.
		if n := len(cfg.PowerTargets); n == 1 {
			f.Target = cfg.PowerTargets[0]
		} else if n > 1 {
			f.Target = cfg.PowerTargets[rng.IntN(n)]
		}
		if f.Target != TargetAll {
			f.Nodes = Pick(f.Target, cfg.Nodes, rng)
		}
	case KindMembership:
		acts := cfg.Membership.Actions
		f.Action, f.Seed = acts[rng.IntN(len(acts))], rng.Uint64()
	case KindCorrupt:
		f.Target, f.Nodes, f.Seed = TargetOne, Pick(TargetOne, cfg.Nodes, rng), rng.Uint64()
	}
	return nil
}

// powerTarget is a lose-unfsynced fault's target; hand-made schedules
// from before targets existed leave it empty, meaning all.
func (f Fault) powerTarget() Target {
	if f.Target == "" {
		return TargetAll
	}
	return f.Target
}

// Pick chooses the nodes of a target at random, sorted: one node, a
// minority (floor((n-1)/2), at least 1), a majority (floor(n/2)+1) or
// all. It returns nil for TargetLeader, which is resolved at run time.
func Pick(t Target, nodes []int, rng *rand.Rand) []int {
	s := shuffled(nodes, rng)
	n := len(s)
	switch t {
	case TargetOne:
		return s[:1]
	case TargetMinority:
		return sorted(s[:max(1, (n-1)/2)])
	case TargetMajority:
		return sorted(s[:n/2+1])
	case TargetAll:
		return sorted(s)
	}
	return nil
}

// choosePartition draws a shape the cluster is big enough for.
func choosePartition(f *Fault, cfg ScheduleConfig, rng *rand.Rand) error {
	shapes := slices.DeleteFunc(slices.Clone(cfg.Shapes), func(s Shape) bool {
		return (s == ShapeMajoritiesRing && len(cfg.Nodes) < 5) || (s == ShapeBridge && len(cfg.Nodes) < 3)
	})
	if len(shapes) == 0 {
		return fmt.Errorf("%w: no configured shape fits %d nodes", ErrTooFewNodes, len(cfg.Nodes))
	}
	f.Shape = shapes[rng.IntN(len(shapes))]
	var err error
	switch f.Shape {
	case ShapeMajorityMinority:
		f.Grudge = MajorityMinority(cfg.Nodes, rng)
	case ShapeIsolateOne:
		f.Grudge = Isolate(shuffled(cfg.Nodes, rng)[0], cfg.Nodes)
	case ShapeBridge:
		f.Grudge, err = Bridge(cfg.Nodes, rng)
	case ShapeMajoritiesRing:
		f.Grudge, err = MajoritiesRing(cfg.Nodes, rng)
	case ShapeIsolateLeader:
	default:
		err = fmt.Errorf("chaos: unknown partition shape %q", f.Shape)
	}
	return err
}

// Steps lists every start and stop in time order (a stop before a start
// at the same instant).
func (s Schedule) Steps() []Step {
	steps := make([]Step, 0, 2*len(s.Faults))
	for _, f := range s.Faults {
		steps = append(steps, Step{At: f.Start, Fault: f.ID, Phase: PhaseStart}, Step{At: f.Stop, Fault: f.ID, Phase: PhaseStop})
	}
	sort.SliceStable(steps, func(i, j int) bool {
		if steps[i].At != steps[j].At {
			return steps[i].At < steps[j].At
		}
		return steps[i].Phase == PhaseStop && steps[j].Phase == PhaseStart
	})
	return steps
}
