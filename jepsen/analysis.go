package jepsen

import (
	"fmt"
	"slices"
)

// pair is an invocation and its completion; comp is nil when the history
// ended first, which counts as info.
type pair struct {
	inv  *Op
	comp *Op
}

func (p pair) typ() Type {
	if p.comp == nil {
		return Info
	}
	return p.comp.Type
}

// pairOps matches each completion with its process's open invocation.
func pairOps(h History) ([]pair, error) {
	var pairs []pair
	open := map[int]int{} // process -> index into pairs
	ended := map[int]bool{}
	for i := range h {
		op := &h[i]
		if op.Type == Invoke {
			if err := checkInvoke(op, open, ended); err != nil {
				return nil, err
			}
			open[op.Process] = len(pairs)
			pairs = append(pairs, pair{inv: op})
			continue
		}
		j, ok := open[op.Process]
		if !ok {
			return nil, fmt.Errorf("op %d: %s %s of process %d without an invocation: %w", op.Index, op.Type, op.F, op.Process, ErrMalformed)
		}
		if pairs[j].inv.F != op.F {
			return nil, fmt.Errorf("op %d: completes %s with %s: %w", op.Index, pairs[j].inv.F, op.F, ErrMalformed)
		}
		pairs[j].comp = op
		delete(open, op.Process)
		if op.Type == Info && op.Process != NemesisProcess {
			ended[op.Process] = true
		}
	}
	return pairs, nil
}

func checkInvoke(op *Op, open map[int]int, ended map[int]bool) error {
	if _, busy := open[op.Process]; busy {
		return fmt.Errorf("op %d: process %d invoked twice: %w", op.Index, op.Process, ErrMalformed)
	}
	if ended[op.Process] {
		return fmt.Errorf("op %d: process %d invoked after an info: %w", op.Index, op.Process, ErrMalformed)
	}
	return nil
}

// send is one send and what is known of its outcome. A transaction's
// sends are expanded into sends too: each shares the txn's pair (so its
// outcome, times and op indexes are the txn's) and points at its txn.
type send struct {
	pair
	v      *SendValue // the invocation's value (a txn's: its completion's)
	offset int64      // acknowledged offset, or NoOffset
	txn    *txn       // the transaction that sent it, or nil
}

// txn is one transaction op: its value (the completion's when it
// completed, else the invocation's) and its sends, expanded.
type txn struct {
	pair
	v     *TxnValue
	sends []*send
}

// read is what one completed poll or final read returned from one partition.
type read struct {
	pair
	r     *PartitionRead
	final bool
}

// position is a place in the log: a partition and an offset.
type position struct {
	tp     TP
	offset int64
	op     int64 // index of the op that put or saw the value there
}

// analysis indexes a history once for all checkers.
type analysis struct {
	h     History
	pairs []pair
	sends []*send
	// byValue maps each sent value to its send; values are unique.
	byValue map[string]*send
	reads   []read
	// logs holds, per partition and offset, every distinct value that an ok
	// send's acknowledgement or any read put there (Jepsen's version order
	// evidence).
	logs map[TP]map[int64][]string
	// known is logs' offsets per partition, sorted.
	known map[TP][]int64
	// seenAt maps a value to the positions reads returned it at.
	seenAt map[string][]position
	// firstSeen is the earliest completion time of a read returning a value.
	firstSeen map[string]int64
	// finals is the last completed (ok) final read of each partition.
	finals map[TP]read
	tps    []TP
	// txns holds every txn op in invocation order.
	txns []*txn
}

func analyze(h History) (*analysis, error) {
	pairs, err := pairOps(h)
	if err != nil {
		return nil, err
	}
	a := &analysis{
		h: h, pairs: pairs,
		byValue:   map[string]*send{},
		logs:      map[TP]map[int64][]string{},
		known:     map[TP][]int64{},
		seenAt:    map[string][]position{},
		firstSeen: map[string]int64{},
		finals:    map[TP]read{},
	}
	for _, p := range pairs {
		if err := a.add(p); err != nil {
			return nil, err
		}
	}
	a.index()
	return a, nil
}

func (a *analysis) add(p pair) error {
	switch p.inv.F {
	case FSend:
		return a.addSend(p)
	case FPoll, FFinalRead:
		a.addReads(p)
	case FTxn:
		if err := a.addTxn(p); err != nil {
			return err
		}
		a.addReads(p)
	}
	return nil
}

