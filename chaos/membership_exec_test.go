package chaos

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAdmin is a fakeEnv on five nodes with an admin API made of
// function fields; a mover usually fills them.
type fakeAdmin struct {
	*fakeEnv
	assignment func() ([]PartitionReplicas, error)
	reassign   func(items []Reassignment) ([]error, error)
	running    func(id int) bool
	// decommission, when set, is the admin's Decommission.
	decommission func(id int, on bool) error
}

var _ MembershipEnv = (*fakeAdmin)(nil)

func (f *fakeAdmin) Assignment(context.Context) ([]PartitionReplicas, error) { return f.assignment() }
func (f *fakeAdmin) Reassign(_ context.Context, items []Reassignment) ([]error, error) {
	return f.reassign(items)
}
func (f *fakeAdmin) Decommission(_ context.Context, id int, on bool) error {
	if f.decommission == nil {
		return errors.New("no decommission in this fake")
	}
	return f.decommission(id, on)
}
func (f *fakeAdmin) Running(id int) bool {
	if f.running == nil {
		return true
	}
	return f.running(id)
}

// mover is a controller in miniature: a move or a cancel's way back
// ends after looks more looks at the assignment (never when looks < 0),
// a reorder changes the replicas at once and the leader after looks
// looks, and a partition's leader is its first replica otherwise.
type mover struct {
	mu    sync.Mutex
	looks int
	parts []*moverPart
	log   []string // every Reassign, as the items' strings
}

type moverPart struct {
	PartitionReplicas
	target, original []int
	left             int // looks until the move ends or the leader moves
}

func newMover(looks int) *mover {
	m := &mover{looks: looks}
	for _, p := range fiveNodeState().Partitions {
		m.parts = append(m.parts, &moverPart{PartitionReplicas: p})
	}
	return m
}

func (m *mover) admin() *fakeAdmin {
	return &fakeAdmin{fakeEnv: &fakeEnv{nodes: []int{1, 2, 3, 4, 5}}, assignment: m.assignment, reassign: m.reassign,
		decommission: m.decommission}
}

// decommission moves every partition off id (on), as the controller
// does, or cancels those moves (off).
func (m *mover) decommission(id int, on bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = append(m.log, fmt.Sprintf("decommission %d %v", id, on))
	for _, p := range m.parts {
		switch {
		case on && !p.Moving && slices.Contains(p.Replicas, id):
			to := slices.Clone(p.Replicas)
			for _, n := range []int{1, 2, 3, 4, 5} {
				if n != id && !slices.Contains(to, n) {
					to[slices.Index(to, id)] = n
					break
				}
			}
			p.original, p.target = p.Replicas, to
			p.Replicas = append(slices.Clone(to), minusInts(p.original, to)...)
			p.Moving, p.Adding, p.left = true, minusInts(to, p.original), m.looks
		case !on && p.Moving && !slices.Contains(p.target, id):
			p.target, p.Adding, p.left = p.original, nil, m.looks
		}
	}
	return nil
}

func (m *mover) assignment() ([]PartitionReplicas, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PartitionReplicas
	for _, p := range m.parts {
		if p.left > 0 {
			p.left--
		}
		if p.left == 0 && p.Moving {
			p.Replicas, p.Moving, p.Adding, p.target = p.target, false, nil, nil
		}
		if p.left == 0 {
			p.Leader = p.Replicas[0]
		}
		q := p.PartitionReplicas
		q.Replicas = slices.Clone(q.Replicas)
		out = append(out, q)
	}
	return out, nil
}

func (m *mover) reassign(items []Reassignment) ([]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := make([]error, len(items))
	var log []string
	for i, it := range items {
		log = append(log, it.String())
		p := m.parts[it.Partition]
		switch {
		case it.To == nil && !p.Moving:
			errs[i] = errors.New("NO_REASSIGNMENT_IN_PROGRESS")
		case it.To == nil:
			p.target, p.Adding, p.left = p.original, nil, m.looks
		case p.Moving:
			errs[i] = errors.New("REASSIGNMENT_IN_PROGRESS")
		case sameSet(it.To, p.Replicas):
			p.Replicas, p.left = slices.Clone(it.To), m.looks
		default:
			p.original, p.target = p.Replicas, slices.Clone(it.To)
			p.Replicas = append(slices.Clone(it.To), minusInts(p.original, it.To)...)
			p.Moving, p.Adding, p.left = true, minusInts(it.To, p.original), m.looks
		}
	}
	m.log = append(m.log, strings.Join(log, ", "))
	return errs, nil
}

