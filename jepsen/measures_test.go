package jepsen

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// measureHistory is a small run with one kill window:
//
//	a  p0 ok  outside, before the fault
//	d  p1 ok  invoked before the fault, completed in it: no failover evidence
//	e  p1 ok  invoked after the fault's start was invoked, before it took
//	          effect (completed): in the window, no failover evidence either
//	b  p0 info in the fault
//	x  p1 ok  in the fault: p1's failover
//	c  p0 ok  after the fault: p0's failover
//	y  p1 ok  after the fault
//
// and complete final reads of both partitions; lose drops c from p0's.
func measureHistory(lose bool) (b *hb, at map[string][2]int64, win [2]int64) {
	b = &hb{}
	at = map[string][2]int64{}
	done := func(name string, inv, comp Op) { at[name] = [2]int64{inv.Time, comp.Time} }
	ia := b.sendInv(0, 0, "a")
	done("a", ia, b.sendDone(ia, OK, 0))
	id := b.sendInv(3, 1, "d")
	start := b.invoke(Op{Process: NemesisProcess, F: FStart, Nemesis: "kill"})
	ie := b.sendInv(5, 1, "e")
	b.complete(start, OK, nil)
	done("d", id, b.sendDone(id, OK, 0))
	done("e", ie, b.sendDone(ie, OK, 1))
	ib := b.sendInv(1, 0, "b")
	b.sendDone(ib, Info, 0)
	ix := b.sendInv(0, 1, "x")
	done("x", ix, b.sendDone(ix, OK, 2))
	stop := b.invoke(Op{Process: NemesisProcess, F: FStop, Nemesis: "kill"})
	end := b.complete(stop, OK, nil)
	ic := b.sendInv(0, 0, "c")
	iy := b.sendInv(2, 1, "y")
	done("c", ic, b.sendDone(ic, OK, 1))
	done("y", iy, b.sendDone(iy, OK, 3))
	if lose {
		b.final(4, 0, OK, 2, 0, "a")
	} else {
		b.final(4, 0, OK, 2, 0, "a", 1, "c")
	}
	b.final(4, 1, OK, 4, 0, "d", 1, "e", 2, "x", 3, "y")
	return b, at, [2]int64{start.Time, end.Time}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestMeasures_AvailabilityFailoverThroughputLatency(t *testing.T) {
	b, at, win := measureHistory(false)
	m := check(t, b.h).Measures
	if m.Acknowledged != 6 || m.Attempted != 7 {
		t.Fatalf("acknowledged %d of %d, want 6 of 7", m.Acknowledged, m.Attempted)
	}
	// In the window: e (ok), b (info) and x (ok); d was invoked before it.
	for name, got := range map[string]Ratio{"overall": m.Availability, "during": m.AvailabilityFaults, "outside": m.AvailabilityOutside} {
		want := map[string]Ratio{"overall": {6, 7, 6.0 / 7}, "during": {2, 3, 2.0 / 3}, "outside": {4, 4, 1}}[name]
		if got.OK != want.OK || got.Attempted != want.Attempted || !near(got.Value, want.Value) {
			t.Errorf("availability %s %+v, want %+v", name, got, want)
		}
	}
	if len(m.Faults) != 1 {
		t.Fatalf("faults %+v", m.Faults)
	}
	f := m.Faults[0]
	if f.Nemesis != "kill" || f.StartNs != win[0] || f.EndNs != win[1] || f.Availability.OK != 2 || f.Availability.Attempted != 3 {
		t.Errorf("fault %+v, window %v", f, win)
	}
	// d and e completed in the window but were invoked before the kill
	// took effect: p1 failed over with x, p0 only with c.
	p0, p1 := at["c"][1]-win[0], at["x"][1]-win[0]
	if f.FailoverByPartition["t/0"] != p0 || f.FailoverByPartition["t/1"] != p1 || f.FailoverNs != max(p0, p1) {
		t.Errorf("failover %d %v, want p0 %d p1 %d", f.FailoverNs, f.FailoverByPartition, p0, p1)
	}
	first, last := at["a"][0], at["y"][1]
	if want := 6 / (float64(last-first) / 1e9); !near(m.OKSendsPerSec, want) {
		t.Errorf("ok sends/s %g, want %g", m.OKSendsPerSec, want)
	}
	// Outside: a, d, c, y over the send span minus the window.
	if want := 4 / (float64(last-first-(win[1]-win[0])) / 1e9); !near(m.OKSendsPerSecOutside, want) {
		t.Errorf("ok sends/s outside %g, want %g", m.OKSendsPerSecOutside, want)
	}
	lat := []int64{at["a"][1] - at["a"][0], at["d"][1] - at["d"][0], at["c"][1] - at["c"][0], at["y"][1] - at["y"][0]}
	if m.LatencyP50Ns != percentile(lat, 50) || m.LatencyP99Ns != lat[1] { // d waited longest
		t.Errorf("latency p50 %d p99 %d from %v", m.LatencyP50Ns, m.LatencyP99Ns, lat)
	}
	if line := m.String(); !strings.Contains(line, "acknowledged=6 loss/M=0") || !strings.Contains(line, "during-faults=0.667") ||
		!strings.Contains(line, "failover-p50=") {
		t.Errorf("measures line %q", line)
	}
	if m.Loss != 0 || m.LossPerMillion != 0 || m.Lost != 0 {
		t.Errorf("a clean history lost %+v", m)
	}
}

func TestMeasures_LossPerMillionAcknowledged(t *testing.T) {
	b, _, _ := measureHistory(true)
	m := check(t, b.h).Measures
	// c was acknowledged at p0/1 and the complete final read of p0 (hw 2)
	// does not return it: lost and unseen, one of six acknowledged.
	if m.Lost != 1 || m.Unseen != 1 || m.Loss != 1 {
		t.Fatalf("lost %d unseen %d loss %d, want 1 each", m.Lost, m.Unseen, m.Loss)
	}
	if want := 1e6 / 6; !near(m.LostPerMillion, want) || !near(m.UnseenPerMillion, want) || !near(m.LossPerMillion, want) {
		t.Errorf("per million: lost %g unseen %g loss %g, want %g", m.LostPerMillion, m.UnseenPerMillion, m.LossPerMillion, want)
	}
	if m.Duplicated != 0 || m.Inconsistent != 0 || m.Reordered != 0 {
		t.Errorf("%+v", m)
	}
}

func TestMeasures_DuplicatedReorderedInconsistentPerMillion(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 0, "b", OK, 1)
	b.send(0, 0, "c", OK, 1) // c acknowledged where b was: inconsistent; not after b: reordered
	b.send(1, 0, "d", OK, 2)
	// d also read at 3: duplicated
	b.final(4, 0, OK, 4, 0, "a", 1, "b", 2, "d", 3, "d")
	m := check(t, b.h).Measures
	if m.Acknowledged != 4 || m.Duplicated != 1 || m.Inconsistent != 1 || m.Reordered != 1 {
		t.Fatalf("%+v", m)
	}
	if m.DuplicatedPerMillion != 250000 || m.InconsistentPerMillion != 250000 || m.ReorderedPerMillion != 250000 {
		t.Errorf("per million: duplicated %g inconsistent %g reordered %g", m.DuplicatedPerMillion, m.InconsistentPerMillion, m.ReorderedPerMillion)
	}
	// No fault: everything is outside, availability 1, no fault measures.
	if m.AvailabilityOutside.Value != 1 || m.AvailabilityFaults.Attempted != 0 || len(m.Faults) != 0 {
		t.Errorf("availability %+v %+v faults %v", m.AvailabilityOutside, m.AvailabilityFaults, m.Faults)
	}
}

