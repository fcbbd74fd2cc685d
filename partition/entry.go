package partition

import (
	"encoding/binary"
	"fmt"
)

// Kinds of entry a partition's raft log carries. The first byte of a
// payload names its kind.
const (
	kindProduce      byte = 1 // one validated v2 record batch
	kindAdvanceStart byte = 2 // DeleteRecords or retention: new log start offset
)

// ProduceParts frames a validated batch for a raft proposal as parts that
// raftgroup.Group.Propose joins, so the batch is copied only once, into
// the raft entry.
func ProduceParts(batch []byte) [][]byte {
	return [][]byte{{kindProduce}, batch}
}

// AdvanceStartEntry frames a move of the log start offset, decided by the
// leader (DeleteRecords or retention) and applied by every replica.
func AdvanceStartEntry(offset int64) []byte {
	b := make([]byte, 9)
	b[0] = kindAdvanceStart
	binary.BigEndian.PutUint64(b[1:], uint64(offset))
	return b
}

func decodeAdvanceStart(b []byte) (int64, error) {
	if len(b) != 9 {
		return 0, fmt.Errorf("partition: advance-start entry of %d bytes", len(b))
	}
	return int64(binary.BigEndian.Uint64(b[1:])), nil
}