// memberSchedule is one membership fault of action a from 0 to stop,
// with the given settle.
func memberSchedule(a MemberAction, seed uint64, stop, settle time.Duration) Schedule {
	cfg := DefaultScheduleConfig()
	cfg.Nodes, cfg.Kinds = []int{1, 2, 3, 4, 5}, []Kind{KindMembership}
	cfg.Membership.Settle = settle
	return Schedule{Config: cfg, Faults: []Fault{{ID: 0, Kind: KindMembership, Start: 0, Stop: stop, Action: a, Seed: seed}}}
}

// playMembership plays s on env with short polls and heals.
func playMembership(t *testing.T, env Env, s Schedule) (*events, error) {
	t.Helper()
	ev := &events{}
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.poll, x.settle = time.Millisecond, 2*time.Second
	x.Play(context.Background())
	err := x.Heal(context.Background())
	ev.check(t)
	return ev, err
}

// memberEvents are the membership events: start, stop and the final
// settle's.
func memberEvents(t *testing.T, ev *events) (start, stop, heal Event) {
	t.Helper()
	for _, e := range ev.ended {
		if e.Kind != KindMembership {
			continue
		}
		switch e.Phase {
		case PhaseStart:
			start = e
		case PhaseStop:
			stop = e
		case PhaseHeal:
			heal = e
		}
	}
	if heal.Stats == nil {
		t.Fatalf("no final settle with stats among %+v", ev.ended)
	}
	return start, stop, heal
}

