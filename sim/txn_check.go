package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/partition"
)

// txnChecker holds the transaction invariants of every partition, checked
// on each replica's final log and its transaction index:
//   - the transactional producer's batches form its transactions in
//     order: data of transaction n only after n-1's marker, each marker
//     once and only for the transaction open then (a late copy or a retry
//     taken again would end, or mark, the wrong one);
//   - every acknowledged marker is in the log;
//   - the log's aborted-transaction index, its open transactions and its
//     last stable offset are what the batches say.
type txnChecker struct {
	c     *checker
	acked map[uint64]map[int32]bool // group -> transaction -> committed
}

func newTxnChecker(c *checker) *txnChecker {
	return &txnChecker{c: c, acked: map[uint64]map[int32]bool{}}
}

func (t *txnChecker) onMarker(group uint64, num int32, commit bool) {
	if t.acked[group] == nil {
		t.acked[group] = map[int32]bool{}
	}
	t.acked[group][num] = commit
}

// txnWalk is what one replica's log says of its transactions.
type txnWalk struct {
	open    int32
	first   int64 // the open transaction's first offset
	last    int32 // the newest marker's transaction; 0 before any
	markers map[int32]bool
	aborted []partition.AbortedTxn
}

// check walks one replica's log and compares its index l against it.
func (t *txnChecker) check(group, node uint64, log []batchAt, l *partition.Log) {
	w := txnWalk{markers: map[int32]bool{}, first: -1}
	where := fmt.Sprintf("partition %d node %d", group, node)
	for i, b := range log {
		if err := t.step(&w, b, i == 0); err != nil {
			t.c.fail("%s: transactions at offset %d: %s", where, b.base, err)
			return
		}
	}
	for num, commit := range t.acked[group] {
		if !w.markers[num] {
			t.c.fail("%s: acknowledged %s marker of transaction %d lost", where, map[bool]string{true: "commit", false: "abort"}[commit], num)
		}
	}
	var open []partition.OngoingTxn
	if w.first >= 0 {
		open = []partition.OngoingTxn{{ProducerID: txnPID, FirstOffset: w.first}}
	}
	if got := l.OngoingTransactions(); !slices.Equal(got, open) {
		t.c.fail("%s: open transactions %+v, the log says %+v", where, got, open)
	}
	var got []partition.AbortedTxn
	for _, a := range l.AbortedTransactions(l.StartOffset(), l.EndOffset()) {
		a.LastStableOffset = 0 // the LSO when the abort was written: not in the batches
		got = append(got, a)
	}
	if !slices.Equal(got, w.aborted) {
		t.c.fail("%s: aborted-transaction index %+v, the log says %+v", where, got, w.aborted)
	}
	stable := l.HighWatermark()
	if w.first >= 0 {
		stable = min(stable, w.first)
	}
	if lso := l.LastStableOffset(); lso != stable {
		t.c.fail("%s: last stable offset %d, want %d (high watermark %d, open transaction at %d)", where, lso, stable, l.HighWatermark(), w.first)
	}
}

// step takes one batch of the walk.
func (t *txnChecker) step(w *txnWalk, b batchAt, first bool) error {
	raw := []byte(b.bytes)
	if int64(binary.BigEndian.Uint64(raw[batchOffPID:])) != txnPID {
		return nil
	}
	attrs := binary.BigEndian.Uint16(raw[batchOffAttrs:])
	rec, err := firstRecord(raw)
	if err != nil {
		return err
	}
	if attrs&attrControl == 0 {
		return w.data(b, rec, first)
	}
	return w.marker(b, rec)
}

func (w *txnWalk) data(b batchAt, rec kmsg.Record, first bool) error {
	var g, p, num, bn, r int
	if _, err := fmt.Sscanf(string(rec.Value), "g%d-p%d-t%d-b%d-r%d", &g, &p, &num, &bn, &r); err != nil {
		return fmt.Errorf("transactional value %q: %v", rec.Value, err)
	}
	n := int32(num)
	switch {
	case w.first >= 0 && n != w.open:
		return fmt.Errorf("data of transaction %d while %d is open (its marker is missing)", n, w.open)
	case w.first < 0 && n != w.last+1 && !(first && w.last == 0):
		return fmt.Errorf("data of transaction %d after transaction %d's marker", n, w.last)
	case w.first < 0:
		w.open, w.first = n, b.base
	}
	return nil
}

func (w *txnWalk) marker(b batchAt, rec kmsg.Record) error {
	if len(rec.Key) < 4 || len(rec.Value) < 6 {
		return fmt.Errorf("control record key %x value %x", rec.Key, rec.Value)
	}
	commit := binary.BigEndian.Uint16(rec.Key[2:]) == 1
	num := partition.MarkerSeq(int32(binary.BigEndian.Uint32(rec.Value[2:])))
	switch {
	case w.markers[num] && num > 0:
		return fmt.Errorf("transaction %d's marker taken twice", num)
	case w.first < 0:
		return fmt.Errorf("marker (transaction %d) with no transaction open", num)
	case num != w.open && num > 0:
		return fmt.Errorf("transaction %d's marker ended transaction %d", num, w.open)
	}
	if !commit {
		w.aborted = append(w.aborted, partition.AbortedTxn{ProducerID: txnPID, FirstOffset: w.first, LastOffset: b.base})
	}
	w.markers[w.open], w.last, w.first = true, w.open, -1
	return nil
}

// firstRecord decodes a batch's first record.
func firstRecord(batch []byte) (kmsg.Record, error) {
	recs := batch[batchHeaderSize:]
	n, k := binary.Varint(recs)
	if k <= 0 || n < 0 || int64(len(recs)-k) < n {
		return kmsg.Record{}, errors.New("batch with a cut first record")
	}
	var r kmsg.Record
	if err := r.ReadFrom(recs[:k+int(n)]); err != nil {
		return kmsg.Record{}, fmt.Errorf("first record: %w", err)
	}
	return r, nil
}
