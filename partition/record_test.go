package partition

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchWithBody is a one-record batch whose record body is body.
func batchWithBody(body []byte) []byte {
	recs := binary.AppendVarint(nil, int64(len(body)))
	recs = append(recs, body...)
	rb := kmsg.RecordBatch{
		Length: int32(batchHeaderSize - framePrefix + len(recs)), PartitionLeaderEpoch: -1, Magic: 2,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: recs,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// TestValidateBatch_RecordBodies: every field of a record must be well
// formed and the fields must fill the record, as Kafka's broker checks;
// a record that only frames right is refused.
func TestValidateBatch_RecordBodies(t *testing.T) {
	// attributes, timestamp delta 0, offset delta 0, then the rest
	// (varints are zigzag: -1 is 1, 1 is 2).
	cases := []struct {
		name string
		body []byte
		ok   bool
	}{
		{"null key, value v, no headers", []byte{0, 0, 0, 1, 2, 'v', 0}, true},
		{"a header", []byte{0, 0, 0, 1, 2, 'v', 2, 2, 'h', 1}, true},
		{"key longer than the record", []byte{0, 0, 0, 10, 'k', 0}, false},
		{"value length -2", []byte{0, 0, 0, 1, 3, 0}, false},
		{"header count -1", []byte{0, 0, 0, 1, 1, 1}, false},
		{"null header key", []byte{0, 0, 0, 1, 1, 2, 1, 1}, false},
		{"a byte after the headers", []byte{0, 0, 0, 1, 2, 'v', 0, 9}, false},
		{"header count past the end", []byte{0, 0, 0, 1, 1, 40}, false},
	}
	for _, c := range cases {
		b := batchWithBody(c.body)
		_, err := ValidateBatch(b, len(b))
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: %v, want a corrupt batch", c.name, err)
		}
	}
}