func TestExecutor_MembershipMoveCompletes(t *testing.T) {
	m := newMover(3)
	ev, err := playMembership(t, m.admin(), memberSchedule(ActionMove, 1, time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	start, stop, heal := memberEvents(t, ev)
	if !strings.HasPrefix(start.Detail, "move t/") || !strings.Contains(start.Detail, "]->[") || start.Err != "" || start.Nodes != nil {
		t.Errorf("start %+v", start)
	}
	s := *heal.Stats
	if s.Moves == 0 || s.Completed != s.Moves || s.Cancels != 0 || s.Refused != 0 {
		t.Errorf("stats %s", s)
	}
	if strings.Count(stop.Detail, " on [") != s.Moves || !strings.Contains(stop.Detail, " after ") {
		t.Errorf("stop %q, want each of %d moves ending on its target", stop.Detail, s.Moves)
	}
	if heal.Detail == "" || !strings.Contains(heal.Detail, "no move in flight") || heal.Err != "" {
		t.Errorf("final settle %+v", heal)
	}
	for _, p := range m.parts {
		if p.Moving {
			t.Errorf("%s still moving after the heal", p.TopicPartition)
		}
	}
}

// TestExecutor_MembershipStopCancelsAtTheNextStep: a move that does not
// end is cancelled by its stop once the schedule's next step is due,
// although the settle time is an hour; the cancel's way back ends in
// the final heal.
func TestExecutor_MembershipStopCancelsAtTheNextStep(t *testing.T) {
	m := newMover(-1)
	s := memberSchedule(ActionMove, 2, time.Millisecond, time.Hour)
	s.Faults = append(s.Faults, Fault{ID: 1, Kind: KindPause, Start: 50 * time.Millisecond, Stop: 60 * time.Millisecond, Target: TargetOne, Nodes: []int{4}})
	adm := m.admin()
	ev := &events{}
	x := NewExecutor(adm, s, time.Now(), ev.observer())
	x.poll, x.settle = time.Millisecond, 2*time.Second
	ev.cancelAfter = func(n int) {
		if n == 2 { // the stop is done: the cancels' way back may end now
			m.mu.Lock()
			m.looks = 2
			for _, p := range m.parts {
				if p.Moving {
					p.left = 2
				}
			}
			m.mu.Unlock()
		}
	}
	x.Play(context.Background())
	err := x.Heal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, stop, heal := memberEvents(t, ev)
	if got := ev.ended[1]; got.Kind != KindMembership || got.Phase != PhaseStop {
		t.Fatalf("second step %+v, want the membership stop before the pause starts", got)
	}
	st := *heal.Stats
	if st.Moves == 0 || st.StopCancels != st.Moves || st.Cancels != st.Moves || st.Cancelled != st.Moves || st.Completed != 0 {
		t.Errorf("stats %s", st)
	}
	if !strings.Contains(stop.Detail, "still moving after") || !strings.Contains(stop.Detail, ": cancel") {
		t.Errorf("stop %q", stop.Detail)
	}
	if !strings.Contains(heal.Detail, "back on [") {
		t.Errorf("final settle %q", heal.Detail)
	}
}

func TestExecutor_MembershipKillMidMove(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		m := newMover(1 << 20) // in flight until the kill and beyond
		adm := m.admin()
		ev := &events{}
		x := NewExecutor(adm, memberSchedule(ActionKillMidMove, seed, time.Millisecond, 5*time.Millisecond), time.Now(), ev.observer())
		x.poll, x.settle = time.Millisecond, 200*time.Millisecond
		x.Play(context.Background())
		m.mu.Lock()
		m.looks = 1
		for _, p := range m.parts {
			p.left = min(p.left, 1)
		}
		m.mu.Unlock()
		if err := x.Heal(context.Background()); err != nil {
			t.Fatal(err)
		}
		start, stop, heal := memberEvents(t, ev)
		if len(start.Nodes) != 1 || !strings.HasPrefix(start.Detail, fmt.Sprintf("kill %d (", start.Nodes[0])) || !strings.Contains(start.Detail, " mid-move of t/") {
			t.Fatalf("seed %d: start %+v", seed, start)
		}
		victim := start.Nodes[0]
		mv := x.members[0].moves[0]
		if role := strings.Fields(start.Detail)[2]; (role == "(leader)" && victim != mv.From[0]) || (role == "(adding)" && !slices.Contains(minusInts(mv.To, mv.From), victim)) {
			t.Errorf("seed %d: killed %d as %s of %s", seed, victim, role, mv.Reassignment)
		}
		want := []string{fmt.Sprintf("kill [%d]", victim), fmt.Sprintf("start [%d]", victim)}
		if got := adm.calls[:2]; !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: calls %q, want %q first", seed, adm.calls, want)
		}
		if !reflect.DeepEqual(stop.Nodes, start.Nodes) || !strings.HasPrefix(stop.Detail, fmt.Sprintf("restart [%d]; ", victim)) {
			t.Errorf("seed %d: stop %+v", seed, stop)
		}
		if s := *heal.Stats; s.KilledMidMove != 1 || s.Moves != 1 || s.StopCancels != 1 || s.Cancelled != 1 {
			t.Errorf("seed %d: stats %s", seed, s)
		}
	}
}

