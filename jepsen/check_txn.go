package jepsen

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// checkTxns runs the checkers only transactional histories get, in
// TxnCheckerNames' order.
func checkTxns(a *analysis, limit int) []CheckerResult {
	g := buildTxnGraph(a, maxTxnEdges)
	g0, g1c := checkTxnCycles(g, limit)
	return []CheckerResult{
		checkUncommittedRead(a, limit),
		checkG1b(a, limit),
		g0,
		g1c,
		checkG1cRealtime(a, g, limit),
	}
}

// maxCycleOps bounds the txns an example cycle names; a longer one shows
// its first and last halves of that.
const maxCycleOps = 32

// maxTxnEdges bounds the dependency graph; past it G0 and G1c are
// undecided rather than slow.
const maxTxnEdges = 4 << 20

// txnOpIndex names a txn by its completion's index, or its invocation's
// when it never completed.
func txnOpIndex(t *txn) int64 {
	if t.comp != nil {
		return t.comp.Index
	}
	return t.inv.Index
}

// checkUncommittedRead flags observations of a txn's value that a
// read_committed reader should not have had: by a read that completed
// before the txn's EndTxn was called (precommitted), of a txn that
// completed without ever calling EndTxn and is not ok (never-committed),
// or by the txn's own polls, which run before its sends (own-write).
func checkUncommittedRead(a *analysis, limit int) CheckerResult {
	f := newFinding(CheckUncommittedRead, limit)
	for _, r := range a.reads {
		tp := r.r.TP()
		for _, rec := range r.r.Records {
			s := a.byValue[rec.Value]
			if s == nil || s.txn == nil {
				continue
			}
			t := s.txn
			var key, why string
			switch end := t.v.EndStart; {
			case r.inv == t.inv:
				key, why = "own-write", "the txn's polls run before its sends"
			case end > 0 && readBefore(r, end):
				key, why = "precommitted", fmt.Sprintf("the read completed by %d, before the txn called EndTxn at %d", readDone(r), end)
			case end == 0 && t.comp != nil && t.typ() != OK:
				key, why = "never-committed", fmt.Sprintf("the txn ended %s without calling EndTxn", t.typ())
			default:
				continue
			}
			f.flag(key, Anomaly{
				Topic: tp.Topic, Partition: tp.Partition, Offset: rec.Offset, Value: rec.Value, Process: r.inv.Process,
				Ops:    uniqueOps(txnOpIndex(t), r.comp.Index),
				Detail: fmt.Sprintf("op %d read %q at offset %d of %s, written by txn op %d (%s); %s", r.comp.Index, rec.Value, rec.Offset, tp, txnOpIndex(t), t.typ(), why),
			})
		}
	}
	return f.result()
}

// readDone is when a read is known to have completed: a txn's polls
// before the txn called EndTxn, when it did; any read by its completion.
func readDone(r read) int64 {
	if r.inv.F == FTxn && r.comp.Txn != nil && r.comp.Txn.EndStart > 0 {
		return r.comp.Txn.EndStart
	}
	return r.comp.Time
}

// readBefore reports whether r completed before time t. A txn's polls
// complete strictly before its EndStart.
func readBefore(r read, t int64) bool {
	d := readDone(r)
	return d < t || (d == t && r.inv.F == FTxn && r.comp.Txn != nil && r.comp.Txn.EndStart > 0)
}

// checkG1b flags a read (one poll's or final read's records of one
// partition) that returned some of a not-failed txn's writes to that
// partition but not another of them whose known offset lies strictly
// between the lowest and highest offsets the read returned there.
func checkG1b(a *analysis, limit int) CheckerResult {
	f := newFinding(CheckG1b, limit)
	for _, r := range a.reads {
		recs := r.r.Records
		if len(recs) < 2 {
			continue
		}
		tp := r.r.TP()
		lo, hi := recs[0].Offset, recs[0].Offset
		got := make(map[string]bool, len(recs))
		for _, rec := range recs {
			lo, hi = min(lo, rec.Offset), max(hi, rec.Offset)
			got[rec.Value] = true
		}
		var done []*txn
		for _, rec := range recs {
			s := a.byValue[rec.Value]
			if s == nil || s.txn == nil || s.typ() == Fail || slices.Contains(done, s.txn) {
				continue
			}
			t := s.txn
			done = append(done, t)
			var missed []int64
			var missedVals []string
			for _, w := range t.sends {
				if w.v.TP() != tp || got[w.v.Value] {
					continue
				}
				if o := a.knownOffset(w); o != NoOffset && lo < o && o < hi {
					missed = append(missed, o)
					missedVals = append(missedVals, w.v.Value)
				}
			}
			if len(missed) == 0 {
				continue
			}
			f.flag(tp.String(), Anomaly{
				Topic: tp.Topic, Partition: tp.Partition, Offset: missed[0], Value: missedVals[0], Values: missedVals,
				Offsets: missed, Process: r.inv.Process, Ops: uniqueOps(txnOpIndex(t), r.comp.Index),
				Detail: fmt.Sprintf("op %d read offsets %d..%d of %s with %q of txn op %d but not its %s at offsets %v",
					r.comp.Index, lo, hi, tp, rec.Value, txnOpIndex(t), strings.Join(missedVals, ", "), missed),
			})
		}
	}
	return f.result()
}

