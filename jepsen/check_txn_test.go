package jepsen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tw is one write of a txn: its partition, value and the offset its
// produce was acknowledged at (NoOffset for none).
type tw struct {
	p   int32
	v   string
	off int64
}

func w(p int32, v string, off int64) tw { return tw{p, v, off} }

// txnInv invokes a txn of proc that will send ws.
func (b *hb) txnInv(proc int, ws ...tw) Op {
	v := &TxnValue{ID: fmt.Sprintf("tx-%d", proc), Sends: []SendValue{}}
	for _, x := range ws {
		v.Sends = append(v.Sends, SendValue{Topic: topic, Partition: x.p, Key: "k", Value: x.v, Offset: NoOffset})
	}
	return b.invoke(Op{Process: proc, F: FTxn, Txn: v})
}

// endNow marks a txn that calls EndTxn just before it completes.
const endNow = -1

// txnDone completes a txn: its sends get ws' acknowledged offsets, its
// polls returned reads, and EndStart is end (endNow: 5ns before the
// completion; 0: never called).
func (b *hb) txnDone(inv Op, t Type, end int64, ws []tw, reads ...PartitionRead) Op {
	return b.complete(inv, t, func(c *Op) {
		for i, x := range ws {
			c.Txn.Sends[i].Offset = x.off
		}
		c.Txn.EndStart = end
		if end == endNow {
			c.Txn.EndStart = b.t + 5
		}
		c.Txn.Abort = t == Fail
		c.Reads = reads
		if t != OK {
			c.Error = "test: " + string(t)
		}
	})
}

// txn invokes and completes a txn at once, calling EndTxn.
func (b *hb) txn(proc int, t Type, ws []tw, reads ...PartitionRead) Op {
	return b.txnDone(b.txnInv(proc, ws...), t, endNow, ws, reads...)
}

func ws(x ...tw) []tw { return x }

func checkerNames(res *Results) []string {
	var out []string
	for _, c := range res.Checkers {
		out = append(out, c.Name)
	}
	return out
}

// cleanTxn is a valid transactional history: commits and an abort leave
// marker and aborted offsets that read_committed readers skip, a txn
// reads before it writes, and complete final reads see the committed
// records alone.
func cleanTxn() *hb {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0), w(1, "b", 0)))    // markers at 0/1 and 1/1
	b.txn(1, Fail, ws(w(0, "c", 2), w(0, "c2", 3))) // aborted at 2, 3; marker at 4
	b.txn(0, OK, ws(w(0, "d", 5)))                  // marker at 6
	b.assign(2, seek(0, 0), seek(1, 0))
	b.txn(2, OK, ws(w(1, "e", 2)), part(0, 7, 0, "a", 5, "d"), part(1, 2, 0, "b"))
	b.txn(2, OK, ws(w(0, "f", 7)), part(1, 4, 2, "e"))
	b.final(3, 0, OK, 9, 0, "a", 5, "d", 7, "f")
	b.final(3, 1, OK, 4, 0, "b", 2, "e")
	return b
}

func TestCheckTxn_CleanHistoryPassesEveryChecker(t *testing.T) {
	res := check(t, cleanTxn().h)
	if got := checkerNames(res); !slices.Equal(got, TxnCheckerNames) {
		t.Fatalf("checkers %v, want %v", got, TxnCheckerNames)
	}
	for _, c := range res.Checkers {
		if c.Verdict != VerdictOK {
			t.Errorf("%s: %s %+v", c.Name, c.Verdict, c.Examples)
		}
	}
	if !res.Valid || res.Verdict != VerdictOK {
		t.Fatalf("%s", res.Summary())
	}
	if got := res.Stats.ByF[FTxn][OK]; got != 4 {
		t.Errorf("ok txns %d, want 4", got)
	}
}

