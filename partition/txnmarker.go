package partition

import (
	"encoding/binary"
	"fmt"
)

// Control record types (Kafka's ControlRecordType) a control batch may
// carry. Only the transaction markers are accepted in a partition log.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// Sizes of Kafka's EndTransactionMarker: key version int16 + type int16,
// value version int16 + coordinator epoch int32.
const (
	controlKeySize   = 4
	controlValueSize = 6
)

// ControlMarker is a decoded transaction marker (Kafka's
// EndTransactionMarker): the end of a producer's transaction in one
// partition.
type ControlMarker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// ControlBatch returns a v2 control batch holding one transaction marker
// for the producer, as the transaction coordinator's WriteTxnMarkers asks
// a partition leader to append: attributes transactional|control,
// sequence -1, one record whose key is (version 0, type) and whose value is
// (version 0, coordinator epoch), timestamps timestampMs. Its base offset
// and leader epoch are 0 and -1 (Append stamps them) and its CRC is set.
func ControlBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, timestampMs int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	var key [controlKeySize]byte
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	var val [controlValueSize]byte
	binary.BigEndian.PutUint32(val[2:], uint32(coordinatorEpoch))

	// The record: attributes, timestampDelta 0, offsetDelta 0, key, value,
	// no headers; every varint here fits one byte.
	body := []byte{0, 0, 0, zigzag(controlKeySize)}
	body = append(body, key[:]...)
	body = append(body, zigzag(controlValueSize))
	body = append(body, val[:]...)
	body = append(body, 0)

	b := make([]byte, batchHeaderSize, batchHeaderSize+1+len(body))
	be := binary.BigEndian
	be.PutUint32(b[offLeaderEpoch:], ^uint32(0))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(attrTransactional|attrControl))
	be.PutUint64(b[offFirstTimestamp:], uint64(timestampMs))
	be.PutUint64(b[offMaxTimestamp:], uint64(timestampMs))
	be.PutUint64(b[offProducerID:], uint64(producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(epoch))
	be.PutUint32(b[offBaseSequence:], ^uint32(0))
	be.PutUint32(b[offNumRecords:], 1)
	b = append(b, zigzag(int64(len(body))))
	b = append(b, body...)
	return sealBatch(b)
}

// zigzag encodes a small non-negative value (< 64) as a one-byte varint.
func zigzag(v int64) byte { return byte(v << 1) }

// ParseControlRecord decodes a control record's key and value as a
// transaction marker. A key shorter than 4 bytes, a negative key or value
// version, a type other than ABORT or COMMIT, or a value shorter than 6
// bytes is refused. Newer versions are read by their version-0 prefix,
// as Kafka reads them.
func ParseControlRecord(key, value []byte) (ControlMarker, error) {
	if len(key) < controlKeySize {
		return ControlMarker{}, fmt.Errorf("control record key of %d bytes", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return ControlMarker{}, fmt.Errorf("control record key version %d", v)
	}
	typ := int16(binary.BigEndian.Uint16(key[2:]))
	if typ != ControlAbort && typ != ControlCommit {
		return ControlMarker{}, fmt.Errorf("control record type %d is not a transaction marker", typ)
	}
	if len(value) < controlValueSize {
		return ControlMarker{}, fmt.Errorf("transaction marker value of %d bytes", len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return ControlMarker{}, fmt.Errorf("transaction marker value version %d", v)
	}
	return ControlMarker{
		Commit:           typ == ControlCommit,
		CoordinatorEpoch: int32(binary.BigEndian.Uint32(value[2:])),
	}, nil
}

// ParseControlBatch decodes the marker of a control batch b (whole, as
// stored or produced; its CRC is not checked here): it must carry the
// control attribute and a producer id, be uncompressed, and hold exactly
// one record, a transaction marker. Failures are *BatchError values
// wrapping ErrInvalidRecord or ErrCorruptBatch.
func ParseControlBatch(b []byte) (ControlMarker, error) {
	info, err := ParseBatchHeader(b)
	if err != nil {
		return ControlMarker{}, err
	}
	return controlMarker(b, info)
}

// controlMarker is ParseControlBatch for a batch whose header was parsed.
func controlMarker(b []byte, info BatchInfo) (ControlMarker, error) {
	switch {
	case !info.Control():
		return ControlMarker{}, invalid("not a control batch")
	case info.ProducerID < 0:
		return ControlMarker{}, invalid("control batch without a producer id")
	case info.Compression() != CodecNone:
		return ControlMarker{}, invalid("compressed control batch")
	case info.NumRecords != 1:
		return ControlMarker{}, invalid("control batch of %d records, want 1", info.NumRecords)
	}
	r, rest, err := nextRecord(b[batchHeaderSize:], info.BaseOffset)
	if err != nil {
		return ControlMarker{}, corrupt("control record: %v", err)
	}
	if len(rest) != 0 {
		return ControlMarker{}, corrupt("%d bytes follow the control record", len(rest))
	}
	if _, err := checkRecordBody(recordBody(r.raw)); err != nil {
		return ControlMarker{}, corrupt("control record: %v", err)
	}
	value, err := rawRecordValue(r.raw)
	if err != nil {
		return ControlMarker{}, corrupt("control record: %v", err)
	}
	m, err := ParseControlRecord(r.key, value)
	if err != nil {
		return ControlMarker{}, invalid("%v", err)
	}
	return m, nil
}

// recordBody strips a raw record's length prefix.
func recordBody(raw []byte) []byte {
	_, k := binary.Varint(raw)
	return raw[k:]
}

// rawRecordValue returns the value of a raw record (length prefix included)
// that checkRecordBody accepted; nil for a null value.
func rawRecordValue(raw []byte) ([]byte, error) {
	r := bodyReader{b: recordBody(raw)[1:]}
	r.varint() // timestamp delta
	r.varint() // offset delta
	r.field("key", -1)
	n := r.varint()
	if r.err != nil {
		return nil, r.err
	}
	if n < 0 {
		return nil, nil
	}
	return r.b[:n], nil
}