// edgeKind is a dependency between two transactions.
type edgeKind uint8

const (
	edgeWW edgeKind = iota // write-write: the later txn's writes all follow
	edgeWR                 // write-read: the later txn read the earlier's write
)

func (k edgeKind) String() string {
	if k == edgeWR {
		return "wr"
	}
	return "ww"
}

type txnEdge struct {
	to   int
	kind edgeKind
	tp   TP
}

// span is a txn's known offsets in one partition: the lowest and highest.
type span struct{ lo, hi int64 }

// txnGraph is the dependency graph of a history's transactions. Its nodes
// are ok txns and info txns some read returned a write of.
type txnGraph struct {
	nodes  []*txn
	id     map[*txn]int
	spans  []map[TP]span
	out    [][]txnEdge
	edges  int
	capped bool
}

func buildTxnGraph(a *analysis, maxEdges int) *txnGraph {
	g := &txnGraph{id: map[*txn]int{}}
	for _, t := range a.txns {
		switch t.typ() {
		case OK:
		case Info:
			if !slices.ContainsFunc(t.sends, func(s *send) bool { return a.observed(s.v.Value) }) {
				continue
			}
		default:
			continue
		}
		g.id[t] = len(g.nodes)
		g.nodes = append(g.nodes, t)
		sp := map[TP]span{}
		for _, s := range t.sends {
			o := a.knownOffset(s)
			if o == NoOffset {
				continue
			}
			tp := s.v.TP()
			if x, ok := sp[tp]; ok {
				sp[tp] = span{min(x.lo, o), max(x.hi, o)}
			} else {
				sp[tp] = span{o, o}
			}
		}
		g.spans = append(g.spans, sp)
	}
	g.out = make([][]txnEdge, len(g.nodes))
	add := func(from, to int, kind edgeKind, tp TP) {
		if g.edges >= maxEdges {
			g.capped = true
			return
		}
		g.edges++
		g.out[from] = append(g.out[from], txnEdge{to, kind, tp})
	}
	// ww: per partition, each txn's immediate successors in the interval
	// order of spans (T1 before T2 when T1's highest offset is below T2's
	// lowest): the txns starting after T1 ends and no later than the
	// earliest end among them. The rest of the order follows by
	// transitivity.
	byTP, tps := g.membersByTP()
	for _, tp := range tps {
		ms := byTP[tp]
		slices.SortFunc(ms, func(x, y spanMember) int {
			if c := cmpInt64(x.s.lo, y.s.lo); c != 0 {
				return c
			}
			return x.n - y.n
		})
		sufMinHi := make([]int64, len(ms)+1)
		sufMinHi[len(ms)] = infinity
		for i := len(ms) - 1; i >= 0; i-- {
			sufMinHi[i] = min(sufMinHi[i+1], ms[i].s.hi)
		}
		for _, m := range ms {
			j := sort.Search(len(ms), func(j int) bool { return ms[j].s.lo > m.s.hi })
			for k := j; k < len(ms) && ms[k].s.lo <= sufMinHi[j]; k++ {
				add(m.n, ms[k].n, edgeWW, tp)
			}
		}
	}
	// wr: the writer of the highest offset each txn read in each
	// partition, when that writer is another node.
	for n, t := range g.nodes {
		if t.comp == nil {
			continue
		}
		top := map[TP]Record{}
		var order []TP
		for _, r := range t.comp.Reads {
			for _, rec := range r.Records {
				tp := r.TP()
				x, ok := top[tp]
				if !ok {
					order = append(order, tp)
				}
				if !ok || rec.Offset > x.Offset {
					top[tp] = rec
				}
			}
		}
		for _, tp := range order {
			s := a.byValue[top[tp].Value]
			if s == nil || s.txn == nil || s.txn == t {
				continue
			}
			if w, ok := g.id[s.txn]; ok {
				add(w, n, edgeWR, tp)
			}
		}
	}
	return g
}