func TestCheckTxn_HistoriesWithoutTxnsKeepTheirCheckers(t *testing.T) {
	if got := checkerNames(check(t, clean().h)); !slices.Equal(got, PlainCheckerNames) {
		t.Fatalf("checkers %v, want %v", got, PlainCheckerNames)
	}
	for _, n := range TxnCheckerNames {
		if !slices.Contains(CheckerNames, n) {
			t.Errorf("CheckerNames lacks %s", n)
		}
	}
}

func TestCheckTxn_LostCommittedWrite(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0), w(0, "b", 1))) // marker at 2
	b.final(1, 0, OK, 3, 0, "a")                 // b is gone
	c := wantVerdict(t, b.h, CheckLostWrite, VerdictFail, 1)
	if ex := c.Examples[0]; ex.Value != "b" || ex.Offset != 1 {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, b.h, CheckUnseen, VerdictFail, 1)
	wantVerdict(t, cleanTxn().h, CheckLostWrite, VerdictOK, 0)
}

func TestCheckTxn_UnknownOrAbortedTxnIsNotLost(t *testing.T) {
	b := &hb{}
	b.txn(0, Fail, ws(w(0, "a", 0)))                                     // aborted; acked at 0
	b.txnDone(b.txnInv(1, w(0, "b", 2)), Info, endNow, ws(w(0, "b", 2))) // may have aborted
	b.txn(2, OK, ws(w(0, "c", 4)))
	b.final(3, 0, OK, 6, 4, "c")
	res := check(t, b.h)
	for _, c := range res.Checkers {
		if c.Verdict != VerdictOK {
			t.Errorf("%s: %s %+v", c.Name, c.Verdict, c.Examples)
		}
	}
}

func TestCheckTxn_Duplicate(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0)))
	b.final(1, 0, OK, 4, 0, "a", 2, "a") // the committed record twice
	c := wantVerdict(t, b.h, CheckDuplicate, VerdictFail, 1)
	if ex := c.Examples[0]; ex.Value != "a" || !slices.Equal(ex.Offsets, []int64{0, 2}) {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, cleanTxn().h, CheckDuplicate, VerdictOK, 0)
}

func TestCheckTxn_AbortedReadIsG1a(t *testing.T) {
	b := &hb{}
	b.txn(0, Fail, ws(w(0, "a", 0))) // the abort was acknowledged...
	b.txn(0, OK, ws(w(0, "b", 2)))
	b.final(1, 0, OK, 4, 0, "a", 2, "b") // ...yet a read_committed reader returned it
	c := wantVerdict(t, b.h, CheckG1a, VerdictFail, 1)
	if c.Counts["G1a"] != 1 || c.Examples[0].Value != "a" {
		t.Errorf("counts %v example %+v", c.Counts, c.Examples[0])
	}
	wantVerdict(t, cleanTxn().h, CheckG1a, VerdictOK, 0)
}

func TestCheckTxn_NonmonotonicPollAcrossTxns(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0), w(0, "b", 1)))
	b.assign(1, seek(0, 0))
	b.txn(1, OK, ws(w(1, "x", 0)), part(0, 3, 0, "a", 1, "b"))
	b.txn(1, OK, ws(w(1, "y", 2)), part(0, 3, 0, "a")) // back to 0 without a seek
	c := wantVerdict(t, b.h, CheckNonmonotonicPoll, VerdictFail, 1)
	if ex := c.Examples[0]; !slices.Equal(ex.Offsets, []int64{1, 0}) || ex.Process != 1 {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, cleanTxn().h, CheckNonmonotonicPoll, VerdictOK, 0)
}

func TestCheckTxn_NonmonotonicSend(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 5), w(0, "b", 3))) // within one txn
	b.txn(1, OK, ws(w(1, "c", 5)))
	b.txn(1, OK, ws(w(1, "d", 4))) // across txns of one process
	b.txn(2, OK, ws(w(1, "e", 1))) // another process: fine
	c := wantVerdict(t, b.h, CheckNonmonotonicSend, VerdictFail, 2)
	if ex := c.Examples[0]; !slices.Equal(ex.Values, []string{"a", "b"}) || ex.Process != 0 {
		t.Errorf("example %+v", ex)
	}
	if ex := c.Examples[1]; !slices.Equal(ex.Values, []string{"c", "d"}) || ex.Process != 1 {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, cleanTxn().h, CheckNonmonotonicSend, VerdictOK, 0)
}

