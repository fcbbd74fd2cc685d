package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkRecordBody walks one v2 record after its length prefix, as Kafka's
// broker reads each record before it appends a batch: attributes, the
// timestamp and offset deltas, the key and the value (a length of -1 is
// null), and the headers (a count, then each key, never null, and value).
// The fields must fill the body exactly. It returns the offset delta.
func checkRecordBody(body []byte) (offsetDelta int64, err error) {
	r := bodyReader{b: body[1:]} // attributes: unused in v2, any value
	r.varint()                   // timestamp delta
	offsetDelta = r.varint()
	r.field("key", -1)
	r.field("value", -1)
	headers := r.varint()
	if r.err == nil && headers < 0 {
		r.err = fmt.Errorf("header count %d", headers)
	}
	for h := int64(0); h < headers && r.err == nil; h++ {
		r.field("header key", 0)
		r.field("header value", -1)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes follow the record's last field", len(r.b))
	}
	return offsetDelta, r.err
}

var errVarint = errors.New("bad varint")

// bodyReader reads a record's fields; the first error sticks.
type bodyReader struct {
	b   []byte
	err error
}

func (r *bodyReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) > 0 && r.b[0] < 0x80 { // one byte, as most lengths are
		u := r.b[0]
		r.b = r.b[1:]
		return int64(u>>1) ^ -int64(u&1)
	}
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.err = errVarint
		return 0
	}
	r.b = r.b[k:]
	return v
}

// field skips a length-prefixed field whose length may be as low as min.
func (r *bodyReader) field(name string, min int64) {
	n := r.varint()
	if r.err != nil {
		return
	}
	if n < min || n > int64(len(r.b)) {
		r.err = fmt.Errorf("%s length %d, %d bytes left", name, n, len(r.b))
		return
	}
	r.b = r.b[max(n, 0):]
}
