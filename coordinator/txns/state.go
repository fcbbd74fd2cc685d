package txns

import (
	"maps"
	"slices"
	"sort"
)

// TransactionTopic is the internal topic whose partitions hold the
// transaction coordinator's state; each partition is a raft group.
const TransactionTopic = "__transaction_state"

// State is a transaction's state, named as DescribeTransactions and
// ListTransactions report it (Kafka's TransactionState names).
type State string

// Transaction states. Dead is never stored: an expired id is removed in
// the same apply that would make it Dead (Kafka writes Dead and then a
// tombstone; one replicated step does both here). It exists so that a
// ListTransactions filter naming it is understood (it matches nothing).
const (
	StateEmpty          State = "Empty"
	StateOngoing        State = "Ongoing"
	StatePrepareCommit  State = "PrepareCommit"
	StatePrepareAbort   State = "PrepareAbort"
	StateCompleteCommit State = "CompleteCommit"
	StateCompleteAbort  State = "CompleteAbort"
	StateDead           State = "Dead"
)

// States lists every state, in Kafka's id order.
var States = []State{StateEmpty, StateOngoing, StatePrepareCommit, StatePrepareAbort,
	StateCompleteCommit, StateCompleteAbort, StateDead}

// valid reports whether a stored transaction may be in s.
func (s State) valid() bool {
	return s != StateDead && slices.Contains(States, s)
}

// preparing reports whether markers are being written (Prepare*).
func (s State) preparing() bool { return s == StatePrepareCommit || s == StatePrepareAbort }

// expirable reports whether an id in s may expire (Kafka's
// isExpirationAllowed): no transaction is open or being finished.
func (s State) expirable() bool {
	return s == StateEmpty || s == StateCompleteCommit || s == StateCompleteAbort
}

// noProducer is Kafka's NO_PRODUCER_ID and NO_PRODUCER_EPOCH.
const noProducer = -1

// maxEpoch is the largest producer epoch (Short.MaxValue). Clients never
// get it: an epoch of maxEpoch-1 or more is exhausted, so that the
// coordinator can always fence the last epoch it handed out.
const maxEpoch int16 = 1<<15 - 1

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted.
func epochExhausted(e int16) bool { return e >= maxEpoch-1 }

// Partitions is a set of partitions by topic: each topic's partitions
// sorted and unique, no topic without partitions, so that equal sets
// encode to equal bytes.
type Partitions map[string][]int32

// normalized returns p as a valid set (sorted, unique, no empty topics);
// ok is false when p names an empty topic or a negative partition.
func (p Partitions) normalized() (Partitions, bool) {
	out := Partitions{}
	for t, ps := range p {
		if t == "" {
			return nil, false
		}
		for _, i := range ps {
			if i < 0 {
				return nil, false
			}
		}
		if len(ps) > 0 {
			s := slices.Clone(ps)
			slices.Sort(s)
			out[t] = slices.Compact(s)
		}
	}
	return out, true
}

// Contains reports whether partition i of topic is in p.
func (p Partitions) Contains(topic string, i int32) bool {
	_, ok := slices.BinarySearch(p[topic], i)
	return ok
}

// containsAll reports whether every partition of q is in p.
func (p Partitions) containsAll(q Partitions) bool {
	for t, ps := range q {
		for _, i := range ps {
			if !p.Contains(t, i) {
				return false
			}
		}
	}
	return true
}

// union returns p with q's partitions added; p is not modified.
func (p Partitions) union(q Partitions) Partitions {
	out := p.clone()
	for t, ps := range q {
		s := append(slices.Clone(out[t]), ps...)
		slices.Sort(s)
		out[t] = slices.Compact(s)
	}
	return out
}

// minus returns p without q's partitions; p is not modified.
func (p Partitions) minus(q Partitions) Partitions {
	out := Partitions{}
	for t, ps := range p {
		kept := slices.DeleteFunc(slices.Clone(ps), func(i int32) bool { return q.Contains(t, i) })
		if len(kept) > 0 {
			out[t] = kept
		}
	}
	return out
}

func (p Partitions) clone() Partitions {
	out := make(Partitions, len(p))
	for t, ps := range p {
		out[t] = slices.Clone(ps)
	}
	return out
}