// Markers and aborted records take offsets no read_committed reader
// returns; the reader jumps over them, and over an unknown txn's
// acknowledged offsets, without a poll-skip. A committed record it jumps
// over is one.
func TestCheckTxn_PollSkipToleratesMarkersAndAbortedRecords(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0)))                                       // marker 1
	b.txn(1, Fail, ws(w(0, "x", 2), w(0, "y", 3)))                       // marker 4
	b.txnDone(b.txnInv(2, w(0, "z", 5)), Info, endNow, ws(w(0, "z", 5))) // aborted in truth; marker 6
	b.txn(3, OK, ws(w(0, "b", 7)))                                       // marker 8
	b.assign(4, seek(0, 0))
	b.poll(4, part(0, 9, 0, "a"))
	b.poll(4, part(0, 9, 7, "b"))
	b.final(5, 0, OK, 9, 0, "a", 7, "b")
	wantVerdict(t, b.h, CheckPollSkip, VerdictOK, 0)
	wantVerdict(t, b.h, CheckLostWrite, VerdictOK, 0)
	wantVerdict(t, b.h, CheckUnseen, VerdictOK, 0)

	b.txn(3, OK, ws(w(0, "c", 9))) // marker 10
	b.txn(3, OK, ws(w(0, "d", 11)))
	b.poll(4, part(0, 13, 11, "d")) // skips the committed c
	b.final(5, 0, OK, 13, 0, "a", 7, "b", 9, "c", 11, "d")
	c := wantVerdict(t, b.h, CheckPollSkip, VerdictFail, 1)
	if ex := c.Examples[0]; !slices.Equal(ex.Offsets, []int64{9}) {
		t.Errorf("example %+v", ex)
	}
}

func TestCheckTxn_UncommittedRead(t *testing.T) {
	b := &hb{}
	t1 := b.txnInv(0, w(0, "a", 0))
	b.final(9, 0, OK, 1, 0, "a") // read before t1 called EndTxn
	b.txnDone(t1, OK, endNow, ws(w(0, "a", 0)))
	// t2 ended without EndTxn (its producer died): it never committed.
	b.txnDone(b.txnInv(1, w(1, "b", 0)), Info, 0, ws(w(1, "b", 0)))
	b.assign(2, seek(1, 0))
	b.txn(2, OK, ws(w(2, "c", 0)), part(1, 2, 0, "b"))
	c := wantVerdict(t, b.h, CheckUncommittedRead, VerdictFail, 2)
	if c.Counts["precommitted"] != 1 || c.Counts["never-committed"] != 1 {
		t.Errorf("counts %v", c.Counts)
	}
	if ex := c.Examples[0]; ex.Value != "a" || !slices.Equal(ex.Ops, []int64{t1.Index + 3, t1.Index + 2}) {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, cleanTxn().h, CheckUncommittedRead, VerdictOK, 0)
}

func TestCheckTxn_UncommittedRead_OwnWrite(t *testing.T) {
	b := &hb{}
	b.assign(0, seek(0, 0))
	b.txn(0, OK, ws(w(0, "a", 0)), part(0, 1, 0, "a")) // its poll ran before its send
	c := wantVerdict(t, b.h, CheckUncommittedRead, VerdictFail, 1)
	if c.Counts["own-write"] != 1 {
		t.Errorf("counts %v", c.Counts)
	}
}

