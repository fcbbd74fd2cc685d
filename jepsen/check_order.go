package jepsen

import "fmt"

// checkNonmonotonicSend flags a process whose successive sends to one
// partition land at offsets that do not increase.
func checkNonmonotonicSend(a *analysis, limit int) CheckerResult {
	f := newFinding(CheckNonmonotonicSend, limit)
	type last struct {
		s      *send
		offset int64
	}
	prev := map[int]map[TP]last{}
	for _, s := range a.sends {
		if t := s.typ(); t != OK && t != Info {
			continue
		}
		o := a.knownOffset(s)
		if o == NoOffset {
			continue
		}
		proc, tp := s.inv.Process, s.v.TP()
		if prev[proc] == nil {
			prev[proc] = map[TP]last{}
		}
		if p, ok := prev[proc][tp]; ok && o <= p.offset {
			f.flag(tp.String(), Anomaly{
				Topic: tp.Topic, Partition: tp.Partition, Offset: o, Values: []string{p.s.v.Value, s.v.Value},
				Offsets: []int64{p.offset, o}, Process: proc, Ops: []int64{p.s.inv.Index, s.inv.Index},
				Detail: fmt.Sprintf("process %d sent %q to %s at offset %d, then %q at offset %d",
					proc, p.s.v.Value, tp, p.offset, s.v.Value, o),
			})
		}
		prev[proc][tp] = last{s, o}
	}
	return f.result()
}

// checkNonmonotonicPoll flags a stream (one consumer's reads of one
// partition since its last seek) whose records do not increase in offset.
func checkNonmonotonicPoll(streams []*stream, limit int) CheckerResult {
	f := newFinding(CheckNonmonotonicPoll, limit)
	for _, s := range streams {
		for i := 1; i < len(s.recs); i++ {
			p, c := s.recs[i-1], s.recs[i]
			if c.Offset > p.Offset {
				continue
			}
			f.flag(s.tp.String(), Anomaly{
				Topic: s.tp.Topic, Partition: s.tp.Partition, Offset: c.Offset,
				Values: []string{p.Value, c.Value}, Offsets: []int64{p.Offset, c.Offset},
				Process: s.proc, Ops: []int64{p.op.Index, c.op.Index},
				Detail: fmt.Sprintf("process %d read offset %d (%q) of %s, then offset %d (%q) without a seek",
					s.proc, p.Offset, p.Value, s.tp, c.Offset, c.Value),
			})
		}
	}
	return f.result()
}

// checkPollSkip flags a stream that jumps over offsets known to hold a
// value: between two successive records, or from its seek offset to its
// first record.
func checkPollSkip(a *analysis, streams []*stream, limit int) CheckerResult {
	f := newFinding(CheckPollSkip, limit)
	for _, s := range streams {
		if s.start != NoOffset && len(s.recs) > 0 {
			skipped := a.knownBetween(s.tp, s.start, s.recs[0].Offset)
			if len(skipped) > 0 {
				f.flag(s.tp.String(), skipAnomaly(s, skipped, fmt.Sprintf("its seek to %d", s.start), s.recs[0], s.recs[0].op))
			}
		}
		for i := 1; i < len(s.recs); i++ {
			p, c := s.recs[i-1], s.recs[i]
			if c.Offset <= p.Offset+1 {
				continue
			}
			if skipped := a.knownBetween(s.tp, p.Offset+1, c.Offset); len(skipped) > 0 {
				f.flag(s.tp.String(), skipAnomaly(s, skipped, fmt.Sprintf("offset %d", p.Offset), c, p.op))
			}
		}
	}
	return f.result()
}

func skipAnomaly(s *stream, skipped []int64, from string, to streamRec, prevOp *Op) Anomaly {
	return Anomaly{
		Topic: s.tp.Topic, Partition: s.tp.Partition, Offset: to.Offset, Value: to.Value,
		Offsets: append([]int64(nil), skipped...), Process: s.proc,
		Ops: uniqueOps(prevOp.Index, to.op.Index),
		Detail: fmt.Sprintf("process %d went from %s to offset %d of %s, skipping %d offsets that hold values (first %d)",
			s.proc, from, to.Offset, s.tp, len(skipped), skipped[0]),
	}
}

func uniqueOps(x, y int64) []int64 {
	if x == y {
		return []int64{x}
	}
	return []int64{x, y}
}

// checkG1a flags reads of values whose send definitely failed, and reads
// of values no send wrote to that partition (phantoms). Each value counts
// once per kind.
func checkG1a(a *analysis, limit int) CheckerResult {
	f := newFinding(CheckG1a, limit)
	for _, v := range a.valuesInOrder() {
		sightings := a.seenAt[v]
		if len(sightings) == 0 {
			continue
		}
		s := a.byValue[v]
		if s == nil {
			f.flag("phantom", g1aAnomaly(sightings[0], v, -1, "no send wrote it"))
			continue
		}
		for _, p := range sightings {
			if p.tp != s.v.TP() {
				f.flag("phantom", g1aAnomaly(p, v, s.inv.Process, "it was sent to "+s.v.TP().String()))
				break
			}
		}
		if s.typ() == Fail {
			an := g1aAnomaly(sightings[0], v, s.inv.Process, "its send failed: "+s.comp.Error)
			an.Ops = []int64{s.comp.Index, sightings[0].op}
			f.flag("G1a", an)
		}
	}
	return f.result()
}

func g1aAnomaly(p position, v string, proc int, why string) Anomaly {
	return Anomaly{
		Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: p.offset, Value: v, Process: proc, Ops: []int64{p.op},
		Detail: fmt.Sprintf("read %q at offset %d of %s; %s", v, p.offset, p.tp, why),
	}
}
