package jepsen

// A stream is what one consumer received from one partition between two
// resets of its position: an assign (which seeks), a subscribe or a group
// rebalance (which leave the position unknown), or a final read (which
// starts at 0). Within a stream, Kafka promises records in offset order
// with nothing skipped.
type stream struct {
	proc  int
	tp    TP
	start int64 // the seek offset, or NoOffset when unknown
	recs  []streamRec
	// complete marks an ok final read: it read everything below hw.
	complete bool
	hw       int64
	// last is the latest op that added to the stream.
	last *Op
}

type streamRec struct {
	Record
	op *Op // the completion that returned the record
}

// streams walks each process's completions in order and cuts its reads
// into streams.
func (a *analysis) streams() []*stream {
	w := streamWalker{open: map[int]map[TP]*stream{}}
	for _, p := range a.pairs {
		if p.comp != nil {
			w.step(p)
		}
	}
	return w.out
}

type streamWalker struct {
	open map[int]map[TP]*stream
	out  []*stream
}

func (w *streamWalker) step(p pair) {
	proc := p.inv.Process
	switch p.inv.F {
	case FAssign:
		w.closeAll(proc)
		if p.comp.Type == OK {
			for _, s := range p.comp.Seeks {
				w.begin(proc, s.TP(), s.Offset)
			}
		}
	case FSubscribe, FCrash:
		w.closeAll(proc)
	case FPoll, FTxn:
		// A txn's polls run before its sends, on the process's consumer,
		// and continue its streams as a poll's do.
		w.poll(p.comp)
	case FFinalRead:
		w.final(p.comp)
	}
}

func (w *streamWalker) poll(op *Op) {
	proc := op.Process
	for _, tp := range op.Rebalanced {
		delete(w.open[proc], tp)
	}
	for i := range op.Reads {
		r := &op.Reads[i]
		if len(r.Records) == 0 {
			continue
		}
		s := w.open[proc][r.TP()]
		if s == nil {
			s = w.begin(proc, r.TP(), NoOffset)
		}
		for _, rec := range r.Records {
			s.recs = append(s.recs, streamRec{rec, op})
		}
		s.last = op
	}
}

func (w *streamWalker) final(op *Op) {
	r := &op.Reads[0]
	s := &stream{proc: op.Process, tp: r.TP(), start: 0, complete: op.Type == OK, hw: r.HighWatermark, last: op}
	for _, rec := range r.Records {
		s.recs = append(s.recs, streamRec{rec, op})
	}
	w.out = append(w.out, s)
}

func (w *streamWalker) begin(proc int, tp TP, start int64) *stream {
	s := &stream{proc: proc, tp: tp, start: start, hw: NoOffset}
	if w.open[proc] == nil {
		w.open[proc] = map[TP]*stream{}
	}
	w.open[proc][tp] = s
	w.out = append(w.out, s)
	return s
}

func (w *streamWalker) closeAll(proc int) { delete(w.open, proc) }

// covered returns the offsets a stream must have returned every value of:
// from its start (or first record, when the start is unknown) up to its
// highest record, or up to hw-1 for a complete final read. ok is false when
// the stream covers nothing.
func (s *stream) covered() (lo, hi int64, ok bool) {
	hi = NoOffset
	for _, r := range s.recs {
		hi = max(hi, r.Offset)
	}
	if s.complete {
		hi = max(hi, s.hw-1)
	}
	lo = s.start
	if lo == NoOffset && len(s.recs) > 0 {
		lo = s.recs[0].Offset
	}
	return lo, hi, lo != NoOffset && hi >= lo
}