// A txn still open when the history ends may have committed: reads of it
// are no anomaly.
func TestCheckTxn_UncommittedRead_OpenTxnMayHaveCommitted(t *testing.T) {
	b := &hb{}
	b.txnInv(0, w(0, "a", 0))
	b.final(1, 0, OK, 2, 0, "a")
	wantVerdict(t, b.h, CheckUncommittedRead, VerdictOK, 0)
	wantVerdict(t, b.h, CheckG1a, VerdictOK, 0)
}

func TestCheckTxn_G1b(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0), w(0, "b", 1), w(0, "c", 2)))
	b.final(1, 0, OK, 4, 0, "a", 2, "c") // part of the txn it read through
	c := wantVerdict(t, b.h, CheckG1b, VerdictFail, 1)
	if ex := c.Examples[0]; ex.Value != "b" || !slices.Equal(ex.Offsets, []int64{1}) {
		t.Errorf("example %+v", ex)
	}
	wantVerdict(t, cleanTxn().h, CheckG1b, VerdictOK, 0)
}

// A txn's writes split across two polls, or cut by the end of a read, are
// no intermediate read.
func TestCheckTxn_G1b_SplitAcrossPollsIsNot(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0), w(0, "b", 1), w(0, "c", 2)))
	b.txn(0, OK, ws(w(0, "d", 4)))
	b.assign(1, seek(0, 0))
	b.poll(1, part(0, 6, 0, "a"))
	b.poll(1, part(0, 6, 1, "b", 2, "c", 4, "d"))
	b.assign(2, seek(0, 0))
	b.poll(2, part(0, 6, 0, "a", 1, "b"))
	wantVerdict(t, b.h, CheckG1b, VerdictOK, 0)
	wantVerdict(t, b.h, CheckPollSkip, VerdictOK, 0)
}

