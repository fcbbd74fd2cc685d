package sim

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/partition"
)

// txnPID is the producer id of every partition's transactional producer.
const txnPID = 3

// txnProducer is the transaction state of a partition's transactional
// producer. It writes transactions of one to three batches and ends each
// with a commit (70%) or abort marker that it sends itself, as the
// transaction coordinator's WriteTxnMarkers does (the coordinator is not
// simulated: its state machine runs in coordinator/txns' own tests and
// jepsen's --txn runs), resending the marker until it is acknowledged.
// Once the next transaction is open it may send the previous marker
// again, as a delayed copy of a coordinator's retry arrives: the
// partition must answer that copy as a duplicate, not end the open
// transaction with it.
type txnProducer struct {
	num     int32 // the open transaction's number, from 1
	acked   int   // its data batches acknowledged
	want    int   // its data batches in all
	commit  bool
	sending txnSend
	prev    []byte // the previous transaction's marker
	copied  bool   // prev was sent again during this transaction
}

// txnSend is what a transactional producer's batch in flight is.
type txnSend int

const (
	txnData   txnSend = iota // a data batch of the open transaction
	txnMarker                // the open transaction's marker
	txnLate                  // a late copy of the previous marker
)

func newTxnProducer(s *Sim, group uint64, isrPart int) *producer {
	pr := &producer{group: group, pid: txnPID, isrPart: isrPart, txn: &txnProducer{num: 1}}
	pr.txn.plan(s)
	return pr
}

// plan draws the open transaction's size and outcome.
func (t *txnProducer) plan(s *Sim) {
	t.acked, t.want, t.commit, t.copied, t.sending = 0, 1+s.rng.IntN(3), s.rng.Float64() < 0.7, false, txnData
}

// nextTxn makes the transactional producer's next batch.
func (pr *producer) nextTxn(s *Sim) {
	t := pr.txn
	switch {
	case t.prev != nil && t.acked > 0 && !t.copied && s.rng.Float64() < 0.25:
		pr.cur, t.sending, t.copied = t.prev, txnLate, true
	case t.acked < t.want:
		pr.made++
		vals := make([]string, 1+s.rng.IntN(2))
		for i := range vals {
			vals[i] = fmt.Sprintf("g%d-p%d-t%d-b%d-r%d", pr.group, pr.pid, t.num, pr.made, i)
		}
		pr.cur, pr.curSeq, t.sending = makeTxnBatch(pr.pid, pr.nextSeq, s.clock().UnixMilli(), vals), pr.nextSeq, txnData
	default:
		pr.cur, t.sending = partition.ControlBatch(pr.pid, 0, t.commit, s.markerEpoch(t.num), s.clock().UnixMilli()), txnMarker
	}
}

// markerEpoch is the coordinator epoch of transaction num's marker: its
// number, as coordinator/txns numbers markers, unless the planted
// UnnumberedMarkers bug sends an earlier binary's bare term.
func (s *Sim) markerEpoch(num int32) int32 {
	if s.cfg.UnnumberedMarkers {
		return 1
	}
	return txns.MarkerEpoch(txns.PendingTxn{MarkerSeq: num}, 1)
}

// ackTxnControl takes the acknowledgement of a marker or a late copy.
func (s *Sim) ackTxnControl(pr *producer, res *partition.ProduceResult) {
	t := pr.txn
	if t.sending == txnLate {
		if res.Duplicate {
			s.res.LateCopies++
		} else {
			s.chk.fail("partition %d: a late copy of transaction %d's marker was taken at %d, while transaction %d was open", pr.group, t.num-1, res.Base, t.num)
		}
		s.note("partition %d: late copy of transaction %d's marker answered (duplicate %v)", pr.group, t.num-1, res.Duplicate)
		t.sending = txnData
		return
	}
	s.tchk.onMarker(pr.group, t.num, t.commit)
	s.res.Txns++
	s.note("partition %d: transaction %d %s (duplicate %v)", pr.group, t.num, map[bool]string{true: "committed", false: "aborted"}[t.commit], res.Duplicate)
	t.prev = pr.cur
	t.num++
	t.plan(s)
}

// makeTxnBatch is makeBatch with the transactional attribute.
func makeTxnBatch(pid int64, seq int32, ts int64, values []string) []byte {
	b := makeBatch(pid, seq, ts, values)
	binary.BigEndian.PutUint16(b[batchOffAttrs:], binary.BigEndian.Uint16(b[batchOffAttrs:])|attrTransactional)
	binary.BigEndian.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttrs:], castagnoli))
	return b
}

// Batch attributes of a v2 RecordBatch.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)
