package broker

import "sync/atomic"

// In raft mode offsets are assigned when a batch is applied, after
// commit. An acks=1 answer comes earlier, once the leader's WAL holds the
// batch, so the leader projects the offset: it knows its log's end once
// everything before is applied, and every later entry of its term is its
// own proposal, made in order under the produce lock. The projection is
// dropped (and acks=1 waits for apply, which is exact) whenever it could
// be wrong: a new term, a failed proposal, or an idempotent batch, whose
// duplicate check at apply may not append.
type projection struct {
	valid    bool
	term     uint64
	next     int64        // projected end offset after the reserved batches
	inflight atomic.Int64 // proposals made and not finished
}

// project reserves records offsets for the batch about to be proposed in
// term and reports whether base is exact. allApplied says the leader has
// applied its whole log, so that end() is the log end the next entry
// starts at.
func (pj *projection) project(term uint64, allApplied bool, end func() int64, records int64, idempotent bool) (base int64, ok bool) {
	if pj.term != term {
		pj.valid = false
	}
	if !pj.valid && pj.inflight.Load() == 0 && allApplied {
		pj.valid, pj.term, pj.next = true, term, end()
	}
	if !pj.valid {
		return -1, false
	}
	base = pj.next
	pj.next += records
	if idempotent {
		pj.valid = false
		return base, false
	}
	return base, true
}

// invalidate drops the projection.
func (pj *projection) invalidate() { pj.valid = false }
