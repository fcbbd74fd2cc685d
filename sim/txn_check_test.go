package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/raftq/raftq/coordinator/txns"
	"github.com/raftq/raftq/internal/vfs"
	"github.com/raftq/raftq/partition"
)

// txnLog writes batches to a real partition log on a vfs.Mem (a layer
// test: no raft, no simulation) and returns it with the batches as the
// simulator reads them back.
func txnLog(t *testing.T, batches ...[]byte) (*partition.Log, []batchAt) {
	t.Helper()
	cfg := partition.DefaultConfig()
	cfg.FS = vfs.NewMem()
	l, err := partition.Open("/p", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, b := range batches {
		if _, _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetHighWatermark(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	s := &Sim{chk: newChecker()}
	return l, s.readLog(1, 1, l)
}

func dataOf(num, seq int32) []byte {
	return makeTxnBatch(txnPID, seq, 1000, []string{fmt.Sprintf("g1-p3-t%d-b1-r0", num)})
}

func txnEnd(num int32, commit bool) []byte {
	return partition.ControlBatch(txnPID, 0, commit, txns.MarkerEpoch(txns.PendingTxn{MarkerSeq: num}, 1), 1000)
}

// TestTxnChecker: a log whose transactions are in order passes; each
// anomaly the checker claims to find is found: a marker that ended the
// wrong transaction, data after its own transaction's marker, an
// acknowledged marker missing, and an index that disagrees with the
// batches (the index of the real log checked against a walk of other
// batches).
func TestTxnChecker(t *testing.T) {
	good, goodBatches := txnLog(t, dataOf(1, 0), txnEnd(1, false), dataOf(2, 1), txnEnd(2, true), dataOf(3, 2))
	c := &txnChecker{c: newChecker(), acked: map[uint64]map[int32]bool{1: {1: false, 2: true}}}
	c.check(1, 1, goodBatches, good)
	if v := c.c.violations; len(v) != 0 {
		t.Fatalf("a good log: %v", v)
	}

	wrong, wrongBatches := txnLog(t, dataOf(1, 0), txnEnd(1, true), dataOf(2, 1), txnEnd(1, true))
	afterEnd, afterEndBatches := txnLog(t, dataOf(1, 0), txnEnd(1, true), dataOf(1, 1))
	for _, tc := range []struct {
		name    string
		l       *partition.Log
		batches []batchAt
		acked   map[int32]bool
		want    string
	}{
		{"a late copy ended the next transaction", wrong, wrongBatches, nil, "transaction 1's marker taken twice"},
		{"data after its transaction's marker", afterEnd, afterEndBatches, nil, "data of transaction 1 after transaction 1's marker"},
		{"an acknowledged marker lost", good, goodBatches, map[int32]bool{3: true}, "marker of transaction 3 lost"},
		// The good log's index against a walk without its abort marker's
		// batch and the rest: the index shows an abort the walk does not.
		{"an index that disagrees", good, goodBatches[:1], nil, "aborted-transaction index"},
	} {
		c := &txnChecker{c: newChecker(), acked: map[uint64]map[int32]bool{1: tc.acked}}
		c.check(1, 1, tc.batches, tc.l)
		if !strings.Contains(strings.Join(c.c.violations, "\n"), tc.want) {
			t.Errorf("%s: violations %q, want one with %q", tc.name, c.c.violations, tc.want)
		}
	}
}
