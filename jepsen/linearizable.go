package jepsen

import (
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model of one partition: an append-only log whose offsets
// are dense from 0. A send appends its value at the end; an acknowledged
// send must land exactly at its acknowledged offset. A read claims that
// each offset it returned holds the value it returned and that the log is
// at least as long as its high watermark; a complete final read also claims
// the log is exactly its high watermark long. Poll claims only grow truer
// as the log grows, so a poll served from a fetch that kgo buffered before
// the poll was invoked cannot make a correct history look illegal.

type linSendIn struct{ value string }

type linSendOut struct {
	offset int64 // NoOffset: indefinite, the send may land anywhere or nowhere
}

type linReadIn struct{ final bool }

type linReadOut struct {
	recs   []Record // sorted by offset
	minLen int64
	exact  int64 // NoOffset unless a complete final read
}

// logState is a persistent log: each append is a new node sharing its
// prefix, so porcupine can keep many states cheaply. nil is the empty log.
// Jump pointers (Myers' applicative random-access stack) reach any offset
// in O(log n) steps, so a poll of old offsets does not walk the whole log.
type logState struct {
	prev   *logState
	jump   *logState
	n      int64 // length, so this node's value sits at offset n-1
	value  string
	h1, h2 uint64
}

// upTo returns the prefix of s that is n long (nil for 0), or nil if s is
// shorter.
func (s *logState) upTo(n int64) *logState {
	if s.length() < n {
		return nil
	}
	for s != nil && s.n > n {
		if s.jump != nil && s.jump.n >= n {
			s = s.jump
		} else {
			s = s.prev
		}
	}
	return s
}

func (s *logState) length() int64 {
	if s == nil {
		return 0
	}
	return s.n
}

func (s *logState) push(v string) *logState {
	h := fnv.New64a()
	h.Write([]byte(v))
	x := h.Sum64()
	n := &logState{prev: s, jump: s, n: s.length() + 1, value: v, h1: x, h2: x ^ 0x9e3779b97f4a7c15}
	if s != nil && s.jump != nil && s.jump.jump != nil && s.n-s.jump.n == s.jump.n-s.jump.jump.n {
		n.jump = s.jump.jump
	}
	if s != nil {
		n.h1 = s.h1*1099511628211 ^ x
		n.h2 = (s.h2<<7 | s.h2>>57) + x*0xff51afd7ed558ccd
	}
	return n
}

func logsEqual(a, b *logState) bool {
	for a != b {
		if a == nil || b == nil || a.n != b.n || a.h1 != b.h1 || a.h2 != b.h2 || a.value != b.value {
			return false
		}
		a, b = a.prev, b.prev
	}
	return true
}

func (r linReadOut) holds(s *logState) bool {
	n := s.length()
	if n < r.minLen || (r.exact != NoOffset && n != r.exact) {
		return false
	}
	i := len(r.recs) - 1
	if i < 0 {
		return true
	}
	for node := s.upTo(r.recs[i].Offset + 1); node != nil && i >= 0; node = node.prev {
		for i >= 0 && r.recs[i].Offset == node.n-1 {
			if r.recs[i].Value != node.value {
				return false
			}
			i--
		}
	}
	return i < 0
}

func linStep(state, input, output any) (bool, any) {
	s := state.(*logState)
	switch in := input.(type) {
	case linSendIn:
		out := output.(linSendOut)
		if out.offset != NoOffset && out.offset != s.length() {
			return false, s
		}
		return true, s.push(in.value)
	case linReadIn:
		return output.(linReadOut).holds(s), s
	}
	panic(fmt.Sprintf("jepsen: unknown porcupine input %T", input))
}

func linModel() porcupine.Model {
	return porcupine.Model{
		Init:  func() any { return (*logState)(nil) },
		Step:  linStep,
		Equal: func(a, b any) bool { return logsEqual(a.(*logState), b.(*logState)) },
		Hash: func(s any) uint64 {
			if st := s.(*logState); st != nil {
				return st.h1
			}
			return 0
		},
		DescribeOperation:         describeLinOp,
		DescribeState:             describeLogState,
		DescribeOperationMetadata: func(m any) string { return fmt.Sprintf("history op %v", m) },
	}
}

func describeLinOp(input, output any) string {
	switch in := input.(type) {
	case linSendIn:
		if o := output.(linSendOut).offset; o != NoOffset {
			return fmt.Sprintf("send %s -> %d", in.value, o)
		}
		return fmt.Sprintf("send %s -> ?", in.value)
	case linReadIn:
		out := output.(linReadOut)
		name := "poll"
		if in.final {
			name = "final read"
		}
		s := fmt.Sprintf("%s -> %s, len>=%d", name, describeRecords(out.recs), out.minLen)
		if out.exact != NoOffset {
			s += fmt.Sprintf(", len=%d", out.exact)
		}
		return s
	}
	return fmt.Sprint(input)
}

func describeRecords(recs []Record) string {
	const edge = 3
	var parts []string
	for i, r := range recs {
		if len(recs) > 2*edge && i == edge {
			parts = append(parts, fmt.Sprintf("…%d more…", len(recs)-2*edge))
		}
		if len(recs) > 2*edge && i >= edge && i < len(recs)-edge {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeLogState(state any) string {
	s := state.(*logState)
	var tail []string
	for node := s; node != nil && len(tail) < 3; node = node.prev {
		tail = append(tail, fmt.Sprintf("%d:%s", node.n-1, node.value))
	}
	slices.Reverse(tail)
	return fmt.Sprintf("len %d, tail [%s]", s.length(), strings.Join(tail, " "))
}

// linResult is porcupine's finding for one partition.
type linResult struct {
	tp      TP
	verdict Verdict
	ops     int
	info    porcupine.LinearizationInfo
	hasInfo bool
}

// linOps builds each partition's porcupine history.
func (a *analysis) linOps() map[TP][]porcupine.Operation {
	out := map[TP][]porcupine.Operation{}
	clients := map[TP]map[int]int{}
	client := func(tp TP, proc int) int {
		if clients[tp] == nil {
			clients[tp] = map[int]int{}
		}
		id, ok := clients[tp][proc]
		if !ok {
			id = len(clients[tp])
			clients[tp][proc] = id
		}
		return id
	}
	dense := map[TP]bool{}
	for tp, r := range a.finals {
		dense[tp] = readsEveryOffset(r)
	}
	for _, s := range a.sends {
		if s.typ() == Fail {
			continue
		}
		tp := s.v.TP()
		// An indefinite send no read returned, on a partition whose
		// complete final read returned every offset below its high
		// watermark, did not land below it: it can only take effect after
		// the final read, where it changes no read. Left open, porcupine
		// would try it at every point of the history.
		if s.typ() == Info && !a.observed(s.v.Value) && dense[tp] {
			continue
		}
		ret := int64(infinity) // an indefinite send may take effect at any later time
		if s.typ() == OK {
			ret = s.comp.Time
		}
		// An indefinite send whose value a read returned can only have
		// landed where it was read (values are unique, and a value read
		// at two offsets has no linearization anyway), so pin it there:
		// porcupine then tries it at one point of the log, not at all.
		out[tp] = append(out[tp], porcupine.Operation{
			ClientId: client(tp, s.inv.Process), Input: linSendIn{s.v.Value}, Output: linSendOut{a.knownOffset(s)},
			Call: s.inv.Time, Return: ret, Metadata: s.inv.Index,
		})
	}
	for _, r := range a.reads {
		if len(r.r.Records) == 0 && r.r.HighWatermark <= 0 && !r.final {
			continue
		}
		tp := r.r.TP()
		out[tp] = append(out[tp], porcupine.Operation{
			ClientId: client(tp, r.inv.Process), Input: linReadIn{r.final}, Output: readClaim(r),
			Call: r.inv.Time, Return: r.comp.Time, Metadata: r.comp.Index,
		})
	}
	return out
}

// readsEveryOffset reports whether r returned a record at every offset
// from 0 to its high watermark.
func readsEveryOffset(r read) bool {
	hw := r.r.HighWatermark
	if hw < 0 || int64(len(r.r.Records)) < hw {
		return false
	}
	have := make([]bool, hw)
	for _, rec := range r.r.Records {
		if rec.Offset >= 0 && rec.Offset < hw {
			have[rec.Offset] = true
		}
	}
	return !slices.Contains(have, false)
}

func readClaim(r read) linReadOut {
	out := linReadOut{recs: slices.Clone(r.r.Records), minLen: max(r.r.HighWatermark, 0), exact: NoOffset}
	slices.SortStableFunc(out.recs, func(x, y Record) int { return cmpInt64(x.Offset, y.Offset) })
	out.recs = slices.Compact(out.recs)
	if n := len(out.recs); n > 0 {
		out.minLen = max(out.minLen, out.recs[n-1].Offset+1)
	}
	if r.final && r.comp.Type == OK {
		out.exact = r.r.HighWatermark
	}
	return out
}

// checkLinearizable runs porcupine on each partition, a few at a time,
// each bounded by timeout.
func checkLinearizable(a *analysis, timeout time.Duration) []*linResult {
	ops := a.linOps()
	tps := make([]TP, 0, len(ops))
	for tp := range ops {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	results := make([]*linResult, len(tps))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, tp := range tps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = checkPartition(tp, ops[tp], timeout)
		}()
	}
	wg.Wait()
	return results
}

func checkPartition(tp TP, ops []porcupine.Operation, timeout time.Duration) *linResult {
	m := linModel()
	res := &linResult{tp: tp, ops: len(ops)}
	switch porcupine.CheckOperationsTimeout(m, ops, timeout) {
	case porcupine.Ok:
		res.verdict = VerdictOK
	case porcupine.Unknown:
		res.verdict = VerdictUnknown
	default:
		res.verdict = VerdictFail
		_, res.info = porcupine.CheckOperationsVerbose(m, ops, timeout)
		res.hasInfo = true
	}
	return res
}

func linFinding(results []*linResult, skipped bool, limit int) (CheckerResult, []PartitionLinearizability) {
	f := newFinding(CheckLinearizable, limit)
	if skipped {
		f.undecided("skipped")
		f.res.Note = "linearizability checking was turned off"
		return f.result(), nil
	}
	var parts []PartitionLinearizability
	for _, r := range results {
		parts = append(parts, PartitionLinearizability{Topic: r.tp.Topic, Partition: r.tp.Partition, Verdict: r.verdict, Ops: r.ops})
		switch r.verdict {
		case VerdictFail:
			f.flag(r.tp.String(), Anomaly{
				Topic: r.tp.Topic, Partition: r.tp.Partition, Offset: NoOffset, Process: -1,
				Detail: fmt.Sprintf("the %d sends and reads of %s have no linearization as an append-only log", r.ops, r.tp),
			})
		case VerdictUnknown:
			f.undecided(r.tp.String() + " timeout")
		}
	}
	return f.result(), parts
}

// infinity is the return time porcupine gets for an op that never
// returned: it stays open for the rest of the history.
const infinity = math.MaxInt64

// porcupineVisualize writes porcupine's HTML visualization of r.
func porcupineVisualize(r *linResult, path string) error {
	if err := porcupine.VisualizePath(linModel(), r.info, path); err != nil {
		return fmt.Errorf("visualize %s: %w", r.tp, err)
	}
	return nil
}