func TestMeasures_FaultNeverRecoveredIsMinusOne(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(0, 1, "x", OK, 0)
	b.nemesis(FStart, "partition") // never stopped: the window runs to the end
	b.send(0, 0, "b", OK, 1)
	inv := b.sendInv(1, 1, "y")
	b.sendDone(inv, Info, 0)
	b.final(4, 0, OK, 2, 0, "a", 1, "b")
	b.final(4, 1, OK, 1, 0, "x")
	m := check(t, b.h).Measures
	if len(m.Faults) != 1 {
		t.Fatalf("faults %+v", m.Faults)
	}
	f := m.Faults[0]
	if len(f.FailoverByPartition) != 2 || f.FailoverByPartition["t/1"] != -1 || f.FailoverByPartition["t/0"] <= 0 || f.FailoverNs != -1 {
		t.Errorf("failover %d %v, want p1 never (-1)", f.FailoverNs, f.FailoverByPartition)
	}
	if f.EndNs != b.h[len(b.h)-1].Time {
		t.Errorf("open window ends at %d, want the history's end", f.EndNs)
	}
}

// A partition nothing was sent to after a fault began says nothing about
// its failover.
func TestMeasures_FailoverLeavesOutPartitionsNotSentTo(t *testing.T) {
	b := &hb{}
	b.send(0, 1, "x", OK, 0)
	b.nemesis(FStart, "kill")
	b.send(0, 0, "a", OK, 0)
	b.nemesis(FStop, "kill")
	b.final(4, 0, OK, 1, 0, "a")
	b.final(4, 1, OK, 1, 0, "x")
	f := check(t, b.h).Measures.Faults[0]
	if _, ok := f.FailoverByPartition["t/1"]; ok || len(f.FailoverByPartition) != 1 || f.FailoverNs <= 0 {
		t.Errorf("failover %d %v, want p0's only", f.FailoverNs, f.FailoverByPartition)
	}
}