func TestExecutor_MembershipKillSkippedWhenTheMoveEnded(t *testing.T) {
	m := newMover(0) // a move ends at the first look
	ev, err := playMembership(t, m.admin(), memberSchedule(ActionKillMidMove, 1, time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	start, _, heal := memberEvents(t, ev)
	if start.Nodes != nil || !strings.Contains(start.Detail, "the move ended within") {
		t.Errorf("start %+v", start)
	}
	if s := *heal.Stats; s.KilledMidMove != 0 || s.Completed != 1 {
		t.Errorf("stats %s", s)
	}
}

func TestExecutor_MembershipCancel(t *testing.T) {
	m := newMover(1 << 20)
	adm := m.admin()
	ev := &events{}
	x := NewExecutor(adm, memberSchedule(ActionCancel, 3, time.Millisecond, time.Millisecond), time.Now(), ev.observer())
	x.poll, x.settle = time.Millisecond, 2*time.Second
	x.Play(context.Background())
	m.mu.Lock()
	for _, p := range m.parts {
		p.left = min(p.left, 2)
	}
	m.mu.Unlock()
	if err := x.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	start, _, heal := memberEvents(t, ev)
	if len(m.log) < 2 || !strings.HasPrefix(m.log[1], "cancel t/") || !strings.Contains(start.Detail, "; cancel t/") {
		t.Errorf("reassigns %q, start %q: want a move, then its cancel", m.log, start.Detail)
	}
	if s := *heal.Stats; s.Cancels != 1 || s.StopCancels != 0 || s.Cancelled != 1 || s.Moves != 1 {
		t.Errorf("stats %s", s)
	}
}

func TestExecutor_MembershipReorderMovesTheLeader(t *testing.T) {
	m := newMover(3)
	ev, err := playMembership(t, m.admin(), memberSchedule(ActionReorder, 1, time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	start, stop, heal := memberEvents(t, ev)
	if !strings.HasPrefix(start.Detail, "reorder t/") || !strings.Contains(stop.Detail, "led by its preferred replica") {
		t.Errorf("start %q, stop %q", start.Detail, stop.Detail)
	}
	if s := *heal.Stats; s.Reorders != 1 || s.LeaderMoved != 1 || s.Moves != 0 {
		t.Errorf("stats %s", s)
	}
}

func TestExecutor_MembershipRefusalIsReported(t *testing.T) {
	m := newMover(1)
	adm := m.admin()
	adm.reassign = func(items []Reassignment) ([]error, error) {
		errs := make([]error, len(items))
		for i := range errs {
			errs[i] = errors.New("INVALID_REPLICA_ASSIGNMENT")
		}
		return errs, nil
	}
	ev, err := playMembership(t, adm, memberSchedule(ActionMove, 1, time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	start, stop, heal := memberEvents(t, ev)
	if !strings.Contains(start.Err, "refused: INVALID_REPLICA_ASSIGNMENT") {
		t.Errorf("start %+v", start)
	}
	if s := *heal.Stats; s.Refused == 0 || s.Moves != 0 || stop.Detail != "no move to wait for" {
		t.Errorf("stats %s, stop %q", s, stop.Detail)
	}
}

// TestExecutor_MembershipLostAnswer: a reassign whose answer is lost may
// have been taken; the stop finds the move and waits for it.
func TestExecutor_MembershipLostAnswer(t *testing.T) {
	m := newMover(2)
	adm := m.admin()
	adm.reassign = func(items []Reassignment) ([]error, error) {
		m.reassign(items)
		return nil, context.DeadlineExceeded
	}
	ev, err := playMembership(t, adm, memberSchedule(ActionMove, 1, time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	start, _, heal := memberEvents(t, ev)
	if !strings.Contains(start.Err, "may have taken it") {
		t.Errorf("start %+v", start)
	}
	if s := *heal.Stats; s.Moves == 0 || s.Completed != s.Moves {
		t.Errorf("stats %s", s)
	}
}

func TestExecutor_MembershipNeedsAnAdmin(t *testing.T) {
	ev, err := playMembership(t, &fakeEnv{}, memberSchedule(ActionMove, 1, time.Millisecond, time.Minute))
	if err != nil {
		t.Fatalf("heal: %v", err)
	}
	if got := ev.ended[0]; !strings.Contains(got.Err, ErrUnsupported.Error()) {
		t.Errorf("start %+v, want %v", got, ErrUnsupported)
	}
	for _, e := range ev.ended {
		if e.Phase == PhaseHeal && e.Kind == KindMembership {
			t.Errorf("a final settle without an admin: %+v", e)
		}
	}
}

// TestExecutor_MembershipSameSeedSameActions: two runs of one schedule
// on the same cluster send the same requests.
func TestExecutor_MembershipSameSeedSameActions(t *testing.T) {
	var logs [][]string
	for range 2 {
		m := newMover(0) // every move ends at the first look: the same looks, the same states
		cfg := DefaultScheduleConfig()
		cfg.Seed, cfg.Nodes, cfg.Kinds, cfg.Duration, cfg.Interval = 9, []int{1, 2, 3, 4, 5}, []Kind{KindMembership}, 300*time.Millisecond, 20*time.Millisecond
		s, err := Plan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := playMembership(t, m.admin(), s); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, m.log)
	}
	if len(logs[0]) < 3 || !reflect.DeepEqual(logs[0], logs[1]) {
		t.Errorf("runs sent %q and %q", logs[0], logs[1])
	}
}

// TestExecutor_MembershipFinalSettleCancels: a move still under way when
// the workload ends is left by its stop to the final settle, which
// cancels it half way through its wait and awaits the way back.
func TestExecutor_MembershipFinalSettleCancels(t *testing.T) {
	m := newMover(-1)
	adm := m.admin()
	ev := &events{}
	x := NewExecutor(adm, memberSchedule(ActionMove, 5, time.Millisecond, time.Hour), time.Now(), ev.observer())
	x.poll, x.settle = time.Millisecond, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	ev.cancelAfter = func(n int) {
		if n == 1 {
			cancel() // the workload ends while the stop waits
		}
	}
	x.Play(ctx)
	m.mu.Lock()
	m.looks = 2
	m.mu.Unlock()
	if err := x.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	_, stop, heal := memberEvents(t, ev)
	if !strings.Contains(stop.Detail, "left to the final heal") {
		t.Errorf("stop %q", stop.Detail)
	}
	if s := *heal.Stats; s.Moves == 0 || s.Cancelled != s.Moves || s.StopCancels != s.Moves || !strings.Contains(heal.Detail, "cancel t/") {
		t.Errorf("stats %s, settle %q", s, heal.Detail)
	}
}

// TestExecutor_MembershipFinalSettleGivesUp: moves that never end make
// the final heal fail, saying which.
func TestExecutor_MembershipFinalSettleGivesUp(t *testing.T) {
	m := newMover(-1)
	m.parts[1].Moving, m.parts[1].target, m.parts[1].left = true, []int{5}, -1 // someone else's move
	adm := m.admin()
	adm.reassign = func([]Reassignment) ([]error, error) { return nil, errors.New("no controller") }
	ev := &events{}
	x := NewExecutor(adm, memberSchedule(ActionReorder, 1, time.Millisecond, time.Millisecond), time.Now(), ev.observer())
	x.poll, x.settle = time.Millisecond, 20*time.Millisecond
	x.Play(context.Background())
	err := x.Heal(context.Background())
	if err == nil || !strings.Contains(err.Error(), "still moving") || !strings.Contains(err.Error(), "t/1") {
		t.Errorf("Heal = %v, want t/1 still moving", err)
	}
}

// TestExecutor_MembershipCountsEachMoveOnce: a stop whose cancel fails
// stays active and runs again in the final heal; every move still
// counts once.
func TestExecutor_MembershipCountsEachMoveOnce(t *testing.T) {
	m := newMover(-1)
	adm := m.admin()
	var failCancels atomic.Bool
	failCancels.Store(true)
	adm.reassign = func(items []Reassignment) ([]error, error) {
		if items[0].To == nil && failCancels.Load() {
			return nil, errors.New("no controller")
		}
		return m.reassign(items)
	}
	ev := &events{}
	x := NewExecutor(adm, memberSchedule(ActionMove, 2, time.Millisecond, 5*time.Millisecond), time.Now(), ev.observer())
	x.poll, x.settle = time.Millisecond, time.Second
	x.Play(context.Background())
	failCancels.Store(false)
	m.mu.Lock()
	m.looks = 2
	m.mu.Unlock()
	if err := x.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	var stops int
	for _, e := range ev.ended {
		if e.Kind == KindMembership && e.Phase == PhaseStop {
			stops++
		}
	}
	_, _, heal := memberEvents(t, ev)
	s := *heal.Stats
	if stops != 2 || s.Moves == 0 || s.Cancelled != s.Moves || s.Completed != 0 || len(x.open) != 0 {
		t.Errorf("%d stops, stats %s, %d open: want each move cancelled once", stops, s, len(x.open))
	}
}

// TestExecutor_MembershipLaterFaultSeesAnEarlierMoveEnd: a move whose
// stop could neither look nor cancel is counted when the next fault's
// start sees the partition on its target, before that fault moves
// anything.
func TestExecutor_MembershipLaterFaultSeesAnEarlierMoveEnd(t *testing.T) {
	m := newMover(1)
	adm := m.admin()
	var blind atomic.Bool
	adm.assignment = func() ([]PartitionReplicas, error) {
		if blind.Load() {
			return nil, errors.New("no controller")
		}
		return m.assignment()
	}
	adm.reassign = func(items []Reassignment) ([]error, error) {
		if blind.Load() {
			return nil, errors.New("no controller")
		}
		return m.reassign(items)
	}
	s := memberSchedule(ActionMove, 1, time.Millisecond, time.Millisecond)
	s.Faults = append(s.Faults, Fault{ID: 1, Kind: KindMembership, Start: 50 * time.Millisecond, Stop: 60 * time.Millisecond, Action: ActionReorder, Seed: 2})
	ev := &events{cancelAfter: func(n int) { blind.Store(n == 1) }} // the first stop is blind
	x := NewExecutor(adm, s, time.Now(), ev.observer())
	x.poll, x.settle = time.Millisecond, time.Second
	x.Play(context.Background())
	if err := x.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ev.ended[1]; got.Phase != PhaseStop || got.Err == "" {
		t.Fatalf("first stop %+v, want one that could not look", got)
	}
	if got := ev.ended[2]; got.Phase != PhaseStart || !strings.Contains(got.Detail, "(earlier moves: t/") {
		t.Errorf("second start %q, want the first move's end", got.Detail)
	}
	_, _, heal := memberEvents(t, ev)
	if st := *heal.Stats; st.Moves == 0 || st.Completed != st.Moves || st.Elsewhere != 0 {
		t.Errorf("stats %s", st)
	}
}

// A decommission fault empties its node and recommissions it at its
// stop; one whose stop comes before the node is empty recommissions it
// anyway, which cancels the moves off it, and the final heal leaves no
// move and no decommissioned node.
func TestExecutor_MembershipDecommission(t *testing.T) {
	for _, tc := range []struct {
		name  string
		looks int
		want  string
	}{
		{"emptied", 3, ": emptied in "},
		{"stopped early", -1, "partitions still on it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMover(tc.looks)
			s := memberSchedule(ActionDecommission, 1, time.Millisecond, time.Minute)
			if tc.looks < 0 {
				s.Faults = append(s.Faults, Fault{ID: 1, Kind: KindPause, Start: 20 * time.Millisecond, Stop: 30 * time.Millisecond, Target: TargetOne, Nodes: []int{4}})
			}
			adm := m.admin()
			ev := &events{}
			x := NewExecutor(adm, s, time.Now(), ev.observer())
			x.poll, x.settle = time.Millisecond, 2*time.Second
			ev.cancelAfter = func(n int) {
				if n == 2 && tc.looks < 0 { // recommissioned: the way back may end now
					m.mu.Lock()
					m.looks = 1
					for _, p := range m.parts {
						p.left = 1
					}
					m.mu.Unlock()
				}
			}
			x.Play(context.Background())
			if err := x.Heal(context.Background()); err != nil {
				t.Fatal(err)
			}
			ev.check(t)
			start, stop, heal := memberEvents(t, ev)
			if !strings.HasPrefix(start.Detail, "decommission ") || start.Err != "" {
				t.Fatalf("start %+v", start)
			}
			if !strings.Contains(stop.Detail, tc.want) {
				t.Errorf("stop %q, want %q", stop.Detail, tc.want)
			}
			if s := *heal.Stats; s.Decommissions != 1 || (tc.looks > 0) != (s.Emptied == 1) {
				t.Errorf("stats %s", s)
			}
			if len(x.decommissioned) > 0 {
				t.Errorf("nodes %v still decommissioned after the heal", x.decommissioned)
			}
			for _, p := range m.parts {
				if p.Moving {
					t.Errorf("%s still moving after the heal", p.TopicPartition)
				}
			}
		})
	}
}