// Two concurrent txns write p0 and p1 in opposite orders: a ww cycle, as
// a correct Kafka may make (its transactions are not isolated).
func TestCheckTxn_G0(t *testing.T) {
	b := &hb{}
	t1 := b.txnInv(0, w(0, "a", 0), w(1, "b", 1))
	t2 := b.txnInv(1, w(1, "c", 0), w(0, "d", 1))
	c1 := b.txnDone(t1, OK, endNow, ws(w(0, "a", 0), w(1, "b", 1)))
	c2 := b.txnDone(t2, OK, endNow, ws(w(1, "c", 0), w(0, "d", 1)))
	b.final(2, 0, OK, 3, 0, "a", 1, "d")
	b.final(2, 1, OK, 3, 0, "c", 1, "b")
	c := wantVerdict(t, b.h, CheckG0, VerdictFail, 1)
	ex := c.Examples[0]
	if ops := slices.Sorted(slices.Values(ex.Ops)); !slices.Equal(ops, []int64{c1.Index, c2.Index}) {
		t.Errorf("example %+v, want ops %d and %d", ex, c1.Index, c2.Index)
	}
	wantVerdict(t, b.h, CheckG1c, VerdictOK, 0)
	wantVerdict(t, b.h, CheckG1cRealtime, VerdictOK, 0)
	wantVerdict(t, cleanTxn().h, CheckG0, VerdictOK, 0)

	cfg := DefaultCheckConfig()
	cfg.Allowed = []string{CheckG0, CheckG1c}
	res, err := Check(b.h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.Verdict != VerdictOK || !res.Checker(CheckG0).Allowed {
		t.Fatalf("%s", res.Summary())
	}
}

// T1 -ww-> T2 -wr-> T3 -ww-> T1: T1 writes p, T2 writes p after it and
// commits, T3 reads T2 and writes q, and T1, still open, writes q after
// T3 and commits. A cycle with a read edge that a correct Kafka may make.
func TestCheckTxn_G1c(t *testing.T) {
	b := &hb{}
	t1 := b.txnInv(0, w(0, "a", 0), w(1, "d", 5))
	b.assign(2, seek(0, 0))
	c2 := b.txn(1, OK, ws(w(0, "b", 1)))
	c3 := b.txn(2, OK, ws(w(1, "c", 3)), part(0, 3, 1, "b"))
	c1 := b.txnDone(t1, OK, endNow, ws(w(0, "a", 0), w(1, "d", 5)))
	c := wantVerdict(t, b.h, CheckG1c, VerdictFail, 1)
	ex := c.Examples[0]
	if ops := slices.Sorted(slices.Values(ex.Ops)); !slices.Equal(ops, []int64{c2.Index, c3.Index, c1.Index}) {
		t.Errorf("example %+v", ex)
	}
	if !strings.Contains(ex.Detail, "-wr t/0->") || !strings.Contains(ex.Detail, "-ww t/1->") {
		t.Errorf("detail %q", ex.Detail)
	}
	wantVerdict(t, b.h, CheckG0, VerdictOK, 0)
	wantVerdict(t, b.h, CheckG1cRealtime, VerdictOK, 0)
	wantVerdict(t, b.h, CheckUncommittedRead, VerdictOK, 0)
	wantVerdict(t, cleanTxn().h, CheckG1c, VerdictOK, 0)
}

// T2 read T1's write, then wrote p1 below T1's write there: T1's records
// were all appended before T2 could read any, so this cannot happen. T1's
// commit is acknowledged only after T2 began, so the invocations alone do
// not order them.
func TestCheckTxn_G1cRealtime_ReadThenWroteBelow(t *testing.T) {
	b := &hb{}
	t1 := b.txnInv(0, w(0, "a", 0), w(1, "b", 5))
	b.assign(1, seek(0, 0))
	t2 := b.txnInv(1, w(1, "c", 2))
	c1 := b.txnDone(t1, OK, t2.Time+5, ws(w(0, "a", 0), w(1, "b", 5)))
	c2 := b.txnDone(t2, OK, endNow, ws(w(1, "c", 2)), part(0, 2, 0, "a"))
	c := wantVerdict(t, b.h, CheckG1cRealtime, VerdictFail, 1)
	if ex := c.Examples[0]; c.Counts["read-after"] != 1 || !slices.Equal(ex.Ops, []int64{c2.Index, c1.Index}) || !slices.Equal(ex.Offsets, []int64{2, 5}) {
		t.Errorf("counts %v example %+v", c.Counts, ex)
	}
	wantVerdict(t, b.h, CheckG1c, VerdictFail, 1)
	wantVerdict(t, b.h, CheckUncommittedRead, VerdictOK, 0)
	wantVerdict(t, cleanTxn().h, CheckG1cRealtime, VerdictOK, 0)
}

// T1 -wr-> T2 -wr-> T3 -ww-> T1: T3 read T2, which read T1, so T1's
// records were all appended before T3 sent anything; T3's write of p3
// cannot precede T1's. A longer impossible cycle, found by the same
// bound.
func TestCheckTxn_G1cRealtime_ReadChainThenWroteBelow(t *testing.T) {
	b := &hb{}
	t1 := b.txnInv(0, w(0, "a", 0), w(3, "d", 1))
	b.assign(1, seek(0, 0))
	b.assign(2, seek(1, 0))
	t2 := b.txnInv(1, w(1, "b", 0))
	t3 := b.txnInv(2, w(3, "c", 0))
	b.txnDone(t1, OK, endNow, ws(w(0, "a", 0), w(3, "d", 1)))
	b.txnDone(t2, OK, endNow, ws(w(1, "b", 0)), part(0, 2, 0, "a"))
	b.txnDone(t3, OK, endNow, ws(w(3, "c", 0)), part(1, 2, 0, "b"))
	c := wantVerdict(t, b.h, CheckG1cRealtime, VerdictFail, 1)
	if c.Counts["read-after"] != 1 || c.Examples[0].Partition != 3 {
		t.Errorf("counts %v example %+v", c.Counts, c.Examples[0])
	}
	wantVerdict(t, b.h, CheckG1c, VerdictFail, 1)
	wantVerdict(t, b.h, CheckUncommittedRead, VerdictOK, 0)
}

// T2 committed before T1 began, yet T1's records precede T2's.
func TestCheckTxn_G1cRealtime_WriteBelowAnEarlierTxn(t *testing.T) {
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 5)))
	b.txn(1, OK, ws(w(0, "b", 3)))
	c := wantVerdict(t, b.h, CheckG1cRealtime, VerdictFail, 1)
	if c.Counts["invoked-after"] != 1 || !slices.Equal(c.Examples[0].Offsets, []int64{3, 5}) {
		t.Errorf("counts %v example %+v", c.Counts, c.Examples[0])
	}
	// Concurrent txns may take offsets in either order.
	b = &hb{}
	t1 := b.txnInv(0, w(0, "a", 5))
	t2 := b.txnInv(1, w(0, "b", 3))
	b.txnDone(t1, OK, endNow, ws(w(0, "a", 5)))
	b.txnDone(t2, OK, endNow, ws(w(0, "b", 3)))
	wantVerdict(t, b.h, CheckG1cRealtime, VerdictOK, 0)
}