func TestPercentile_NearestRank(t *testing.T) {
	xs := []int64{50, 10, 40, 20, 30}
	for p, want := range map[int]int64{1: 10, 20: 10, 21: 20, 50: 30, 99: 50, 100: 50} {
		if got := percentile(xs, p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
}

// A fault that began while another's failover was under way makes that
// failover both faults': it is marked overlapped and left out of the
// summaries; the second fault, which nothing overlapped, stays in.
func TestMeasures_OverlappedFailoverLeftOutOfSummaries(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.nemesis(FStart, "kill")
	inv := b.sendInv(1, 0, "b")
	b.nemesis(FStart, "pause") // before the kill's failover is over
	b.sendDone(inv, Info, 0)
	b.nemesis(FStop, "kill")
	b.send(0, 0, "c", OK, 1)
	b.nemesis(FStop, "pause")
	b.send(0, 0, "d", OK, 2)
	b.final(4, 0, OK, 3, 0, "a", 1, "c", 2, "d")
	m := check(t, b.h).Measures
	if len(m.Faults) != 2 {
		t.Fatalf("faults %+v", m.Faults)
	}
	kill, pause := m.Faults[0], m.Faults[1]
	if !kill.Overlapped || pause.Overlapped || kill.FailoverNs <= 0 || pause.FailoverNs <= 0 {
		t.Fatalf("kill %+v pause %+v, want the kill overlapped and the pause not", kill, pause)
	}
	fo, n := m.IsolatedFailovers()
	if n != 1 || len(fo) != 1 || fo[0] != pause.FailoverNs {
		t.Errorf("isolated failovers %v, %d overlapped; want the pause's %d, 1", fo, n, pause.FailoverNs)
	}
	if line := m.String(); !strings.Contains(line, "failover-overlapped=1") || !strings.Contains(line, "failover-p99=") {
		t.Errorf("measures line %q", line)
	}
}

// The worst partition during faults is the one with the lowest share of
// ok sends among those with at least minPartitionSends: here t/1 (3 of
// 10), not t/2, whose 2 failed sends are too few to judge, while the
// whole cluster's availability (13 of 22) hides t/1's outage.
func TestMeasures_WorstPartitionDuringFaults(t *testing.T) {
	b := &hb{}
	b.nemesis(FStart, "kill")
	var p0, p1 []any
	for i := range 10 {
		v := fmt.Sprintf("a%d", i)
		b.send(0, 0, v, OK, int64(i))
		p0 = append(p0, i, v)
	}
	for i := range 10 {
		v := fmt.Sprintf("b%d", i)
		if i < 3 {
			b.send(1, 1, v, OK, int64(i))
			p1 = append(p1, i, v)
			continue
		}
		b.sendDone(b.sendInv(10+i, 1, v), Info, 0) // an info ends its process
	}
	for i := range 2 {
		b.sendDone(b.sendInv(20+i, 2, fmt.Sprintf("c%d", i)), Info, 0)
	}
	b.nemesis(FStop, "kill")
	b.final(4, 0, OK, 10, p0...)
	b.final(4, 1, OK, 3, p1...)
	m := check(t, b.h).Measures
	w := m.WorstPartitionFaults
	if w.Partition != "t/1" || w.OK != 3 || w.Attempted != 10 || !near(w.Value, 0.3) {
		t.Errorf("worst partition %+v, want t/1 with 3 of 10", w)
	}
	if m.AvailabilityFaults.OK != 13 || m.AvailabilityFaults.Attempted != 22 {
		t.Errorf("availability during faults %+v, want 13 of 22", m.AvailabilityFaults)
	}
}

// A membership fault measures a failover only when its start killed a
// node; either way it is a fault window, and the report's detail is the
// history's.
func TestMeasures_MembershipFailoverOnlyWhenItKilled(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	mv := b.invoke(Op{Process: NemesisProcess, F: FStart, Nemesis: "membership"})
	b.complete(mv, OK, func(op *Op) { op.Detail = "move t/0 [1,2,3]->[4,5,2]" })
	b.send(0, 0, "b", OK, 1)
	stop := b.invoke(Op{Process: NemesisProcess, F: FStop, Nemesis: "membership"})
	b.complete(stop, OK, func(op *Op) { op.Detail = "t/0 on [4,5,2] after 1.2s" })
	kill := b.invoke(Op{Process: NemesisProcess, F: FStart, Nemesis: "membership"})
	b.complete(kill, OK, func(op *Op) { op.Nodes, op.Detail = []int{4}, "kill 4 (adding) mid-move of t/0" })
	b.send(0, 0, "c", OK, 2)
	b.nemesis(FStop, "membership")
	b.final(4, 0, OK, 3, 0, "a", 1, "b", 2, "c")
	m := check(t, b.h).Measures
	if len(m.Faults) != 2 {
		t.Fatalf("faults %+v", m.Faults)
	}
	moved, killed := m.Faults[0], m.Faults[1]
	if !moved.NoFailover || moved.FailoverNs != 0 || moved.FailoverByPartition != nil || moved.Availability.Attempted != 1 {
		t.Errorf("a move that killed nothing: %+v", moved)
	}
	if moved.Detail != "move t/0 [1,2,3]->[4,5,2]" || moved.StopDetail != "t/0 on [4,5,2] after 1.2s" {
		t.Errorf("details %q / %q", moved.Detail, moved.StopDetail)
	}
	if killed.NoFailover || killed.FailoverNs <= 0 || killed.FailoverByPartition["t/0"] != killed.FailoverNs {
		t.Errorf("a kill mid-move: %+v", killed)
	}
	if fo, _ := m.IsolatedFailovers(); len(fo) != 1 || fo[0] != killed.FailoverNs {
		t.Errorf("isolated failovers %v, want the kill's alone", fo)
	}
}
