package partition

import (
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxCachedBatches is how many recent batches per producer are kept for
// deduplication, as in Kafka (max.in.flight.requests.per.connection <= 5).
const maxCachedBatches = 5

// ProducerBatch is one batch an idempotent producer appended.
type ProducerBatch struct {
	FirstSeq   int32 `json:"first_seq"`
	LastSeq    int32 `json:"last_seq"`
	BaseOffset int64 `json:"base_offset"`
	LastOffset int64 `json:"last_offset"`
	// MaxTimestamp is the batch's, so that a retry of a LogAppendTime batch
	// is answered with the time the first one got (0: unknown, in state
	// written before the field existed).
	MaxTimestamp int64 `json:"max_timestamp,omitempty"`
}

// ProducerState is what a partition remembers of one idempotent producer.
// It is replicated state: it changes only when an entry is applied, and it
// travels in snapshots, so deduplication survives failover.
type ProducerState struct {
	Epoch   int16           `json:"epoch"`
	Batches []ProducerBatch `json:"batches"` // oldest first, at most maxCachedBatches
	// MarkerSeq is the newest transaction number of the producer's
	// markers taken here (MarkerSeq of a marker; 0: none). A marker at or
	// below it is a copy of one already taken, delayed in the network
	// or resent, and is not appended again: it would end the producer's
	// next transaction.
	MarkerSeq int32 `json:"marker_seq,omitempty"`
}

// markerSeqFlag marks a marker's coordinator epoch as its transaction's
// number (coordinator/txns.MarkerEpoch), not a coordinator term.
const markerSeqFlag = 1 << 30

// MarkerSeq is the transaction number a marker's coordinator epoch
// carries, or 0 for a term (markers of earlier binaries, which are never
// deduplicated, so that their entries replay as they were applied).
func MarkerSeq(coordinatorEpoch int32) int32 {
	if coordinatorEpoch&markerSeqFlag == 0 || coordinatorEpoch < 0 {
		return 0
	}
	return coordinatorEpoch &^ markerSeqFlag
}

// batchMarkerSeq is the MarkerSeq of a control batch, 0 for any other
// batch or one whose marker does not decode (ValidateBatch refuses it).
func batchMarkerSeq(batch []byte, info BatchInfo) int32 {
	if !info.Control() {
		return 0
	}
	m, err := controlMarker(batch, info)
	if err != nil {
		return 0
	}
	return MarkerSeq(m.CoordinatorEpoch)
}

// takenMarker reports whether a marker of transaction number seq was
// already taken for the producer whose state is st.
func takenMarker(st *ProducerState, seq int32) bool {
	return seq > 0 && st != nil && st.MarkerSeq >= seq
}

// checkProducer decides what to do with an idempotent batch, following
// Kafka's ProducerStateManager. dup is non-nil for a retried batch already
// in the log; err is a Kafka error when the batch must be refused.
func checkProducer(st *ProducerState, info BatchInfo) (dup *ProducerBatch, err error) {
	if info.Control() {
		// A transaction marker carries no sequence and is never a
		// duplicate (the coordinator may write it again); only its epoch
		// is checked, as Kafka's appendEndTxnMarker does.
		if st != nil && info.ProducerEpoch < st.Epoch {
			return nil, kerr.InvalidProducerEpoch
		}
		return nil, nil
	}
	if st == nil {
		return nil, nil // unknown producer: any sequence starts it (Kafka 2.5+)
	}
	switch {
	case info.ProducerEpoch < st.Epoch:
		return nil, kerr.InvalidProducerEpoch
	case info.ProducerEpoch > st.Epoch:
		if info.BaseSequence != 0 {
			return nil, kerr.OutOfOrderSequenceNumber
		}
		return nil, nil
	}
	for i := range st.Batches {
		b := &st.Batches[i]
		if b.FirstSeq == info.BaseSequence && b.LastSeq == info.LastSequence() {
			return b, nil
		}
	}
	if n := len(st.Batches); n > 0 && !inSequence(st.Batches[n-1].LastSeq, info.BaseSequence) {
		return nil, kerr.OutOfOrderSequenceNumber
	}
	return nil, nil
}

func inSequence(last, next int32) bool {
	if last == math.MaxInt32 {
		return next == 0
	}
	return next == last+1
}

// recordProducer notes an appended batch. A transaction marker only
// moves the producer to its epoch (a newer one forgets the old epoch's
// batches); the sequence carries on across transactions.
func recordProducer(st *ProducerState, info BatchInfo, base, last int64, seq int32) *ProducerState {
	if info.Control() {
		if st == nil || info.ProducerEpoch > st.Epoch {
			prev := int32(0)
			if st != nil {
				prev = st.MarkerSeq
			}
			return &ProducerState{Epoch: info.ProducerEpoch, MarkerSeq: max(prev, seq)}
		}
		st.MarkerSeq = max(st.MarkerSeq, seq)
		return st
	}
	if st == nil || info.ProducerEpoch != st.Epoch {
		prev := int32(0)
		if st != nil {
			prev = st.MarkerSeq
		}
		st = &ProducerState{Epoch: info.ProducerEpoch, MarkerSeq: prev}
	}
	st.Batches = append(st.Batches, ProducerBatch{
		FirstSeq: info.BaseSequence, LastSeq: info.LastSequence(), BaseOffset: base, LastOffset: last,
		MaxTimestamp: info.MaxTimestamp,
	})
	if len(st.Batches) > maxCachedBatches {
		st.Batches = st.Batches[len(st.Batches)-maxCachedBatches:]
	}
	return st
}

// ProducerInfo is what a partition reports of one producer it remembers
// (DescribeProducers): its epoch, and the last sequence and max timestamp
// of its newest batch (-1 for both when it has only markers here).
type ProducerInfo struct {
	ProducerID    int64
	Epoch         int16
	LastSequence  int32
	LastTimestamp int64
}

// producerInfos summarises producer states, by producer id.
func producerInfos(m map[int64]*ProducerState) []ProducerInfo {
	out := make([]ProducerInfo, 0, len(m))
	for pid, st := range m {
		pi := ProducerInfo{ProducerID: pid, Epoch: st.Epoch, LastSequence: -1, LastTimestamp: -1}
		if n := len(st.Batches); n > 0 {
			pi.LastSequence, pi.LastTimestamp = st.Batches[n-1].LastSeq, st.Batches[n-1].MaxTimestamp
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