// A txn's polls complete before it calls EndTxn: one whose EndTxn came no
// later than the writer's read it before the writer committed, though the
// reader's op completed after.
func TestCheckTxn_UncommittedRead_TxnPollBeforeItsEndTxn(t *testing.T) {
	b := &hb{}
	t1 := b.txnInv(0, w(0, "a", 0))
	b.assign(1, seek(0, 0))
	t2 := b.txnInv(1, w(1, "b", 0))
	c1 := b.txnDone(t1, OK, endNow, ws(w(0, "a", 0)))
	b.txnDone(t2, OK, c1.Txn.EndStart, ws(w(1, "b", 0)), part(0, 2, 0, "a"))
	c := wantVerdict(t, b.h, CheckUncommittedRead, VerdictFail, 1)
	if c.Counts["precommitted"] != 1 {
		t.Errorf("counts %v", c.Counts)
	}
	b = &hb{}
	t1 = b.txnInv(0, w(0, "a", 0))
	b.assign(1, seek(0, 0))
	t2 = b.txnInv(1, w(1, "b", 0))
	c1 = b.txnDone(t1, OK, endNow, ws(w(0, "a", 0)))
	b.txnDone(t2, OK, c1.Txn.EndStart+1, ws(w(1, "b", 0)), part(0, 2, 0, "a"))
	wantVerdict(t, b.h, CheckUncommittedRead, VerdictOK, 0)
}

// A long ww chain and a ring around it: Tarjan's search is iterative and
// the graph is linear in the txns.
func TestCheckTxn_CyclesScale(t *testing.T) {
	const n = 20000
	b := &hb{}
	var invs []Op
	for i := range n {
		invs = append(invs, b.txnInv(i, w(0, fmt.Sprintf("a%d", i), int64(i)), w(1, fmt.Sprintf("b%d", i), int64((i+1)%n))))
	}
	for i, inv := range invs {
		b.txnDone(inv, OK, endNow, ws(w(0, fmt.Sprintf("a%d", i), int64(i)), w(1, fmt.Sprintf("b%d", i), int64((i+1)%n))))
	}
	a, err := analyze(b.h)
	if err != nil {
		t.Fatal(err)
	}
	g := buildTxnGraph(a, maxTxnEdges)
	if g.edges > 2*n {
		t.Fatalf("%d edges for %d txns", g.edges, n)
	}
	g0, _ := checkTxnCycles(g, 1)
	if g0.Verdict != VerdictFail || g0.Count != 1 {
		t.Fatalf("G0 %+v", g0)
	}
	// The only cycle goes through every txn; the example is cut short.
	if ops := g0.Examples[0].Ops; len(ops) < 2 || len(ops) > maxCycleOps {
		t.Fatalf("example %+v", g0.Examples[0])
	}
	capped := buildTxnGraph(a, 10)
	if g0, _ := checkTxnCycles(capped, 1); g0.Counts["edge-cap"] != 1 || g0.Note == "" {
		t.Fatalf("capped G0 %+v", g0)
	}
}

