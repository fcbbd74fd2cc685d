package jepsen

import (
	"fmt"
	"testing"
	"time"
)

// linSends returns the values of the sends in tp's porcupine history
// with the offset each is pinned to.
func linSends(t *testing.T, h History, tp TP) map[string]int64 {
	t.Helper()
	a, err := analyze(h)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, op := range a.linOps()[tp] {
		if in, ok := op.Input.(linSendIn); ok {
			out[in.value] = op.Output.(linSendOut).offset
		}
	}
	return out
}

func TestLinOps_IndefiniteSends(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(1, 0, "lost", Info, 0) // never read: did not land below the final hw
	b.send(2, 0, "late", Info, 0) // read at 1: can only be there
	b.send(3, 0, "c", OK, 2)
	b.final(9, 0, OK, 3, 0, "a", 1, "late", 2, "c")
	got := linSends(t, b.h, TP{topic, 0})
	if _, ok := got["lost"]; ok {
		t.Errorf("an indefinite send nobody read, below a dense final read, stays in the porcupine history")
	}
	if off, ok := got["late"]; !ok || off != 1 {
		t.Errorf("indefinite send read at 1 pinned at %d (present %v), want 1", off, ok)
	}
	if got["a"] != 0 || got["c"] != 2 {
		t.Errorf("ok sends %v", got)
	}
	wantVerdict(t, b.h, CheckLinearizable, VerdictOK, 0)
}

// A final read that skipped an offset leaves room for an indefinite send
// nobody read: it must stay in the history, or a correct run would look
// illegal.
func TestLinOps_KeepsUnreadIndefiniteSendWhenFinalReadHasAGap(t *testing.T) {
	b := &hb{}
	b.send(0, 0, "a", OK, 0)
	b.send(1, 0, "x", Info, 0)
	b.send(2, 0, "c", OK, 2)
	b.final(9, 0, OK, 3, 0, "a", 2, "c")
	if off, ok := linSends(t, b.h, TP{topic, 0})["x"]; !ok || off != NoOffset {
		t.Fatalf("unread indefinite send: present %v offset %d, want present and unpinned", ok, off)
	}
	wantVerdict(t, b.h, CheckLinearizable, VerdictOK, 0)
}

// Many indefinite sends that never landed, each open to the end of the
// history, must not make porcupine's search blow up: with them left open
// a few thousand ops took longer than any sane timeout.
func TestCheck_ManyUnreadIndefiniteSendsStayDecidable(t *testing.T) {
	b := &hb{}
	var log []any
	off := int64(0)
	proc := 0
	for i := range 3000 {
		if i%100 == 50 {
			b.sendInv(1000+proc, 0, fmt.Sprintf("lost-%d", i)) // never completes: open to the end
			proc++
			continue
		}
		v := fmt.Sprintf("v%d", i)
		inv := b.sendInv(i%4, 0, v)
		if i%7 == 0 {
			b.poll(10, part(0, off, log[max(0, len(log)-12):]...)) // the last six records
		}
		b.sendDone(inv, OK, off)
		log = append(log, int(off), v)
		off++
	}
	b.final(99, 0, OK, off, log...)
	cfg := DefaultCheckConfig()
	cfg.LinearizabilityTimeout = 20 * time.Second
	res, err := Check(b.h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Checker(CheckLinearizable); c.Verdict != VerdictOK {
		t.Fatalf("linearizable: %s %v", c.Verdict, c.Counts)
	}
}
