package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/internal/logging"
)

// ScheduleFromChaos turns a planned chaos schedule into the run's nemesis
// schedule: each fault becomes a start and a stop step named by its kind.
// chaos.Plan never overlaps two faults of one kind, so the names never
// start twice.
func ScheduleFromChaos(s chaos.Schedule) Schedule {
	steps := s.Steps()
	out := make(Schedule, 0, len(steps))
	for _, st := range steps {
		f := FStart
		if st.Phase == chaos.PhaseStop {
			f = FStop
		}
		out = append(out, NemesisStep{At: st.At, F: f, Name: string(s.Faults[st.Fault].Kind)})
	}
	return out
}

// FaultEvent is one fault step a ChaosNemesis performed, for the report.
type FaultEvent struct {
	Kind   chaos.Kind    `json:"kind"`
	Phase  chaos.Phase   `json:"phase"`
	Fault  int           `json:"fault"` // index in the schedule, -1 for a heal with nothing planned
	Nodes  []int         `json:"nodes,omitempty"`
	Detail string        `json:"detail"`
	At     time.Duration `json:"at_ns"` // since the nemesis was made
	Took   time.Duration `json:"took_ns"`
	Err    string        `json:"error,omitempty"`
}

// ChaosNemesis performs the faults of a chaos schedule on a cluster when
// the run's nemesis runner starts and stops them by kind: Start("kill")
// starts the next planned kill fault (its targets drawn by chaos.Plan, a
// leader target resolved now), Stop("kill") undoes it. A Stop with no
// fault of that kind running undoes the kind on every node (heal, resume
// all, start all), so the final heal never leaves a fault behind.
type ChaosNemesis struct {
	env   chaos.Env
	log   *slog.Logger
	begun time.Time

	mu     sync.Mutex // guards the fields below; Start and Stop are not concurrent, Events may be
	queue  map[chaos.Kind][]chaos.Fault
	active map[chaos.Kind]activeFault
	events []FaultEvent
}

type activeFault struct {
	f     chaos.Fault
	nodes []int
}

var _ Nemesis = (*ChaosNemesis)(nil)

// NewChaosNemesis returns a nemesis that performs s's faults on env.
func NewChaosNemesis(env chaos.Env, s chaos.Schedule, l *slog.Logger) *ChaosNemesis {
	n := &ChaosNemesis{env: env, log: logging.Discard(l), begun: time.Now(),
		queue: map[chaos.Kind][]chaos.Fault{}, active: map[chaos.Kind]activeFault{}}
	for _, f := range s.Faults {
		n.queue[f.Kind] = append(n.queue[f.Kind], f)
	}
	return n
}

// errNoFaultPlanned is returned by Start for a kind whose planned faults
// are used up.
var errNoFaultPlanned = errors.New("jepsen: no fault of this kind left in the chaos schedule")

// Start begins the next planned fault of kind name.
func (n *ChaosNemesis) Start(ctx context.Context, name string) error {
	k := chaos.Kind(name)
	n.mu.Lock()
	q := n.queue[k]
	if len(q) == 0 {
		n.mu.Unlock()
		return fmt.Errorf("%w: %s", errNoFaultPlanned, name)
	}
	f := q[0]
	n.queue[k] = q[1:]
	n.mu.Unlock()
	began := time.Now()
	nodes, detail, err := chaos.StartFault(ctx, n.env, f)
	n.mu.Lock()
	n.active[k] = activeFault{f: f, nodes: nodes} // a failed start may have acted on some nodes
	n.mu.Unlock()
	n.record(FaultEvent{Kind: k, Phase: chaos.PhaseStart, Fault: f.ID, Nodes: nodes, Detail: detail}, began, err)
	return err
}

// Stop ends the running fault of kind name.
func (n *ChaosNemesis) Stop(ctx context.Context, name string) error {
	k := chaos.Kind(name)
	n.mu.Lock()
	a, ok := n.active[k]
	n.mu.Unlock()
	if !ok {
		a = activeFault{f: chaos.Fault{ID: -1, Kind: k}, nodes: n.env.NodeIDs()}
	}
	began := time.Now()
	detail, err := chaos.StopFault(ctx, n.env, a.f, a.nodes)
	if err == nil {
		n.mu.Lock()
		delete(n.active, k)
		n.mu.Unlock()
	}
	n.record(FaultEvent{Kind: k, Phase: chaos.PhaseStop, Fault: a.f.ID, Nodes: a.nodes, Detail: detail}, began, err)
	return err
}

func (n *ChaosNemesis) record(ev FaultEvent, began time.Time, err error) {
	ev.At, ev.Took = began.Sub(n.begun), time.Since(began)
	if err != nil {
		ev.Err = err.Error()
		n.log.Warn("nemesis step failed", "kind", ev.Kind, "phase", ev.Phase, "detail", ev.Detail, "err", err)
	} else {
		n.log.Info("nemesis", "kind", ev.Kind, "phase", ev.Phase, "detail", ev.Detail, "took", ev.Took)
	}
	n.mu.Lock()
	n.events = append(n.events, ev)
	n.mu.Unlock()
}

// Events returns every step performed so far.
func (n *ChaosNemesis) Events() []FaultEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]FaultEvent(nil), n.events...)
}
