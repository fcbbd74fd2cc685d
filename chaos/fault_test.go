package chaos

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestStartStopFault_ActAsRunSteps(t *testing.T) {
	env := &fakeEnv{leader: 3}
	ctx := context.Background()
	kill := Fault{ID: 4, Kind: KindKill, Target: TargetLeader}
	nodes, detail, err := StartFault(ctx, env, kill)
	if err != nil || !reflect.DeepEqual(nodes, []int{3}) || detail != "kill leader [3]" {
		t.Fatalf("start kill-leader: %v %q %v", nodes, detail, err)
	}
	if detail, err = StopFault(ctx, env, kill, nodes); err != nil || detail != "restart [3]" {
		t.Fatalf("stop kill-leader: %q %v", detail, err)
	}
	part := Fault{ID: 5, Kind: KindPartition, Shape: ShapeIsolateOne, Grudge: Isolate(1, []int{1, 2, 3})}
	if nodes, _, err = StartFault(ctx, env, part); err != nil || !reflect.DeepEqual(nodes, []int{1, 2, 3}) {
		t.Fatalf("start partition: %v %v", nodes, err)
	}
	if _, err = StopFault(ctx, env, part, nodes); err != nil {
		t.Fatal(err)
	}
	want := []string{"kill [3]", "start [3]", "partition 1<-[2 3] 2<-[1] 3<-[1]", "heal"}
	if !reflect.DeepEqual(env.calls, want) {
		t.Fatalf("calls %q, want %q", env.calls, want)
	}
	if _, _, err := StartFault(ctx, env, Fault{Kind: KindMembership}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("membership: %v", err)
	}
}

func TestScheduleConfig_ValidateRejectsUnknownTargetsAndShapes(t *testing.T) {
	base := DefaultScheduleConfig()
	base.Duration, base.Nodes = time.Minute, []int{1, 2, 3}
	base.Kinds = []Kind{KindKill, KindPartition}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := base
	bad.Targets = []Target{TargetOne, "nobody"}
	if err := bad.Validate(); err == nil {
		t.Error("unknown target accepted")
	}
	bad = base
	bad.Shapes = []Shape{"triangle"}
	if err := bad.Validate(); err == nil {
		t.Error("unknown shape accepted")
	}
}