func TestCheckTxn_MalformedTxns(t *testing.T) {
	cases := map[string]string{
		"no value":           `{"index":0,"time":1,"type":"invoke","process":0,"f":"txn"}`,
		"ok without offset":  `{"index":0,"time":1,"type":"ok","process":0,"f":"txn","txn":{"id":"x","sends":[{"topic":"t","partition":0,"key":"k","value":"a","offset":-1}]}}`,
		"offset below none":  `{"index":0,"time":1,"type":"info","process":0,"f":"txn","txn":{"id":"x","sends":[{"topic":"t","partition":0,"key":"k","value":"a","offset":-2}]}}`,
		"negative end start": `{"index":0,"time":1,"type":"fail","process":0,"f":"txn","txn":{"id":"x","sends":[],"end_start":-5}}`,
		"bad read":           `{"index":0,"time":1,"type":"ok","process":0,"f":"txn","txn":{"id":"x","sends":[]},"reads":[{"topic":"t","partition":0,"records":[[-1,"a"]],"hw":1}]}`,
	}
	for name, line := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadHistory(bytes.NewReader([]byte(line))); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
		})
	}
	var buf bytes.Buffer
	if err := writeJSONL(&buf, cleanTxn().h); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if res := check(t, h); !res.Valid || res.Verdict != VerdictOK {
		t.Fatalf("decoded clean txn history: %s", res.Summary())
	}
	// A value a txn and a send both wrote is malformed, as for sends.
	b := &hb{}
	b.txn(0, OK, ws(w(0, "a", 0)))
	b.send(1, 0, "a", OK, 2)
	if _, err := Check(b.h, DefaultCheckConfig()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err %v, want ErrMalformed", err)
	}
}

// A txn run's report lists the txn checkers and their anomalies, and
// Recheck gives the same verdicts from history.jsonl.
func TestCheckTxn_ReportListsTxnCheckers(t *testing.T) {
	b := cleanTxn()
	b.txn(0, Fail, ws(w(1, "g", 4)))
	b.final(3, 1, OK, 6, 0, "b", 2, "e", 4, "g") // an aborted read
	res := check(t, b.h)
	if res.Valid || res.Checker(CheckG1a).Count != 1 {
		t.Fatalf("%s", res.Summary())
	}
	dir := t.TempDir()
	if err := writeRunReport(dir, b.h, res); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range TxnCheckerNames {
		if !strings.Contains(string(html), "<td>"+n+"</td>") {
			t.Errorf("index.html lacks checker %s", n)
		}
	}
	again, err := Recheck(dir, DefaultCheckConfig())
	if err != nil {
		t.Fatal(err)
	}
	if got := checkerNames(again); !slices.Equal(got, TxnCheckerNames) || again.Summary() != res.Summary() {
		t.Fatalf("recheck: %v %s, want %s", got, again.Summary(), res.Summary())
	}
}

// TestCheckTxn_MeasuresCountCommittedRecords: a txn run's availability
// counts each record meant to commit, acknowledged when its txn
// committed; records of txns meant to abort are left out.
func TestCheckTxn_MeasuresCountCommittedRecords(t *testing.T) {
	b := cleanTxn() // 5 committed records, 2 of a txn meant to abort
	inv := b.txnInv(5, w(1, "x", NoOffset))
	b.complete(inv, Fail, func(c *Op) { c.Error = "test: the send failed" }) // not meant to abort
	m := check(t, b.h).Measures
	if m.Attempted != 6 || m.Acknowledged != 5 {
		t.Fatalf("attempted %d acknowledged %d, want 6 and 5", m.Attempted, m.Acknowledged)
	}
}