// sccs returns the strongly connected components with more than one node
// of g restricted to the edges use accepts (Tarjan's algorithm, iterative
// so that long chains cannot exhaust the stack).
func (g *txnGraph) sccs(use func(txnEdge) bool) [][]int {
	n := len(g.nodes)
	index, low := make([]int, n), make([]int, n)
	for i := range index {
		index[i] = -1
	}
	onStack := make([]bool, n)
	var stack []int
	var out [][]int
	next := 0
	type frame struct{ v, ei int }
	visit := func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
	}
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		visit(root)
		call := []frame{{root, 0}}
		for len(call) > 0 {
			top := len(call) - 1
			v := call[top].v
			if ei := call[top].ei; ei < len(g.out[v]) {
				call[top].ei++
				e := g.out[v][ei]
				if !use(e) {
					continue
				}
				if w := e.to; index[w] < 0 {
					visit(w)
					call = append(call, frame{w, 0})
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			call = call[:top]
			if top > 0 {
				u := call[top-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				slices.Sort(comp)
				out = append(out, comp)
			}
		}
	}
	return out
}

// cycleStep is one edge of an example cycle.
type cycleStep struct {
	from int
	e    txnEdge
}

// cycleThrough returns a shortest cycle that starts with the edge first
// (from -> first.to) and returns to from over edges use accepts, within
// the component in (a breadth-first search), or nil.
func (g *txnGraph) cycleThrough(from int, first txnEdge, in map[int]bool, use func(txnEdge) bool) []cycleStep {
	prev := map[int]cycleStep{}
	visited := map[int]bool{first.to: true}
	queue := []int{first.to}
	found := first.to == from
	for len(queue) > 0 && !found {
		v := queue[0]
		queue = queue[1:]
		for _, e := range g.out[v] {
			if !use(e) || !in[e.to] || visited[e.to] {
				continue
			}
			visited[e.to] = true
			prev[e.to] = cycleStep{v, e}
			if e.to == from {
				found = true
				break
			}
			queue = append(queue, e.to)
		}
	}
	if !found {
		return nil
	}
	var steps []cycleStep
	for v := from; v != first.to; {
		st := prev[v]
		steps = append(steps, st)
		v = st.from
	}
	steps = append(steps, cycleStep{from, first})
	slices.Reverse(steps)
	return steps
}

func (g *txnGraph) cycleAnomaly(comp []int, steps []cycleStep) Anomaly {
	an := Anomaly{Offset: NoOffset, Process: -1}
	var b strings.Builder
	fmt.Fprintf(&b, "%d txns in one strongly connected component", len(comp))
	if steps == nil {
		for _, v := range comp[:min(len(comp), 8)] {
			an.Ops = append(an.Ops, txnOpIndex(g.nodes[v]))
		}
		an.Detail = b.String()
		return an
	}
	fmt.Fprintf(&b, "; a cycle of %d: ", len(steps))
	an.Topic, an.Partition = steps[0].e.tp.Topic, steps[0].e.tp.Partition
	fmt.Fprintf(&b, "op %d", txnOpIndex(g.nodes[steps[0].from]))
	for i, st := range steps {
		if len(steps) > maxCycleOps && i >= maxCycleOps/2 && i < len(steps)-maxCycleOps/2 {
			if i == maxCycleOps/2 {
				fmt.Fprintf(&b, " …%d more…", len(steps)-maxCycleOps)
			}
			continue
		}
		an.Ops = append(an.Ops, txnOpIndex(g.nodes[st.from]))
		fmt.Fprintf(&b, " -%s %s-> op %d", st.e.kind, st.e.tp, txnOpIndex(g.nodes[st.e.to]))
	}
	an.Detail = b.String()
	return an
}

// checkTxnCycles reports G0 (a cycle of ww edges) and G1c (a cycle of ww
// and wr edges with at least one wr edge), one anomaly per strongly
// connected component, each with a shortest cycle through one of its
// edges of the kind it needs as the example.
func checkTxnCycles(g *txnGraph, limit int) (CheckerResult, CheckerResult) {
	g0, g1c := newFinding(CheckG0, limit), newFinding(CheckG1c, limit)
	report := func(f *finding, use func(txnEdge) bool, need edgeKind) {
		for _, comp := range g.sccs(use) {
			in := make(map[int]bool, len(comp))
			for _, v := range comp {
				in[v] = true
			}
			from, first, ok := sccEdge(g, comp, in, need)
			if !ok {
				continue // only ww cycles: G0's, not G1c's
			}
			var steps []cycleStep
			if len(f.res.Examples) < f.limit {
				steps = g.cycleThrough(from, first, in, use)
			}
			f.flag("scc", g.cycleAnomaly(comp, steps))
		}
		if g.capped {
			f.undecided("edge-cap")
			f.res.Note = fmt.Sprintf("the dependency graph was cut at %d edges", maxTxnEdges)
		}
	}
	report(g0, func(e txnEdge) bool { return e.kind == edgeWW }, edgeWW)
	report(g1c, func(txnEdge) bool { return true }, edgeWR)
	return g0.result(), g1c.result()
}

// sccEdge returns an edge of the given kind inside the component.
func sccEdge(g *txnGraph, comp []int, in map[int]bool, kind edgeKind) (int, txnEdge, bool) {
	for _, v := range comp {
		for _, e := range g.out[v] {
			if e.kind == kind && in[e.to] {
				return v, e, true
			}
		}
	}
	return 0, txnEdge{}, false
}

// checkG1cRealtime flags a txn X whose known offsets in some partition p
// all lie below those of an ok txn Y although Y's records were all
// appended before X sent anything: Y called EndTxn (after its sends were
// acknowledged) no later than X's sends began. X's sends began after X
// was invoked, and after the EndTxn of every txn whose write X's polls
// returned (read_committed returns a txn's records only after its
// EndTxn; X's polls run before its sends). Such an X -ww-> Y is the
// cycle X -ww-> Y -wr/realtime-> X, which no correct Kafka makes; it
// covers every cycle of one ww edge and otherwise wr edges. One anomaly
// per Y and partition, with the X whose sends began latest as witness.
func checkG1cRealtime(a *analysis, g *txnGraph, limit int) CheckerResult {
	f := newFinding(CheckG1cRealtime, limit)
	// sendsFrom[n] is a lower bound on when node n's sends began, and
	// why[n] the txn whose EndTxn set it (-1: n's invocation did).
	sendsFrom := make([]int64, len(g.nodes))
	why := make([]int, len(g.nodes))
	for n, t := range g.nodes {
		sendsFrom[n], why[n] = t.inv.Time, -1
		if t.comp == nil {
			continue
		}
		for _, r := range t.comp.Reads {
			for _, rec := range r.Records {
				s := a.byValue[rec.Value]
				if s == nil || s.txn == nil || s.txn == t {
					continue
				}
				w, ok := g.id[s.txn]
				if end := s.txn.v.EndStart; ok && end > sendsFrom[n] {
					sendsFrom[n], why[n] = end, w
				}
			}
		}
	}
	byTP, tps := g.membersByTP()
	for _, tp := range tps {
		// Sweep the Ys by lowest offset; the Xs wholly below the current
		// Y are those with a highest offset below its lowest, and the one
		// whose sends began latest is the witness.
		ms := byTP[tp]
		byLo := slices.Clone(ms)
		slices.SortFunc(byLo, func(x, y spanMember) int { return cmpInt64(x.s.lo, y.s.lo) })
		byHi := ms
		slices.SortFunc(byHi, func(x, y spanMember) int { return cmpInt64(x.s.hi, y.s.hi) })
		i, x := 0, -1
		for _, my := range byLo {
			for ; i < len(byHi) && byHi[i].s.hi < my.s.lo; i++ {
				if x < 0 || sendsFrom[byHi[i].n] > sendsFrom[x] {
					x = byHi[i].n
				}
			}
			ty := g.nodes[my.n]
			end := ty.v.EndStart
			if x < 0 || ty.typ() != OK || end <= 0 || end > sendsFrom[x] {
				continue
			}
			tx := g.nodes[x]
			key, bound := "invoked-after", fmt.Sprintf("was invoked at %d", tx.inv.Time)
			if why[x] >= 0 {
				key = "read-after"
				bound = fmt.Sprintf("read a write of txn op %d, which called EndTxn at %d", txnOpIndex(g.nodes[why[x]]), sendsFrom[x])
			}
			f.flag(key, Anomaly{
				Topic: tp.Topic, Partition: tp.Partition, Offset: my.s.lo, Offsets: []int64{g.spans[x][tp].hi, my.s.lo},
				Process: tx.inv.Process, Ops: []int64{txnOpIndex(tx), txnOpIndex(ty)},
				Detail: fmt.Sprintf("txn op %d's writes to %s (up to offset %d) precede txn op %d's (from offset %d), though op %d called EndTxn at %d and op %d then %s",
					txnOpIndex(tx), tp, g.spans[x][tp].hi, txnOpIndex(ty), my.s.lo, txnOpIndex(ty), end, txnOpIndex(tx), bound),
			})
		}
	}
	return f.result()
}

// spanMember is one node's span in one partition.
type spanMember struct {
	n int
	s span
}

// membersByTP groups the nodes' spans by partition, with the partitions
// in order.
func (g *txnGraph) membersByTP() (map[TP][]spanMember, []TP) {
	byTP := map[TP][]spanMember{}
	for n, sp := range g.spans {
		for tp, s := range sp {
			byTP[tp] = append(byTP[tp], spanMember{n, s})
		}
	}
	tps := make([]TP, 0, len(byTP))
	for tp := range byTP {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	return byTP, tps
}