// addTxn expands a transaction into sends whose outcome is the txn's: a
// committed (ok) txn's sends are ok at their acknowledged offsets; an
// aborted (fail) txn's sends fail and their offsets are dropped, since the
// aborted records occupy offsets no read_committed reader may see; an
// unknown (info) txn's sends are info and their offsets are dropped too,
// since the txn may have aborted and no reader may be required to return
// them.
func (a *analysis) addTxn(p pair) error {
	v := p.inv.Txn
	if p.comp != nil && p.comp.Txn != nil {
		v = p.comp.Txn
	}
	if v == nil {
		return fmt.Errorf("op %d: txn without a value: %w", p.inv.Index, ErrMalformed)
	}
	t := &txn{pair: p, v: v}
	for i := range v.Sends {
		s := &send{pair: p, v: &v.Sends[i], offset: NoOffset, txn: t}
		if err := a.addSendValue(s); err != nil {
			return err
		}
		t.sends = append(t.sends, s)
	}
	a.txns = append(a.txns, t)
	return nil
}

func (a *analysis) addSend(p pair) error {
	s := &send{pair: p, v: p.inv.Send, offset: NoOffset}
	if p.typ() == OK {
		s.offset = p.comp.Send.Offset
	}
	return a.addSendValue(s)
}

// addSendValue indexes a send whose offset is set when it is ok.
func (a *analysis) addSendValue(s *send) error {
	if _, dup := a.byValue[s.v.Value]; dup {
		return fmt.Errorf("op %d: value %q sent twice; values must be unique: %w", s.inv.Index, s.v.Value, ErrMalformed)
	}
	if s.typ() == OK {
		if s.txn != nil {
			s.offset = s.v.Offset
		}
		a.note(s.v.TP(), s.offset, s.v.Value)
	}
	a.byValue[s.v.Value] = s
	a.sends = append(a.sends, s)
	return nil
}

func (a *analysis) addReads(p pair) {
	if p.comp == nil {
		return
	}
	for i := range p.comp.Reads {
		r := read{pair: p, r: &p.comp.Reads[i], final: p.inv.F == FFinalRead}
		a.reads = append(a.reads, r)
		for _, rec := range r.r.Records {
			a.note(r.r.TP(), rec.Offset, rec.Value)
			a.seenAt[rec.Value] = append(a.seenAt[rec.Value], position{r.r.TP(), rec.Offset, p.comp.Index})
			if t, ok := a.firstSeen[rec.Value]; !ok || p.comp.Time < t {
				a.firstSeen[rec.Value] = p.comp.Time
			}
		}
		if r.final && p.comp.Type == OK {
			a.finals[r.r.TP()] = r
		}
	}
}

// note records that value v sits at offset o of tp.
func (a *analysis) note(tp TP, o int64, v string) {
	log := a.logs[tp]
	if log == nil {
		log = map[int64][]string{}
		a.logs[tp] = log
	}
	if !slices.Contains(log[o], v) {
		log[o] = append(log[o], v)
	}
}

func (a *analysis) index() {
	for tp, log := range a.logs {
		offs := make([]int64, 0, len(log))
		for o := range log {
			offs = append(offs, o)
		}
		slices.Sort(offs)
		a.known[tp] = offs
	}
	seen := map[TP]bool{}
	addTP := func(tp TP) {
		if !seen[tp] {
			seen[tp] = true
			a.tps = append(a.tps, tp)
		}
	}
	for _, s := range a.sends {
		addTP(s.v.TP())
	}
	for _, r := range a.reads {
		addTP(r.r.TP())
	}
	slices.SortFunc(a.tps, compareTP)
}

func compareTP(x, y TP) int {
	if x.Topic != y.Topic {
		if x.Topic < y.Topic {
			return -1
		}
		return 1
	}
	return int(x.Partition) - int(y.Partition)
}

// knownBetween returns the offsets of tp known to hold a value in [lo, hi),
// none when the range is empty or backwards (a stream whose first record
// lies below its seek offset, after a log lost its tail and the client
// reset to it).
func (a *analysis) knownBetween(tp TP, lo, hi int64) []int64 {
	if hi <= lo {
		return nil
	}
	offs := a.known[tp]
	i, _ := slices.BinarySearch(offs, lo)
	j, _ := slices.BinarySearch(offs, hi)
	return offs[i:j]
}

// observed reports whether any read returned v.
func (a *analysis) observed(v string) bool { return len(a.seenAt[v]) > 0 }

// knownOffset is where a send's value is known to be: its acknowledged
// offset, else the lowest offset of its own partition a read returned it at.
func (a *analysis) knownOffset(s *send) int64 {
	if s.offset != NoOffset {
		return s.offset
	}
	best := NoOffset
	for _, pos := range a.seenAt[s.v.Value] {
		if pos.tp == s.v.TP() && (best == NoOffset || pos.offset < best) {
			best = pos.offset
		}
	}
	return best
}
