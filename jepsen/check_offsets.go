package jepsen

import (
	"fmt"
	"slices"
	"strings"
)

// valuesInOrder returns every value that was sent or read: sent values in
// send order, then values nobody sent, sorted.
func (a *analysis) valuesInOrder() []string {
	out := make([]string, 0, len(a.sends))
	for _, s := range a.sends {
		out = append(out, s.v.Value)
	}
	var phantoms []string
	for v := range a.seenAt {
		if a.byValue[v] == nil {
			phantoms = append(phantoms, v)
		}
	}
	slices.Sort(phantoms)
	return append(out, phantoms...)
}

// positionsOf returns the distinct places value v is known at: its send's
// acknowledgement and every read that returned it.
func (a *analysis) positionsOf(v string) []position {
	var out []position
	add := func(p position) {
		for _, q := range out {
			if q.tp == p.tp && q.offset == p.offset {
				return
			}
		}
		out = append(out, p)
	}
	if s := a.byValue[v]; s != nil && s.offset != NoOffset {
		add(position{s.v.TP(), s.offset, s.comp.Index})
	}
	for _, p := range a.seenAt[v] {
		add(p)
	}
	return out
}

// checkDuplicate flags values known at more than one offset.
func checkDuplicate(a *analysis, limit int) CheckerResult {
	f := newFinding(CheckDuplicate, limit)
	for _, v := range a.valuesInOrder() {
		pos := a.positionsOf(v)
		if len(pos) < 2 {
			continue
		}
		an := Anomaly{Topic: pos[0].tp.Topic, Partition: pos[0].tp.Partition, Offset: pos[0].offset, Value: v, Process: -1}
		var where []string
		for _, p := range pos {
			an.Offsets = append(an.Offsets, p.offset)
			an.Ops = append(an.Ops, p.op)
			where = append(where, fmt.Sprintf("%s@%d", p.tp, p.offset))
		}
		if s := a.byValue[v]; s != nil {
			an.Process = s.inv.Process
		}
		an.Detail = fmt.Sprintf("value %q appears at %d offsets: %s", v, len(pos), strings.Join(where, ", "))
		f.flag(pos[0].tp.String(), an)
	}
	return f.result()
}

// checkInconsistentOffsets flags offsets that sends and reads disagree on.
func checkInconsistentOffsets(a *analysis, limit int) CheckerResult {
	f := newFinding(CheckInconsistent, limit)
	for _, tp := range a.tps {
		for _, o := range a.known[tp] {
			vals := a.logs[tp][o]
			if len(vals) < 2 {
				continue
			}
			vals = slices.Clone(vals)
			slices.Sort(vals)
			f.flag(tp.String(), Anomaly{
				Topic: tp.Topic, Partition: tp.Partition, Offset: o, Values: vals, Process: -1,
				Ops:    a.opsAt(tp, o, vals),
				Detail: fmt.Sprintf("offset %d of %s holds %d values: %s", o, tp, len(vals), strings.Join(vals, ", ")),
			})
		}
	}
	return f.result()
}

// opsAt returns ops that put one of vals at offset o of tp.
func (a *analysis) opsAt(tp TP, o int64, vals []string) []int64 {
	var ops []int64
	for _, v := range vals {
		for _, p := range a.positionsOf(v) {
			if p.tp == tp && p.offset == o && !slices.Contains(ops, p.op) {
				ops = append(ops, p.op)
			}
		}
	}
	return ops
}