// Len is the number of partitions in p.
func (p Partitions) Len() int {
	n := 0
	for _, ps := range p {
		n += len(ps)
	}
	return n
}

// Topics returns p's topics, sorted.
func (p Partitions) Topics() []string {
	ts := slices.Collect(maps.Keys(p))
	sort.Strings(ts)
	return ts
}

// Txn is the replicated state of one transactional id: Kafka's
// TransactionMetadata. A *Txn reachable from a Machine is never modified;
// apply replaces it with a changed copy, and accessors hand out copies.
type Txn struct {
	ID string `json:"id"`
	// ProducerID and ProducerEpoch are the producer's current id and epoch
	// (epoch -1 until the first InitProducerId completes).
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	// LastProducerID and LastProducerEpoch are KIP-360's bookkeeping: the
	// id before the last InitProducerId (the old id after a rotation),
	// and the epoch a retried InitProducerId may still present (-1 when a
	// retry must be fenced), so that a retry after a lost response gets
	// the same answer instead of PRODUCER_FENCED.
	LastProducerID    int64 `json:"last_producer_id"`
	LastProducerEpoch int16 `json:"last_producer_epoch"`
	// TimeoutMs is the transaction.timeout.ms of the last InitProducerId.
	TimeoutMs int32 `json:"timeout_ms"`
	State     State `json:"state"`
	// Partitions and Groups are in the transaction (Ongoing), or still
	// waiting for their markers (Prepare*). Groups are those whose offsets
	// AddOffsetsToTxn added (Kafka adds the group's __consumer_offsets
	// partition instead; here the group coordinator is told by name).
	Partitions Partitions `json:"partitions,omitempty"`
	Groups     []string   `json:"groups,omitempty"`
	// StartMs is when the transaction began (its first AddPartitions or
	// AddOffsets), -1 when none has since the last InitProducerId;
	// LastUpdateMs is the last change. Both are the proposing leader's
	// clock, carried in the command.
	StartMs      int64 `json:"start_ms"`
	LastUpdateMs int64 `json:"last_update_ms"`
	// MarkerSeq numbers the transactions of this id that reached
	// PrepareCommit or PrepareAbort, from 1: the markers of the latest
	// carry it (MarkerEpoch), and a partition takes a producer's marker
	// only once per number, so that a copy delayed in the network never
	// ends the producer's next transaction. 0 in entries of earlier
	// binaries, which replay as before.
	MarkerSeq int32 `json:"marker_seq,omitempty"`
}

// Clone returns a deep copy of t.
func (t *Txn) Clone() *Txn {
	c := *t
	c.Partitions = t.Partitions.clone()
	c.Groups = slices.Clone(t.Groups)
	return &c
}

func (t *Txn) hasGroup(g string) bool {
	_, ok := slices.BinarySearch(t.Groups, g)
	return ok
}

// ProducerIDBlock is a range of producer ids [Start, Start+Count) that
// the metadata group (group 0's AllocateProducerIDs) reserved for this
// transaction partition.
type ProducerIDBlock struct {
	Start int64 `json:"start"`
	Count int64 `json:"count"`
}

// PendingTxn is a transaction whose markers are still to be written: a
// leader of the partition (a new one after a failover too) writes them
// to each partition and tells each group coordinator, then proposes
// MarkersWritten.
type PendingTxn struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	Partitions      Partitions
	Groups          []string
	// MarkerSeq is the transaction's Txn.MarkerSeq (0: none).
	MarkerSeq int32
}

// markerEpochFlag marks a marker's coordinator epoch as a MarkerSeq
// (MarkerEpoch), not the coordinator's raft term that earlier binaries
// sent: partitions deduplicate only markers that carry it.
const markerEpochFlag = 1 << 30

// nextMarkerSeq is the MarkerSeq after seq, saturating below the flag.
func nextMarkerSeq(seq int32) int32 { return min(seq+1, markerEpochFlag-1) }

// MarkerEpoch is the coordinator epoch the markers of p carry: its
// MarkerSeq with markerEpochFlag, or term for a transaction prepared by
// an earlier binary (no MarkerSeq).
func MarkerEpoch(p PendingTxn, term uint64) int32 {
	if p.MarkerSeq > 0 {
		return markerEpochFlag | p.MarkerSeq
	}
	return int32(min(term, markerEpochFlag-1))
}
