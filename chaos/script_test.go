package chaos

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const lrsScript = `{
  "name": "lrs",
  "min_nodes": 5,
  "steps": [
    {"kind": "lose-unfsynced", "start": "400ms", "stop": "600ms", "nodes": ["leader"]},
    {"kind": "partition", "start": "100ms", "stop": "500ms", "cuts": [{"from": ["followers"], "to": ["leader"]}]},
    {"kind": "kill", "start": "700ms", "stop": "800ms", "nodes": ["2", "others"]}
  ]
}`

// testRoles is partition jepsen/1 led by 3 with followers 1 and 5.
var testRoles = RoleMap{Partition: "jepsen/1", Nodes: map[string][]int{
	RoleLeader: {3}, RoleFollowers: {1, 5}, RoleReplicas: {1, 3, 5}, RoleOthers: {2, 4}, RoleMetadataLeader: {4},
}}

func TestReadScript_MakesAScheduleOrderedByStart(t *testing.T) {
	sc, err := ParseScript([]byte(lrsScript))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sc.Schedule([]int{1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	if s.Script != "lrs" || s.Partition != PartitionAwayFromMetadataLeader {
		t.Errorf("script %q partition %q", s.Script, s.Partition)
	}
	var got []string
	for _, f := range s.Faults {
		got = append(got, f.String())
	}
	want := []string{"partition cuts [[followers] -x- [leader]]", "lose-unfsynced [leader]", "kill [2 others]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("faults %q, want %q", got, want)
	}
	if sc.End() != 800*time.Millisecond || !reflect.DeepEqual(sc.Kinds(), []Kind{KindLoseUnfsynced, KindPartition, KindKill}) {
		t.Errorf("end %s kinds %v", sc.End(), sc.Kinds())
	}
	if _, err := sc.Schedule([]int{1, 2, 3}); !errors.Is(err, ErrTooFewNodes) {
		t.Errorf("on 3 nodes: %v, want ErrTooFewNodes", err)
	}
}

func TestReadScript_Rejects(t *testing.T) {
	for name, tc := range map[string]struct{ script, want string }{
		"no name":      {`{"steps": []}`, "needs a name"},
		"unknown key":  {`{"name": "x", "stepz": []}`, "unknown field"},
		"bad duration": {`{"name": "x", "steps": [{"kind": "kill", "start": 5, "stop": "6s", "nodes": ["1"]}]}`, "want a string"},
		"unknown kind": {`{"name": "x", "steps": [{"kind": "flood", "start": "1s", "stop": "2s", "nodes": ["1"]}]}`, "unknown kind"},
		"unknown role": {`{"name": "x", "steps": [{"kind": "kill", "start": "1s", "stop": "2s", "nodes": ["boss"]}]}`, "neither a node id nor a role"},
		"no target":    {`{"name": "x", "steps": [{"kind": "kill", "start": "1s", "stop": "2s"}]}`, "needs nodes"},
		"no cuts":      {`{"name": "x", "steps": [{"kind": "partition", "start": "1s", "stop": "2s"}]}`, "needs cuts"},
		"half cut":     {`{"name": "x", "steps": [{"kind": "partition", "start": "1s", "stop": "2s", "cuts": [{"from": ["1"]}]}]}`, "needs from and to"},
		"overlap": {`{"name": "x", "steps": [{"kind": "kill", "start": "1s", "stop": "3s", "nodes": ["1"]},
			{"kind": "kill", "start": "2s", "stop": "4s", "nodes": ["2"]}]}`, "before the previous kill stops"},
		"stop first":    {`{"name": "x", "steps": [{"kind": "kill", "start": "2s", "stop": "1s", "nodes": ["1"]}]}`, "runs from"},
		"bad partition": {`{"name": "x", "partition": "first", "steps": []}`, "want a number"},
		"membership":    {`{"name": "x", "steps": [{"kind": "membership", "start": "1s", "stop": "2s", "nodes": ["1"]}]}`, "not supported"},
		"corrupt":       {`{"name": "x", "steps": [{"kind": "corrupt", "start": "1s", "stop": "2s", "nodes": ["1"]}]}`, "not supported"},
	} {
		if _, err := ParseScript([]byte(tc.script)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	sc, err := ParseScript([]byte(`{"name": "x", "steps": [{"kind": "kill", "start": "1s", "stop": "2s", "nodes": ["7"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Schedule([]int{1, 2, 3}); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("node 7 of 3: %v", err)
	}
}

// The executor binds the roles once, at the first fault that names one,
// and every later fault uses the same binding.
func TestExecutor_ScriptRolesAreBoundOnceAndResolved(t *testing.T) {
	sc, err := ParseScript([]byte(lrsScript))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sc.Schedule([]int{1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	roles := testRoles
	env := &fakeEnv{roles: &roles}
	var ev events
	x := NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(context.Background())
	want := []string{
		"roles away-from-metadata-leader",
		"partition 1<-[3] 3<-[1 5] 5<-[3]", "lose [3]", "heal", "start [3]", "kill [2 4]", "start [2 4]",
	}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls:\n%q\nwant:\n%q", env.calls, want)
	}
	if r, ok := x.Roles(); !ok || r.Partition != "jepsen/1" {
		t.Errorf("bound roles %+v %v", r, ok)
	}
	if d := ev.ended[0].Detail; !strings.Contains(d, "3<-[1 5]") || !strings.Contains(d, "jepsen/1: leader [3]") {
		t.Errorf("partition detail %q lacks the grudge and the roles", d)
	}
	for _, e := range ev.ended {
		if e.Err != "" {
			t.Errorf("step failed: %+v", e)
		}
	}

	// Without roles a fault that names one fails, and is healed.
	env = &fakeEnv{}
	ev = events{}
	x = NewExecutor(env, s, time.Now(), ev.observer())
	x.Play(context.Background())
	if ev.ended[0].Err == "" {
		t.Errorf("a cut of roles nobody could name succeeded: %+v", ev.ended[0])
	}
}

func TestRoleMap_GrudgeOfCuts(t *testing.T) {
	g, err := testRoles.grudge([]Cut{{From: []string{"leader"}, To: []string{"2", "others"}, OneWay: true}, {From: []string{"1"}, To: []string{"5"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := Grudge{2: {3}, 4: {3}, 5: {1}, 1: {5}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("grudge %s, want %s", g, want)
	}
	if _, err := (RoleMap{Nodes: map[string][]int{}}).resolve([]string{"leader"}); err == nil {
		t.Error("a role nobody holds resolved")
	}
}

// A script on real nodes: its grudge cuts exactly the leader from its
// followers (the others still reach everyone), and its power loss of the
// leader takes back that node's unsynced writes only.
func TestExecutor_ScriptOnRealNodes(t *testing.T) {
	cfg := echoConfig(t, 5)
	cfg.Namespace, cfg.LazyFS = true, true
	cfg.Roles = func(context.Context, *Cluster, string) (RoleMap, error) { return testRoles, nil }
	c := newCluster(t, cfg)
	sc, err := ParseScript([]byte(`{"name": "lrs", "min_nodes": 5, "steps": [
		{"kind": "partition", "start": "0s", "stop": "1s", "cuts": [{"from": ["followers"], "to": ["leader"]}]},
		{"kind": "lose-unfsynced", "start": "100ms", "stop": "1500ms", "nodes": ["leader"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sc.Schedule(c.NodeIDs())
	if err != nil {
		t.Fatal(err)
	}
	marks := map[int]string{}
	obs := Observer{End: func(ev Event) {
		if ev.Err != "" {
			t.Errorf("step failed: %+v", ev)
		}
		switch {
		case ev.Kind == KindPartition && ev.Phase == PhaseStart:
			checkGrudge(t, c, Grudge{3: {1, 5}, 1: {3}, 5: {3}})
		case ev.Kind == KindLoseUnfsynced && ev.Phase == PhaseStart:
			for _, n := range c.Nodes() {
				marks[n.ID] = readMarks(t, n)
			}
		}
	}}
	x := NewExecutor(c, s, time.Now(), obs)
	x.Play(context.Background())
	if err := x.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := map[int]string{1: "SU", 2: "SU", 3: "S", 4: "SU", 5: "SU"}; !reflect.DeepEqual(marks, want) {
		t.Errorf("marks during the leader's power loss %v, want %v", marks, want)
	}
	checkGrudge(t, c, Grudge{})
}
