package txns

import (
	"maps"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// state is the whole replicated state of one transaction partition. apply
// is a pure function of it and a command, so every replica reaches the
// same state; nothing here reads a clock or a config.
type state struct {
	// epoch is the coordinator epoch: the term of the last Barrier.
	epoch uint64
	txns  map[string]*Txn
	// free holds the granted producer ids not handed out yet, in order;
	// granted is the end of the highest block ever granted.
	free    []ProducerIDBlock
	granted int64
}

func newState() *state { return &state{txns: map[string]*Txn{}} }

func fail(e *kerr.Error) Result { return Result{Code: e.Code} }

func (s *state) apply(c *Command) Result {
	switch {
	case c.Barrier != nil:
		s.epoch = max(s.epoch, c.Barrier.Term)
		return Result{}
	case c.GrantProducerIDs != nil:
		return s.grant(c.GrantProducerIDs.ProducerIDBlock)
	case c.InitProducerID != nil:
		return s.initProducerID(c.InitProducerID)
	case c.AddPartitions != nil:
		return s.addPartitions(c.AddPartitions)
	case c.AddOffsets != nil:
		return s.addOffsets(c.AddOffsets)
	case c.EndTxn != nil:
		return s.endTxn(c.EndTxn)
	case c.MarkersWritten != nil:
		return s.markersWritten(c.MarkersWritten)
	case c.Tick != nil:
		return s.tick(c.Tick)
	}
	return fail(kerr.InvalidRequest)
}

// maxBlock bounds a grant, as the metadata group bounds AllocateProducerIDs.
const maxBlock = 1 << 20

func (s *state) grant(b ProducerIDBlock) Result {
	if b.Start < 0 || b.Count <= 0 || b.Count > maxBlock || b.Start < s.granted || b.Start > 1<<62 {
		return fail(kerr.InvalidRequest)
	}
	s.free = append(s.free, b)
	s.granted = b.Start + b.Count
	return Result{}
}

// nextID returns the producer id the next allocation gets.
func (s *state) nextID() (int64, bool) {
	if len(s.free) == 0 {
		return 0, false
	}
	return s.free[0].Start, true
}

// takeID consumes the id nextID returned.
func (s *state) takeID() {
	b := &s.free[0]
	b.Start++
	b.Count--
	if b.Count == 0 {
		s.free = slices.Delete(s.free, 0, 1)
	}
}

func (s *state) freeIDs() int64 {
	var n int64
	for _, b := range s.free {
		n += b.Count
	}
	return n
}

func initFail(e *kerr.Error) Result {
	return Result{Code: e.Code, ProducerID: noProducer, ProducerEpoch: noProducer}
}

func needIDs() Result {
	r := initFail(kerr.CoordinatorLoadInProgress)
	r.NeedProducerIDs = true
	return r
}

// initProducerID is Kafka's handleInitProducerId with
// prepareInitProducerIdTransit, in their order of checks.
func (s *state) initProducerID(c *InitProducerID) Result {
	switch {
	case c.TransactionalID == "":
		return initFail(kerr.InvalidRequest)
	case c.TimeoutMs <= 0 || c.TimeoutMs > c.MaxTimeoutMs:
		return initFail(kerr.InvalidTransactionTimeout)
	case c.ProducerID == noProducer && c.ProducerEpoch == noProducer:
	case c.ProducerID < 0 || c.ProducerEpoch < 0:
		return initFail(kerr.InvalidRequest) // one of the pair given
	}
	expected := c.ProducerID >= 0
	t, fresh := s.txns[c.TransactionalID], false
	if t == nil {
		id, ok := s.nextID()
		if !ok {
			return needIDs()
		}
		fresh = true
		t = &Txn{ID: c.TransactionalID, ProducerID: id, LastProducerID: noProducer, ProducerEpoch: noProducer,
			LastProducerEpoch: noProducer, TimeoutMs: c.TimeoutMs, State: StateEmpty, StartMs: -1, LastUpdateMs: c.NowMs}
	}
	if expected && !validExpected(t, c.ProducerID, c.ProducerEpoch) {
		return initFail(kerr.ProducerFenced)
	}
	switch {
	case t.State.preparing():
		return initFail(kerr.ConcurrentTransactions)
	case t.State == StateOngoing:
		// Fence the zombie: its transaction is aborted at a bumped epoch
		// that nobody is told; the client retries (CONCURRENT_TRANSACTIONS)
		// until the abort completes, and then gets an epoch of its own.
		s.txns[t.ID] = t.fenced(c.NowMs)
		return initFail(kerr.ConcurrentTransactions)
	}
	var nt *Txn
	if epochExhausted(t.ProducerEpoch) && (!expected || c.ProducerEpoch == t.ProducerEpoch) {
		id, ok := s.nextID()
		if !ok {
			return needIDs()
		}
		s.takeID()
		nt = t.reset(id, 0, noProducer, c)
		if expected {
			nt.LastProducerEpoch = t.ProducerEpoch
		}
	} else {
		epoch, last, ok := bumpEpoch(t, expected, c.ProducerEpoch)
		if !ok {
			return initFail(kerr.ProducerFenced)
		}
		nt = t.reset(t.ProducerID, epoch, last, c)
	}
	if fresh {
		s.takeID()
	}
	s.txns[nt.ID] = nt
	return Result{ProducerID: nt.ProducerID, ProducerEpoch: nt.ProducerEpoch}
}

// validExpected is KIP-360's check of the producer id an InitProducerId
// presents: the id was just created, or it is the current id (its epoch
// is checked by bumpEpoch), or it is the previous one whose epochs ran
// out (a retry of the InitProducerId that rotated it).
func validExpected(t *Txn, pid int64, epoch int16) bool {
	return t.ProducerEpoch == noProducer || pid == t.ProducerID ||
		pid == t.LastProducerID && epochExhausted(epoch)
}

// bumpEpoch is Kafka's prepareIncrementProducerEpoch: the next epoch and
// the last epoch a retry may present, or !ok to fence the caller.
func bumpEpoch(t *Txn, expected bool, epoch int16) (next, last int16, ok bool) {
	switch {
	case !expected:
		return t.ProducerEpoch + 1, noProducer, true
	case t.ProducerEpoch == noProducer || epoch == t.ProducerEpoch:
		return t.ProducerEpoch + 1, t.ProducerEpoch, true
	case epoch == t.LastProducerEpoch:
		return t.ProducerEpoch, t.LastProducerEpoch, true // a retry of a bump that succeeded
	}
	return 0, 0, false
}

// reset is t after a successful InitProducerId: Empty, no transaction.
func (t *Txn) reset(pid int64, epoch, last int16, c *InitProducerID) *Txn {
	return &Txn{ID: t.ID, ProducerID: pid, ProducerEpoch: epoch, LastProducerID: t.ProducerID, LastProducerEpoch: last, MarkerSeq: t.MarkerSeq,
		TimeoutMs: c.TimeoutMs, State: StateEmpty, StartMs: -1, LastUpdateMs: c.NowMs}
}

// fenced is an Ongoing t aborted by the coordinator (a new producer's
// InitProducerId, or the timeout): Kafka's prepareFenceProducerEpoch then
// PrepareAbort. The epoch is bumped so that the old producer is fenced
// from the partitions by the abort markers themselves; the last epoch is
// forgotten, so that the old producer cannot recover it either.
func (t *Txn) fenced(nowMs int64) *Txn {
	nt := t.Clone()
	if nt.ProducerEpoch < maxEpoch { // exhausted epochs are never handed out, so there is room
		nt.ProducerEpoch++
	}
	nt.LastProducerEpoch = noProducer
	nt.State, nt.LastUpdateMs, nt.MarkerSeq = StatePrepareAbort, nowMs, nextMarkerSeq(t.MarkerSeq)
	return nt
}

// check is the producer check shared by AddPartitions, AddOffsets and
// verification: the transaction of id, or the Kafka error.
func (s *state) check(id string, pid int64, epoch int16) (*Txn, *kerr.Error) {
	t := s.txns[id]
	switch {
	case id == "":
		return nil, kerr.InvalidRequest
	case t == nil || t.ProducerID != pid:
		return nil, kerr.InvalidProducerIDMapping
	case t.ProducerEpoch != epoch:
		return nil, kerr.ProducerFenced
	case t.State.preparing():
		return nil, kerr.ConcurrentTransactions
	}
	return t, nil
}

func (s *state) addPartitions(c *AddPartitions) Result {
	res := Result{Txns: make([]TxnResult, 0, len(c.Txns))}
	for _, a := range c.Txns {
		res.Txns = append(res.Txns, s.addTxn(a, c.NowMs))
	}
	return res
}

func (s *state) addTxn(a AddTxn, nowMs int64) TxnResult {
	if a.VerifyOnly {
		return s.verify(a)
	}
	t, kerrs := s.check(a.TransactionalID, a.ProducerID, a.ProducerEpoch)
	parts, ok := a.Partitions.normalized()
	if kerrs == nil && !ok {
		kerrs = kerr.InvalidRequest
	}
	if kerrs != nil {
		return uniform(a, kerrs.Code)
	}
	if t.State != StateOngoing || !t.Partitions.containsAll(parts) {
		nt := t.begin(nowMs)
		nt.Partitions = nt.Partitions.union(parts)
		s.txns[nt.ID] = nt
	}
	return uniform(a, 0)
}

// begin is t with a transaction open as of nowMs (Ongoing; started now
// unless it already was).
func (t *Txn) begin(nowMs int64) *Txn {
	nt := t.Clone()
	if t.State != StateOngoing {
		nt.StartMs = nowMs
	}
	nt.State, nt.LastUpdateMs = StateOngoing, nowMs
	return nt
}

// verify is KIP-890's verify-only AddPartitionsToTxn (Kafka's
// handleVerifyPartitionsInTransaction): it answers, partition by
// partition, whether each is in the transaction, and changes nothing.
func (s *state) verify(a AddTxn) TxnResult {
	t, kerrs := s.check(a.TransactionalID, a.ProducerID, a.ProducerEpoch)
	if _, ok := a.Partitions.normalized(); kerrs == nil && !ok {
		kerrs = kerr.InvalidRequest
	}
	if kerrs != nil {
		return uniform(a, kerrs.Code)
	}
	res := TxnResult{TransactionalID: a.TransactionalID, Partitions: map[string]map[int32]int16{}}
	for topic, ps := range a.Partitions {
		codes := map[int32]int16{}
		for _, p := range ps {
			codes[p] = 0
			if !t.Partitions.Contains(topic, p) {
				codes[p] = kerr.TransactionAbortable.Code
			}
		}
		res.Partitions[topic] = codes
	}
	return res
}

// uniform answers every partition of a with code.
func uniform(a AddTxn, code int16) TxnResult {
	res := TxnResult{TransactionalID: a.TransactionalID, Code: code, Partitions: map[string]map[int32]int16{}}
	for topic, ps := range a.Partitions {
		codes := map[int32]int16{}
		for _, p := range ps {
			codes[p] = code
		}
		res.Partitions[topic] = codes
	}
	return res
}

func (s *state) addOffsets(c *AddOffsets) Result {
	t, kerrs := s.check(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if kerrs == nil && c.Group == "" {
		kerrs = kerr.InvalidRequest
	}
	if kerrs != nil {
		return fail(kerrs)
	}
	if t.State != StateOngoing || !t.hasGroup(c.Group) {
		nt := t.begin(c.NowMs)
		if !nt.hasGroup(c.Group) {
			nt.Groups = append(nt.Groups, c.Group)
			sort.Strings(nt.Groups)
		}
		s.txns[nt.ID] = nt
	}
	return Result{}
}

// endTxn is Kafka's endTransaction from a client, before the markers:
// Ongoing moves to PrepareCommit or PrepareAbort; a retry of an EndTxn
// that completed (or is completing) is answered as Kafka does.
func (s *state) endTxn(c *EndTxn) Result {
	t := s.txns[c.TransactionalID]
	switch {
	case c.TransactionalID == "":
		return fail(kerr.InvalidRequest)
	case t == nil || t.ProducerID != c.ProducerID:
		return fail(kerr.InvalidProducerIDMapping)
	case t.ProducerEpoch != c.ProducerEpoch:
		return fail(kerr.ProducerFenced)
	}
	switch t.State {
	case StateOngoing:
		nt := t.Clone()
		nt.State, nt.LastUpdateMs, nt.MarkerSeq = StatePrepareAbort, c.NowMs, nextMarkerSeq(t.MarkerSeq)
		if c.Commit {
			nt.State = StatePrepareCommit
		}
		s.txns[nt.ID] = nt
		return Result{}
	case StateCompleteCommit, StateCompleteAbort:
		if c.Commit == (t.State == StateCompleteCommit) {
			return Result{} // the retry of an EndTxn that completed
		}
	case StatePrepareCommit, StatePrepareAbort:
		if c.Commit == (t.State == StatePrepareCommit) {
			return fail(kerr.ConcurrentTransactions) // the markers are still being written
		}
	}
	return fail(kerr.InvalidTxnState)
}

func (s *state) markersWritten(c *MarkersWritten) Result {
	t := s.txns[c.TransactionalID]
	parts, ok := c.Partitions.normalized()
	switch {
	case t == nil || t.ProducerID != c.ProducerID:
		return fail(kerr.InvalidProducerIDMapping)
	case t.ProducerEpoch != c.ProducerEpoch:
		return fail(kerr.ProducerFenced)
	case !t.State.preparing() || c.Commit != (t.State == StatePrepareCommit):
		return fail(kerr.InvalidTxnState)
	case !ok:
		return fail(kerr.InvalidRequest)
	}
	nt := t.Clone()
	nt.Partitions = nt.Partitions.minus(parts)
	nt.Groups = slices.DeleteFunc(nt.Groups, func(g string) bool { return slices.Contains(c.Groups, g) })
	if nt.Partitions.Len() == 0 && len(nt.Groups) == 0 {
		nt.State, nt.LastUpdateMs = StateCompleteAbort, c.NowMs
		if c.Commit {
			nt.State = StateCompleteCommit
		}
		nt.Partitions, nt.Groups = nil, nil
	}
	s.txns[nt.ID] = nt
	return Result{}
}

// tick aborts timed-out transactions and expires idle ids, as Kafka's
// abortTimedOutTransactions and removeExpiredTransactionalIds do.
func (s *state) tick(c *Tick) Result {
	var res Result
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		t := s.txns[id]
		switch {
		case timedOut(t, c.NowMs):
			s.txns[id] = t.fenced(c.NowMs)
			res.Aborted = append(res.Aborted, id)
		case expired(t, c.NowMs, c.ExpirationMs):
			delete(s.txns, id)
			res.Expired = append(res.Expired, id)
		}
	}
	return res
}

// timedOut reports whether t is Ongoing past its timeout at nowMs.
func timedOut(t *Txn, nowMs int64) bool {
	return t.State == StateOngoing && t.StartMs+int64(t.TimeoutMs) < nowMs
}

// expired reports whether t, with no transaction open, has been idle for
// expirationMs at nowMs (0 disables expiry).
func expired(t *Txn, nowMs, expirationMs int64) bool {
	return expirationMs > 0 && t.State.expirable() && t.LastUpdateMs <= nowMs-expirationMs
}
