package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzControlRecord feeds the marker decoders arbitrary control record
// keys and values, and whole control batches built around them: they must
// never panic, a batch must be refused with a *BatchError, and whatever
// they accept must survive a round trip through ControlBatch.
func FuzzControlRecord(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 1}, int64(1), int16(0))
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0xff, 0xff, 0xff, 0xff}, int64(7), int16(3))
	f.Add([]byte{0, 1, 0, 1, 0}, []byte{0, 5, 0, 0, 0, 2, 9}, int64(0), int16(-1))
	f.Add([]byte{0, 0, 0, 2}, []byte{0, 0, 0, 0, 0, 0}, int64(1), int16(0))
	f.Add([]byte{0xff, 0xff, 0, 0}, []byte{0}, int64(-1), int16(0))
	f.Add([]byte{}, []byte(nil), int64(3), int16(0))
	f.Fuzz(func(t *testing.T, key, value []byte, pid int64, epoch int16) {
		m, err := ParseControlRecord(key, value)
		if err == nil {
			if typ := int16(binary.BigEndian.Uint16(key[2:])); m.Commit != (typ == ControlCommit) {
				t.Fatalf("type %d decoded as commit=%v", typ, m.Commit)
			}
			back, err := ParseControlBatch(ControlBatch(pid, epoch, m.Commit, m.CoordinatorEpoch, 0))
			if pid >= 0 && (err != nil || back != m) {
				t.Fatalf("round trip of %+v: %+v, %v", m, back, err)
			}
		}
		b := makeBatch(t, batchSpec{records: []testRecord{{ts: 1, key: key, value: value}}, producerID: pid, producerEpoch: epoch, attributes: attrControl | attrTransactional})
		bm, berr := ParseControlBatch(b)
		var be *BatchError
		if berr != nil && !errors.As(berr, &be) {
			t.Fatalf("batch refusal %v is not a *BatchError", berr)
		}
		if want := err == nil && pid >= 0 && key != nil && value != nil; (berr == nil) != want || want && bm != m {
			t.Fatalf("batch decode %+v, %v; record decode %+v, %v", bm, berr, m, err)
		}
		// Any cut of the batch is refused, never a panic.
		for n := batchHeaderSize; n < len(b); n += 1 + len(b)/8 {
			if _, err := ParseControlBatch(bytes.Clone(b[:n])); err == nil {
				t.Fatalf("batch cut to %d bytes accepted", n)
			}
		}
	})
}
