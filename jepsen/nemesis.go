package jepsen

import (
	"slices"
	"time"

	"github.com/raftq/raftq/chaos"
)

// nemesisObserver records a chaos.Executor's fault steps in the history
// on NemesisProcess: an invoke when a start or stop begins, named by the
// fault's kind, and its completion when it is done, with the nodes the
// step acted on and its detail: ok, or info when it failed (the fault
// may be half applied). The final heal undoes no one fault and is left
// out of the history. Every step, the final heal too, then goes to
// onFault when set.
func nemesisObserver(rec *Recorder, onFault func(chaos.Event)) chaos.Observer {
	var inv Op // the step in progress: an executor takes one at a time
	return chaos.Observer{
		Begin: func(ev chaos.Event) {
			if f, ok := nemesisF(ev.Phase); ok {
				inv = rec.Invoke(Op{Process: NemesisProcess, F: f, Nemesis: string(ev.Kind)})
			}
		},
		End: func(ev chaos.Event) {
			if _, ok := nemesisF(ev.Phase); ok {
				c := inv.Completion(OK)
				c.Nodes, c.Detail = slices.Clone(ev.Nodes), ev.Detail
				if ev.Err != "" {
					c.Type, c.Error = Info, ev.Err
				}
				rec.Complete(c)
			}
			if onFault != nil {
				onFault(ev)
			}
		},
	}
}

// nemesisF is the history f of a fault step's phase; the final heal has
// none.
func nemesisF(p chaos.Phase) (F, bool) {
	switch p {
	case chaos.PhaseStart:
		return FStart, true
	case chaos.PhaseStop:
		return FStop, true
	}
	return "", false
}

// FaultEvent is one fault step the nemesis performed, for nemesis.json.
type FaultEvent struct {
	Kind   chaos.Kind    `json:"kind"`
	Phase  chaos.Phase   `json:"phase"`
	Fault  int           `json:"fault"` // index in the schedule, -1 for the final heal
	Nodes  []int         `json:"nodes,omitempty"`
	Detail string        `json:"detail"`
	At     time.Duration `json:"at_ns"` // since the history began
	Took   time.Duration `json:"took_ns"`
	Err    string        `json:"error,omitempty"`
	// Membership, on the membership nemesis' final-heal event, counts
	// what it did in the run.
	Membership *chaos.MemberStats `json:"membership,omitempty"`
}

func faultEvent(ev chaos.Event) FaultEvent {
	return FaultEvent{Kind: ev.Kind, Phase: ev.Phase, Fault: ev.Fault, Nodes: ev.Nodes, Detail: ev.Detail,
		At: ev.Offset, Took: ev.End.Sub(ev.Begin), Err: ev.Err, Membership: ev.Stats}
}
